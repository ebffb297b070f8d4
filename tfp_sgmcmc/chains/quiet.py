"""Warnings that say nothing a user of this library can act on, silenced
where the library itself runs a chain.

TFP's `sample_chain` (and `sample_fold`, `step_kernel`) warn "supplied
`TransitionKernel` is not calibrated. Markov chain may not converge to
intended target distribution." whenever `kernel.is_calibrated` is False.
Every stochastic-gradient kernel without an M-H test (SGLD, SGHMC, SGNHT,
pSGLD, SG-NUTS, the inexact AMAGOLD) is uncalibrated by design: its bias
comes from the step size and the minibatch noise, and shrinks with them.
The warning is expected for these kernels; what a user can act on
(divergences, heating, R-hat, ESS) is what `tfp_sgmcmc.summarize` and the
library's run reports say. The library's own drivers
(`sample_chain_with_progress`, `sample_moments`, `sample`) run TFP's loops
inside `expected_warnings_silenced()`; a user's own call of
`tfp.mcmc.sample_chain` still shows the warning, as TFP intends.
"""

import contextlib
import warnings

__all__ = ["expected_warnings_silenced", "UNCALIBRATED_MESSAGE"]

# The start of TFP's message (a regular expression for `warnings`' filter).
UNCALIBRATED_MESSAGE = r"supplied `TransitionKernel` is not calibrated"


@contextlib.contextmanager
def expected_warnings_silenced():
  """Silences TFP's "`TransitionKernel` is not calibrated" warning inside.

  Only that message is filtered, and only while the block runs (warnings'
  filters are restored on exit); every other warning, ours included
  (`UnhealthyChainWarning`), passes. TFP warns when a loop is traced, so a
  compiled loop is quiet when its first call (the trace) runs inside.

  #### Example

  ```python
  with tfp_sgmcmc.chains.quiet.expected_warnings_silenced():
    draws = tfp.mcmc.sample_chain(100, tf.zeros([4, d]),
                                  kernel=tfp_sgmcmc.SGLD(target, 1e-4),
                                  trace_fn=None, seed=[0, 1])
  ```
  """
  with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=UNCALIBRATED_MESSAGE)
    yield
