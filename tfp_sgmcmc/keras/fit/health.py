"""The health check of a chain in `fit`: the loss, and whether the weights
and the sampler's state are finite (and, with a bound, not too large); and
the heating check of the epoch energies (`HeatingMonitor`)."""

import math

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.chains import diagnostics

__all__ = ["HealthCheck", "SamplerDivergenceError", "divergence_report",
           "use_xla", "HeatingMonitor"]


def use_xla(model):
  """Whether the callback's own compiled functions use XLA: as the model's
  train step does (`compile(jit_compile=True)`), and not under a
  distribution strategy (whose variables they read in cross-replica
  context)."""
  return bool(getattr(model, "jit_compile", False) is True and
              not tf.distribute.has_strategy())


def _at_least_float32(x):
  return tf.cast(x, tf.float32) if x.dtype.size < 4 else x


class SamplerDivergenceError(RuntimeError):
  """Raised by `SamplingCallback(on_divergence="raise")` when the chain's
  state or loss becomes non-finite (or exceeds `max_abs_weight`), and when
  a callback whose chain diverged is used for another `fit`.

  Args:
    message: the reason: what became non-finite or too large, and when.
  """


class HealthCheck:
  """One small compiled reduction over the model's weights and the
  sampler's floating state, rebuilt when the sampler changes. AMAGOLD's
  M-H test runs its `body` inside the test's own compiled call (`values`
  then come from there).

  Args:
    max_abs_weight: None, or a bound on |theta| beyond which the chain
      counts as diverged.
  """

  def __init__(self, max_abs_weight):
    self.max_abs_weight = max_abs_weight
    self._function = None
    self._for = None
    self._entries = None
    self.body = None  # The check's Python function, for composition.
    self.version = 0  # Counts the builds (a composed function is rebuilt).

  def reset(self):
    """Forget the compiled check (the sampler was rebuilt)."""
    self._for = None

  def _build(self, model, sampler, strategy):
    entries = [(v.path, v, True) for v in model.trainable_variables]
    for v in sampler.variables:
      if tf.as_dtype(v.dtype).is_floating:
        entries.append((getattr(v, "path", v.name), v, False))
    self._entries = entries

    def health():
      # A sum is finite iff every term is (or it overflowed: `problem`
      # then checks the terms), one pass per variable.
      sums = tf.stack([tf.cast(tf.reduce_sum(_at_least_float32(v.value)),
                               tf.float64) for _, v, _ in entries])
      biggest = tf.stack([tf.cast(tf.reduce_max(tf.abs(v.value)),
                                  tf.float64)
                          for _, v, weight in entries if weight])
      return sums, biggest
    with strategy.scope():
      # Not XLA: its reductions are slower than TensorFlow's on CPU.
      self._function = tf.function(health, autograph=False)
    self.body = health
    self._for = sampler
    self.version += 1

  def ensure_built(self, model, sampler, strategy):
    """Builds the check for `sampler` if needed; returns its `body` (a
    function of nothing returning (sums, biggest) tensors: each variable's
    sum, the largest |theta| of each weight)."""
    if self._for is not sampler:
      self._build(model, sampler, strategy)
    return self.body

  def problem(self, model, sampler, strategy, logs, full, values=None):
    """What diverged, as a phrase for the message; "" if nothing did. The
    loss in `logs` always, the state only with `full` (from `values`, the
    output of `body` computed elsewhere, if given)."""
    loss = None if logs is None else logs.get("loss")
    loss_ok = loss is None or math.isfinite(float(loss))
    if loss_ok and not full:
      return ""
    self.ensure_built(model, sampler, strategy)
    if values is None:
      with strategy.scope():
        values = self._function()
    sums, biggest = (np.asarray(v) for v in values)
    finite = np.isfinite(sums)
    if not finite.all():
      with strategy.scope():
        finite = [bool(tf.reduce_all(tf.math.is_finite(v.value))) if not ok
                  else True for (_, v, _), ok in zip(self._entries, finite)]
    problems = []
    if not loss_ok:
      problems.append(f"the loss (running mean over the epoch: "
                      f"{float(loss)})")
    bad = [(name, weight) for (name, _, weight), ok in
           zip(self._entries, finite) if not ok]
    weights = [n for n, weight in bad if weight]
    if weights:
      problems.append(f"the weights {_short_list(weights)}")
    kinds = {}
    for name, weight in bad:
      if not weight:
        short = name.rsplit("/", 1)[-1]
        kind = ("the momentum" if "momentum" in short else
                "the running moments" if "moment_" in short else
                "the thermostat" if "thermostat" in short else
                f"the sampler's {short!r}")
        kinds.setdefault(kind, None)
    problems.extend(kinds)
    largest = float(np.max(biggest))
    if problems:
      return (", ".join(problems) + " became non-finite (largest "
              f"|theta| {largest:.3g})" if math.isfinite(largest) else
              ", ".join(problems) + " became non-finite")
    if self.max_abs_weight is not None and largest > self.max_abs_weight:
      return (f"the weights grew to |theta| = {largest:.3g}, beyond "
              f"max_abs_weight={self.max_abs_weight:g}")
    return ""


