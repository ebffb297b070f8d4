"""tfp_sgmcmc: stochastic-gradient MCMC kernels for TensorFlow Probability."""
from setuptools import find_packages, setup

setup(
    name="tfp_sgmcmc",
    version="0.1.0",
    description=("Stochastic-gradient MCMC (SGLD, SGHMC, AMAGOLD, ...) as "
                 "tfp.mcmc.TransitionKernels"),
    packages=find_packages(include=["tfp_sgmcmc", "tfp_sgmcmc.*"]),
    python_requires=">=3.10",
    install_requires=[
        # Versions known to work together: TFP 0.25 is built against TF 2.21
        # (checked on this project's machines); TFP imports tf-keras.
        "tensorflow>=2.21,<2.22",
        "tensorflow-probability>=0.25,<0.26",
        "tf-keras>=2.21,<2.22",
        "tensorflow-datasets>=4.9",
        # tensorflow-datasets 4.9 imports it when it loads a data set but
        # does not declare it (ModuleNotFoundError at tfds.load otherwise).
        "importlib_resources>=5",
        "numpy>=1.26",
    ],
    extras_require={
        "test": ["pytest>=8", "scipy>=1.11", "matplotlib>=3.8",
                 "hypothesis>=6"],
        "examples": ["matplotlib>=3.8"],
        # Side-by-side benchmarks against BlackJAX (benchmarks/vs_blackjax.py).
        "bench": ["jax>=0.4", "blackjax>=1.2"],
    },
)
