"""Whether a kernel's chains shared their minibatches: R-hat and
cross-chain ESS assume independent chains, and chains that see one
minibatch per step share their gradient noise (`to_inference_data` and
`summarize` record and report it).
"""

__all__ = ["minibatch_sharing", "SHARED", "INDEPENDENT", "FULL_BATCH"]


# What `minibatch_sharing` returns.
SHARED = "shared by all chains"
INDEPENDENT = "independent per chain"
FULL_BATCH = "full batch"


def _sampled_target(kernel):
  """The tfp_sgmcmc target a kernel samples, looking through TFP's wrappers
  (`inner_kernel`: step-size adaptation, `TransformedTransitionKernel`,
  `MetropolisHastings`, our `StepSeeded`); None if there is none."""
  seen = 0
  while kernel is not None and seen < 64:
    target = getattr(kernel, "target", None)
    if target is not None and hasattr(target, "minibatch_energy"):
      return target
    kernel = getattr(kernel, "inner_kernel", None)
    seen += 1
  return None


def minibatch_sharing(kernel):
  """Whether the chains of a run of `kernel` shared their minibatches.

  The chains of one `sample_chain` call (the leading dimensions of the
  state) see the same minibatch at each step unless the target draws one per
  chain. Chains that share their gradient noise are not independent: R-hat
  and cross-chain ESS come out optimistic (too close to 1, too large).

  Args:
    kernel: a kernel of this package, or TFP's wrappers around one
      (looked through by their `inner_kernel`), or None.

  Returns:
    `SHARED` ("shared by all chains": `InMemoryTarget` by default,
    `DatasetTarget`, `TFRecordTarget`, `ShardedTarget`), `INDEPENDENT`
    ("independent per chain": `InMemoryTarget(independent_minibatches=True)`,
    or a `NoisyGradientTarget`, whose noise is drawn per chain),
    `FULL_BATCH` ("full batch": exact gradients, no minibatch), or None
    when it cannot tell (no kernel, a kernel of another library, a target
    of the user's own class). `ControlVariateTarget`, `TemperedTarget` and
    the `LogProbFnTarget` of a TFP wrapper answer as the target they are
    built on.

  #### Example

  ```python
  shared = tfp_sgmcmc.InMemoryTarget(log_likelihood, (x, y), batch_size=32)
  print(tfp_sgmcmc.diagnostics.minibatch_sharing(
      tfp_sgmcmc.SGLD(shared, 1e-3)))            # shared by all chains
  own = tfp_sgmcmc.InMemoryTarget(log_likelihood, (x, y), batch_size=32,
                                  parameter_shapes=[d],
                                  independent_minibatches=True)
  print(tfp_sgmcmc.diagnostics.minibatch_sharing(
      tfp_sgmcmc.SGLD(own, 1e-3)))               # independent per chain
  ```
  """
  target = _sampled_target(kernel)
  # Local imports: the targets import nothing from chains, and this module
  # is imported by them indirectly through the package.
  from tfp_sgmcmc.targets import dataset  # pylint: disable=g-import-not-at-top
  from tfp_sgmcmc.targets import in_memory  # pylint: disable=g-import-not-at-top
  from tfp_sgmcmc.targets import sharded  # pylint: disable=g-import-not-at-top
  from tfp_sgmcmc.targets import synthetic  # pylint: disable=g-import-not-at-top
  for _ in range(64):
    if target is None:
      return None
    if bool(getattr(target, "is_full_batch", False)):
      return FULL_BATCH
    if isinstance(target, in_memory.InMemoryTarget):
      return INDEPENDENT if target.independent_minibatches else SHARED
    if isinstance(target, (dataset.DatasetTarget, sharded.ShardedTarget)):
      return SHARED
    if isinstance(target, synthetic.NoisyGradientTarget):
      return INDEPENDENT
    target = getattr(target, "base_target", None)
  return None
