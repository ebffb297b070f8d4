"""tfp_sgmcmc.keras: the library's samplers inside Keras 3 `model.fit`.

    import tfp_sgmcmc.keras as sgk

    model.compile(optimizer="sgd",               # the optimizer burns in
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True))
    sampling = sgk.SamplingCallback(
        sgk.SGHMC(step_size=1e-4, friction=100.), num_examples=len(x),
        prior=1., burnin_epochs=3, thinning=100, max_samples=50)
    model.fit(x, y, epochs=20, callbacks=[sampling])
    sampling.predict(x_test)                     # Bayesian model average
    sampling.save("posterior.npz")

The samplers are Keras optimizers whose train step runs the update of the
`tfp.mcmc` kernel of the same name (`tfp_sgmcmc.dynamics`, with the
kernel's seeds: `sampler.step_seed(k)`), applied to
grad U~ = N grad(mean NLL) - grad log p(theta). See `SamplingCallback`.

Subpackages, by job:

* `samplers`: the samplers (Keras optimizers over `tfp_sgmcmc.dynamics`).
* `fit`: `SamplingCallback` and what it runs inside `fit` (phases, logs,
  the health check, AMAGOLD's test energies, backups, multi-worker fit).
* `validation`: what the callback refuses or warns about (the model, the
  loss, `fit`'s arguments and other callbacks).
* `posterior`: the kept samples, predictions, scores and their files.
"""

import sys

from tfp_sgmcmc.keras.fit.callback import (SamplerDivergenceError,
                                          SamplingCallback)
from tfp_sgmcmc.keras.fit.multi_worker import enable_keras_multi_worker_fit
from tfp_sgmcmc.keras.losses import (GaussianNegativeLogLikelihood,
                                     NegativeLogLikelihood,
                                     resolve_likelihood)
from tfp_sgmcmc.keras.posterior import evaluation
from tfp_sgmcmc.keras.posterior.evaluation import (
    accuracy, expected_calibration_error, negative_log_likelihood,
    predictive_entropy)
from tfp_sgmcmc.keras.posterior.posterior import (Posterior,
                                                  RegressionPrediction)
from tfp_sgmcmc.keras.priors import FlatPrior, GaussianPrior
from tfp_sgmcmc.keras.samplers import (AMAGOLD, SGHMC, SGLD, SGNHT,
                                       PreconditionedSGLD, SamplerOptimizer)

# `tfp_sgmcmc.keras.evaluation` is a public module that lives in `posterior`.
sys.modules[__name__ + ".evaluation"] = evaluation

__all__ = [
    "SamplingCallback", "SamplerDivergenceError", "Posterior",
    "RegressionPrediction", "evaluation", "predictive_entropy",
    "negative_log_likelihood", "expected_calibration_error", "accuracy",
    "SamplerOptimizer", "SGLD", "SGHMC", "SGNHT", "PreconditionedSGLD",
    "AMAGOLD",
    "GaussianPrior", "FlatPrior",
    "NegativeLogLikelihood", "GaussianNegativeLogLikelihood",
    "resolve_likelihood", "enable_keras_multi_worker_fit",
]
