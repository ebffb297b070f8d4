"""tfp_sgmcmc's build: everything is declared in pyproject.toml (PEP 621).

This file stays for tools that still call `setup.py` directly.
"""
from setuptools import setup

setup()