def _short_list(names, limit=3):
  shown = ", ".join(repr(n) for n in names[:limit])
  more = len(names) - limit
  return shown + (f" and {more} more" if more > 0 else "")


def _step_hints(sampler):
  """(the settings to change, the usual cause) in the units the sampler
  was built in: `from_sgd_momentum` / `from_sgd_parameters`' learning_rate
  and momentum_decay, else step_size and friction."""
  name = type(sampler).__name__
  config = sampler.get_config()
  built, sgd = getattr(sampler, "_sgd_arguments", None) or (None, None)
  num_examples = getattr(sampler, "num_examples", None)
  if sgd is not None:
    # Built in SGD units: the hints and the cause in the arguments passed.
    hints = [f"a smaller learning_rate (you passed learning_rate="
             f"{sgd['learning_rate']!r} to {name}.{built}; the step_size it "
             f"gives is sqrt(learning_rate) = {config.get('step_size')!r})",
             f"a larger momentum_decay (now {sgd['momentum_decay']!r})"]
    unit = "learning_rate"
    value = sgd["learning_rate"]
  else:
    hints = [f"a smaller step_size (now {config.get('step_size')!r})"]
    if "friction" in config:
      hints.append(f"a larger friction (now {config['friction']!r})")
    unit = "step_size"
    value = config.get("step_size")
  if "diffusion" in config:
    hints.append(f"a larger diffusion (now {config['diffusion']!r})")
  if config.get("loss_scale_factor") is not None:
    hints.append("a smaller loss_scale_factor (now "
                 f"{config['loss_scale_factor']!r}; the float16 loss may "
                 "overflow)")
  cause = _not_divided_by_n(unit, value, num_examples,
                            bool(getattr(sampler, "_uses_momentum", False)))
  return hints, cause


def step_size_advice(sampler):
  """' Try <the settings>.<the usual cause>': the divergence report's
  advice, for the warnings of a chain that is still finite."""
  hints, cause = _step_hints(sampler)
  return f" Try {' or '.join(hints)}.{cause}"


def divergence_report(sampler, epoch, batch, num_kept, what, data=""):
  """The record of a divergence (`SamplingCallback.divergence`), with a
  message naming the sampler, where it happened, what diverged and the
  settings to change; or, when `data` (`finite_data.non_finite_data`)
  names training data that is not finite, that data as the cause."""
  name = type(sampler).__name__
  hints, cause = _step_hints(sampler)
  where = f"epoch {epoch}"
  if batch is not None:
    where += f", batch {batch}"
  if data:
    # No step size helps: every batch holding such an example has a
    # non-finite loss.
    what += (f". The training data is not finite: {data}; the loss of a "
             "batch holding such an example is not finite whatever the "
             "step size")
    advice = " Remove or impute those examples (e.g. np.isfinite) and fit again."
  else:
    advice = f" Try {' or '.join(hints)}.{cause}"
  message = (
      f"{name} diverged at {where} (sampler step {sampler.step_count}): "
      f"{what}. Sampling stopped; the {num_kept} sample(s) kept before it "
      "are finite and stay in the callback (.samples, .posterior), and the "
      "model's weights are set to the last of them"
      f"{'' if num_kept else ' (none kept: the weights are left as they are)'}"
      f".{advice}")
  return dict(sampler=name, epoch=epoch, batch=batch,
              step=sampler.step_count, what=what, num_samples=num_kept,
              non_finite_data=data or None, message=message)


def _not_divided_by_n(unit, value, num_examples, momentum):
  """The usual cause of a divergence, in the units of the argument the user
  passed: a rate for the mean loss used on the energy, N times larger."""
  if not num_examples or not isinstance(value, (int, float)):
    return ""
  cause = (f" The usual cause: a {unit} meant for the mean loss (an SGD "
           f"learning rate) not divided by N = num_examples = "
           f"{num_examples}: the sampler's gradient is the energy's, N x "
           "the mean loss's, so the same rate moves the weights N times as "
           "far")
  if unit == "step_size" and momentum:
    return cause + (": the step_size of a sampler with a momentum is the "
                    "square root of a learning rate, so from a rate lambda "
                    "on the mean loss it is sqrt(lambda / N).")
  return cause + (f" (e.g. {unit}={value!r} / {num_examples} = "
                  f"{value / num_examples:.3g}).")


