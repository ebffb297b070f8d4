"""The samplers: SG-MCMC update rules as Keras 3 optimizers.

Each class here is a `keras.optimizers.Optimizer` whose update is one step of
a stochastic-gradient sampler, computed by the per-gradient step function of
the `tfp.mcmc` kernel of the same name (`dynamics.sgld_update`,
`dynamics.sghmc_update`, `dynamics.amagold.leapfrog_step`, ...), the
code its `one_step` runs. A Keras train step gives the
gradient of the mean loss; the sampler turns it into the gradient of the
minibatch energy

    grad U~(theta) = N grad(mean NLL over the batch) - grad log p(theta)

with N (`num_examples`) and the prior set by `SamplingCallback`, which also
swaps the sampler in after burn-in, keeps samples and runs AMAGOLD's
Metropolis-Hastings test. Use the samplers through that callback.

Units: the arguments are those of the kernels of the same names
(`tfp_sgmcmc.SGHMC`, `tfp_sgmcmc.AMAGOLD`, ...), applied to grad U. The
`from_sgd_momentum` / `from_sgd_parameters` constructors take the same SGD
units as the kernels' classmethods: a learning rate eta applied to grad U.
An SGD learning rate lambda on the *mean* loss, as Keras users know it,
corresponds to eta = lambda / N.

Noise: each step draws its noise as the kernel's `one_step` does from its
seed, with the counter-based stateless seed `step_seed(step)` = (seed, step
count) (for AMAGOLD, one per outer step, split along the trajectory as the
kernel splits it). Unlike an integer seed it differs from step to step; unlike a
`keras.random.SeedGenerator`, it needs no state write inside the
cross-replica update, so under `tf.distribute.MirroredStrategy` every
replica draws the same noise from the same all-reduced gradient and the
replicas' weights stay identical. It compiles under XLA (`jit_compile=True`).

State: the momentum (and the other per-sampler state) are optimizer
variables, created under the model's distribution strategy; the running
moments of the chain's position (`tfp.experimental.stats.RunningVariance`,
updated every transition, in the train step) are too.
"""

from tfp_sgmcmc.keras.samplers.amagold import AMAGOLD
from tfp_sgmcmc.keras.samplers.base import SamplerOptimizer
from tfp_sgmcmc.keras.samplers.hamiltonian import SGHMC, SGNHT
from tfp_sgmcmc.keras.samplers.langevin import SGLD, PreconditionedSGLD
from tfp_sgmcmc.keras.samplers.options import check_sampler_options

__all__ = ["SamplerOptimizer", "SGLD", "SGHMC", "SGNHT", "PreconditionedSGLD",
           "AMAGOLD", "check_sampler_options"]
