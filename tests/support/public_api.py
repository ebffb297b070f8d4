"""The public modules of the package, as the docs tests read them: the
packages whose namespaces are public, and every module one of them lists in
`__all__` (`tfp_sgmcmc.dynamics.langevin`, ...)."""

import importlib
import types

PUBLIC_PACKAGES = ("tfp_sgmcmc", "tfp_sgmcmc.keras", "tfp_sgmcmc.kernels",
                   "tfp_sgmcmc.targets", "tfp_sgmcmc.chains",
                   "tfp_sgmcmc.random", "tfp_sgmcmc.dynamics",
                   "tfp_sgmcmc.synthetic", "tfp_sgmcmc.datasets")


def public_modules(packages=PUBLIC_PACKAGES):
  """{module name: module}, in `packages`' order, each package followed by
  the modules its `__all__` lists."""
  modules = {}
  for name in packages:
    module = importlib.import_module(name)
    modules[name] = module
    for exported in getattr(module, "__all__", ()):
      value = getattr(module, exported)
      if isinstance(value, types.ModuleType):
        modules[value.__name__] = value
  return modules