class HeatingMonitor:
  """Warns (once per callback) when the chain heats up without diverging.

  The epoch energies (`energy` in the logs: N x the epoch's mean loss -
  log prior) are the window means of `tfp_sgmcmc.diagnostics.heating`: the
  reference is the energy of the last epoch run wholly by the burn-in
  optimizer (near the mode; without a burn-in, the first sampling epoch),
  and from the third epoch run wholly by the sampler on, the statistic
  (rise of the last epoch's energy beyond d/2 for the model's d trainable
  parameters, in units of sqrt(d/2) plus the noise) is compared with
  `diagnostics.HEATING_THRESHOLD`. The noise of an epoch's energy is
  N x the standard error of its mean loss over its batches (each batch's
  loss recovered from Keras' running mean), measured on the reference
  epoch: a correct chain's epochs are as noisy as it, and the wide
  fluctuations of a hot chain do not count as noise.

  At the end of a fit (`fit_end`), the trend of the sampling epochs'
  energies (`diagnostics.energy_trend`: the last third's mean over the
  middle third's) catches an energy still rising when sampling ends,
  which the level test above allows while the rise stays below d/2 plus its
  threshold (a large model relaxing slowly from the mode, or heating
  slowly).
  """

  def __init__(self):
    self.reference = None
    self.reference_se = 0.
    self.energies = []
    self.heating = None  # The latest statistic (None before 3 epochs).
    self.trend = None  # The trend statistic at the end of the last fit.
    self.descent = None  # The descent statistic at the end of the last fit.
    self.warned = False
    self._running = []  # (batches seen, running mean loss) this epoch.

  def batch_end(self, batches_seen, loss):
    """Keras' running mean of the loss after `batches_seen` batches."""
    if loss is not None:
      self._running.append((int(batches_seen), float(loss)))

  def _epoch_se(self, num_examples):
    """N x the standard error of the epoch's mean loss, from the losses of
    its batches (or executions of several batches, weighted by their
    number); NaN with fewer than two."""
    pairs, self._running = self._running, []
    counts = np.array([0] + [c for c, _ in pairs], np.float64)
    sums = np.array([0.] + [c * m for c, m in pairs])
    sizes, totals = np.diff(counts), np.diff(sums)
    ok = sizes > 0
    sizes, totals = sizes[ok], totals[ok]
    if sizes.size < 2:
      return math.nan
    losses = totals / sizes
    mean = totals.sum() / sizes.sum()
    # Variance of one batch's loss, from executions of `sizes` batches.
    var = np.sum(sizes * (losses - mean) ** 2) / (sizes.size - 1)
    return num_examples * math.sqrt(var / sizes.sum())

  def epoch_end(self, energy, sampled_whole_epoch, burnin_whole_epoch,
                num_parameters, num_examples, accept_rate=None):
    """Records an epoch's energy; returns a warning message or None.

    `accept_rate`: the epoch's M-H acceptance for a sampler with a test
    (AMAGOLD), else None. Its epoch energy is the trajectories' (the loss
    where each gradient was taken), not the chain's, so its message says
    what a rise means there: rejected proposals, not a biased chain."""
    se = self._epoch_se(num_examples)
    if energy is None or not math.isfinite(energy) or not math.isfinite(se):
      return None
    if burnin_whole_epoch:
      self.reference, self.reference_se, self.energies = energy, se, []
      return None
    if not sampled_whole_epoch:
      return None
    if self.reference is None and not self.energies:
      self.reference_se = se
    self.energies.append(energy)
    if len(self.energies) < 3:
      return None
    means = np.asarray(self.energies, np.float64)[:, np.newaxis]
    self.heating = float(diagnostics.heating(
        means, num_parameters, self.reference,
        noise=math.sqrt(2.) * self.reference_se)[0])
    if self.warned or self.heating <= diagnostics.HEATING_THRESHOLD:
      return None
    self.warned = True
    start = ("the burn-in's last epoch" if self.reference is not None
             else "the first sampling epoch")
    first = self.reference if self.reference is not None else means[0, 0]
    rise = (
        f"the epoch energy rose from {first:.6g} ({start}) to {energy:.6g}, "
        f"far beyond the d/2 = {0.5 * num_parameters:g} that sampling "
        f"{num_parameters} parameters explains (heating statistic "
        f"{self.heating:.3g} > {diagnostics.HEATING_THRESHOLD:g}; "
        "docs/keras.md)")
    fix = ("the step size is probably too large for the integrator (or the "
           "friction too small). Nothing is stopped; "
           "`SamplingCallback.heating` holds the statistic.")
    if accept_rate is not None and math.isfinite(accept_rate):
      return (
          f"the trajectories are heating up: {rise}, and the M-H test "
          f"accepted {accept_rate:.0%} of this epoch's trajectories. This "
          "energy is the trajectories' (the loss where each gradient was "
          "taken), not the chain's (`exact_energy` in the logs, where "
          "computed): the test keeps the chain exact, but it moves only by "
          f"the trajectories it accepts, so it mixes slowly: {fix}")
    return (f"the chain is heating up: {rise}. The samples are not the "
            f"posterior's: {fix}")

  def fit_end(self, num_parameters, tested=False):
    """At the end of a fit: a warning message if the sampling epochs'
    energy was still rising at the end (and the level test has not warned),
    else None. `tested`: the sampler has an M-H test (AMAGOLD), whose epoch
    energy is its trajectories', not its chain's (see `epoch_end`)."""
    if len(self.energies) < 3 or self.warned:
      return None
    means = np.asarray(self.energies, np.float64)[:, np.newaxis]
    self.trend = float(diagnostics.energy_trend(
        means, num_parameters, window_noise=self.reference_se)[0])
    if self.trend <= diagnostics.HEATING_THRESHOLD:
      return self._descent_message(means[:, 0], num_parameters)
    self.warned = True
    thirds = np.array_split(means[:, 0], 3)
    rise = (
        f"the epoch energy went from {means[0, 0]:.6g} to "
        f"{means[-1, 0]:.6g} over the "
        f"{len(means)} sampling epochs, the last third's mean "
        f"{thirds[2].mean():.6g} above the middle third's "
        f"{thirds[1].mean():.6g} by {self.trend:.3g} x (sqrt(d/2) + noise) "
        f"for d = {num_parameters} (> {diagnostics.HEATING_THRESHOLD:g}; "
        "docs/keras.md)")
    statistic = ("Nothing is stopped; `SamplingCallback.heating_trend` "
                 "holds the statistic.")
    if tested:
      return (
          "the trajectories' energy was still rising when sampling ended: "
          f"{rise}. This energy is the trajectories' (the loss where each "
          "gradient was taken), not the chain's (`exact_energy` in the "
          "logs, where computed): the M-H test keeps the chain exact, but "
          "trajectories that heat up are rejected more and more, so the "
          "chain moves less and less (a smaller step size or more "
          f"friction). {statistic}")
    return (
        f"the energy was still rising when sampling ended: {rise}. The "
        "chain has not settled at the posterior: it is still relaxing from "
        "where sampling began (sample for more epochs, or a larger step "
        "size if it moves too slowly) or it heats up slowly (a smaller step "
        f"size or more friction). {statistic}")

  def _descent_message(self, energies, num_parameters):
    """A warning message if the first sampling epoch's energy sits above
    the level the chain settled at (the last half of the sampling epochs'
    mean) by more than `diagnostics.HEATING_THRESHOLD` x (sqrt(d/2) +
    noise), else None.

    Begun at the mode (a burn-in that reached it), a chain's energy rises
    by d/2 and settles there; one begun away from the posterior (a burn-in
    too short, or none) descends while its first samples are kept, and
    those widen the moments. An epoch's mean energy holds the descent in
    proportion to the steps it took, so a chain that settles within a few
    steps of a long epoch is not flagged."""
    settled = energies[len(energies) // 2:]
    noise = self.reference_se * math.sqrt(1. + 1. / settled.size)
    self.descent = float((energies[0] - settled.mean()) / (
        math.sqrt(0.5 * num_parameters) + noise))
    if not self.descent > diagnostics.HEATING_THRESHOLD:
      return None
    self.warned = True
    return (
        f"sampling began above the posterior: the first sampling epoch's "
        f"energy was {energies[0]:.6g} and the chain settled at "
        f"{settled.mean():.6g} (the last half of the {energies.size} "
        f"sampling epochs), {self.descent:.3g} x (sqrt(d/2) + noise) lower "
        f"for d = {num_parameters} (> {diagnostics.HEATING_THRESHOLD:g}; "
        "docs/keras.md). The first samples and the running moments hold the"
        " descent, which widens them: burn in for longer (`burnin_epochs`),"
        " until the burn-in's loss stops falling. Nothing is stopped; "
        "`SamplingCallback.energy_descent` holds the statistic.")
