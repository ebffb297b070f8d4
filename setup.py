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
        # The lowest versions checked to work: TensorFlow 2.16 with TFP 0.24
        # and tf-keras 2.16 (with Keras 3.15), in a fresh virtual environment
        # (README, "Versions"; 2.15 and older not tried: they predate Keras 3
        # as TensorFlow's Keras). The project's machines run 2.21 / 0.25 /
        # 2.21. No upper bounds: a cap below a runtime's TensorFlow (Colab's)
        # would make pip replace it. Each TFP release targets one TensorFlow
        # (0.24: 2.16; 0.25: 2.18, and it runs on 2.21 here); TFP checks at
        # import that TensorFlow is new enough.
        "tensorflow>=2.16",
        "tensorflow-probability>=0.24",
        "tf-keras>=2.16",
        "keras>=3",
        # With TF 2.16 (protobuf < 5) add "tensorflow-metadata<1.21" by hand
        # (README, "Versions"): 1.21 needs a newer protobuf than it declares.
        "tensorflow-datasets>=4.9",
        # tensorflow-datasets 4.9 imports it when it loads a data set but
        # does not declare it (ModuleNotFoundError at tfds.load otherwise).
        "importlib_resources>=5",
        "numpy>=1.26",
    ],
    extras_require={
        "test": ["pytest>=8", "pytest-xdist>=3", "scipy>=1.11",
                 "matplotlib>=3.8", "hypothesis>=6"],
        "examples": ["matplotlib>=3.8"],
        # Side-by-side benchmarks against BlackJAX (benchmarks/vs_blackjax.py).
        "bench": ["jax>=0.4", "blackjax>=1.2"],
    },
)
