"""What `tfp_sgmcmc.sample` returns: its draws (`SampleResult`) and its one
report (`SampleReport`, printed by `str`)."""

import collections

import numpy as np

from tfp_sgmcmc.chains import arrival as arrival_lib
from tfp_sgmcmc.chains.mixing import rank_ess_note, rank_rhat_note

__all__ = ["SampleReport", "SampleResult"]


class SampleReport(collections.namedtuple("SampleReport", [
    "kernel", "start", "control_variates", "minibatches", "warmup",
    "arrived", "arrival", "extended", "acceptance", "divergences", "heating",
    "max_rhat", "min_ess", "problems", "seconds", "mass", "ksd",
    "approximate", "max_rank_rhat", "min_bulk_ess", "min_tail_ess"],
    defaults=(None,) * 6)):
  """The one report of a `sample` call (printed by `str(report)`).

  Attributes:
    kernel: the kernel's class name.
    start: how the chains' starting states were chosen.
    control_variates: whether the kernel sampled a `ControlVariateTarget`.
    minibatches: what the chains' gradients share ("independent
      minibatches", "full batch: N = ... <= ...", or why they share them).
    warmup: the `WarmupReport` of the (last) warm-up.
    arrived: whether the warm-up ended at the posterior
      (`tfp_sgmcmc.chains.arrival`).
    arrival: the `Arrival` record behind `arrived`.
    extended: whether the warm-up was run a second time because the first
      had not arrived.
    acceptance: per chain, the mean acceptance probability (or accepted
      fraction) of the sampling phase, or None.
    divergences: per chain, the diverged steps.
    heating: per chain, `summarize`'s heating statistic, or None.
    max_rhat, min_ess: split R-hat and ESS over coordinates (chains pooled).
    max_rank_rhat, min_bulk_ess, min_tail_ess: ArviZ's rank-normalised
      R-hat, bulk and tail ESS, the worst over coordinates (see
      `summarize`), or None.
    problems: what went wrong (empty for a healthy run).
    seconds: wall time per phase (`mode`, `warmup`, `sampling`, `total`).
    mass: the mass matrix the draws were made with: "dense", "diagonal",
      "dense Laplace" (M^{-1} the Laplace covariance at the mode, fixed:
      a vector of more than `DENSE_MASS_MAX` coordinates started by
      Newton's method), or "none" (a kernel without one);
      `warmup.choices` says why, and
      `warmup.num_leapfrog_steps` gives AMAGOLD's T where it was tuned.
    ksd: with `sample(ksd=True)`, the kernel Stein discrepancy of the draws
      (chains pooled, `tfp_sgmcmc.ksd`; its cost is `seconds["ksd"]`), else
      None.
    approximate: why the draws' law is not the posterior (a kernel with no
      exact Metropolis-Hastings test, `kernel.is_calibrated` False), or
      None for an exact kernel.
  """
  __slots__ = ()

  def __str__(self):
    w = self.warmup
    acc = ("-" if self.acceptance is None else
           f"{np.min(self.acceptance):.2f}-{np.max(self.acceptance):.2f}")
    heat = ("-" if self.heating is None else f"{np.max(self.heating):.1f}")
    tuned_length = f"T = {w.num_leapfrog_steps} (tuned), "
    mass = "no" if self.mass == "none" else self.mass or "diagonal"
    chains = len(self.divergences)
    # Arrived beyond MAX_DISTANCE only where the chains' slopes disagree in
    # sign: a direction whose marginal sd dwarfs its conditional one.
    far = (", along a poorly identified direction, where the chains' "
           "slopes disagree" if self.arrived and
           self.arrival.distance > arrival_lib.MAX_DISTANCE else "")
    lines = [
        f"tfp_sgmcmc.sample: {self.kernel}, {chains} "
        f"chain{'' if chains == 1 else 's'}; "
        f"start {self.start}; control variates "
        f"{'on' if self.control_variates else 'off'}; {self.minibatches}.",
        f"  warm-up: {w.num_steps} steps"
        f"{' (extended)' if self.extended else ''}, {mass} mass, "
        f"{'' if w.num_leapfrog_steps is None else tuned_length}"
        f"step size {w.step_size:.3g}, acceptance "
        f"{'' if self.approximate is None else 'of its exact test '}"
        f"{w.acceptance:.2f}, "
        f"{'arrived' if self.arrived else 'NOT ARRIVED'} (distance "
        f"{self.arrival.distance:.1f} posterior sds{far}).",
        f"  sampling: acceptance {acc}, divergences "
        f"{int(np.sum(self.divergences))}, heating {heat}, R-hat "
        f"{self.max_rhat:.3f}{rank_rhat_note(self.max_rank_rhat)}, min ESS "
        f"{self.min_ess:.0f}"
        f"{rank_ess_note(self.min_bulk_ess, self.min_tail_ess)}.",
        *([] if self.approximate is None else [
            f"  approximate draws: {self.approximate}"]),
        *([] if self.ksd is None else [
            f"  kernel Stein discrepancy {self.ksd:.3g} (chains pooled; "
            "lower is closer to the posterior: compare runs of this model)."]),
        "  time: " + ", ".join(f"{k} {v:.1f} s"
                               for k, v in self.seconds.items()) + ".",
        "  " + ("problems: " + "; ".join(self.problems) if self.problems
                else "no problems found.")]
    return "\n".join(lines)


class SampleResult(collections.namedtuple("SampleResult", [
    "draws", "inference_data", "kernel", "final_state",
    "final_kernel_results", "states", "trace", "target", "report"])):
  """What `sample` returns.

  Attributes:
    draws: the draws, [num_results, chains, ...] per part, in the model's
      structure (a JointDistribution's constrained parameters).
    inference_data: ArviZ `InferenceData` with `sample_stats` (None when
      ArviZ is not installed).
    kernel: the frozen kernel (tuned step size and mass) that drew them.
    final_state: the chains' last state, as the kernel sees it (for a
      JointDistribution: unconstrained, one vector per chain, which
      `JointDistributionTarget.structured` splits into the nodes).
    final_kernel_results: the last `StepSeededResults`: with
      `StepSeeded(kernel, final_kernel_results.base_seed)` (the sampling
      phase's seed, drawn from `seed`) they continue the chain bit for
      bit, and
      `save_chain(path, final_state, final_kernel_results, kernel)` saves it.
    states: the draws unconstrained (for a JointDistribution: in the
      structure of its nodes).
    trace: the traced fields (`diverged`, `log_accept_ratio`, ...).
    target: the target the kernel sampled.
    report: the `SampleReport`.
  """
  __slots__ = ()
