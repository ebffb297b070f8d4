"""Which optimizer the model trains with: the compiled (burn-in) optimizer
or the sampler, each with its own train function.

Replacing `model.optimizer` alone does nothing to an already traced train
step, which is bound to the optimizer it was traced with. Each optimizer's
train function is therefore made once per `compile` and swapped in with
its optimizer, so that a later `fit` with the same callback retraces
neither.
"""

__all__ = ["OptimizerPhases"]


class OptimizerPhases:
  """The burn-in optimizer and the two train functions of a model."""

  def __init__(self):
    self.burnin_optimizer = None
    self._burnin_train_function = None
    self._sampler_train_function = None

  def begin_fit(self, model, sampler):
    """At the start of `fit`: remembers the compiled optimizer (unless the
    sampler is still installed) and the train function `fit` made for it."""
    if sampler is not None and model.optimizer is sampler:
      return
    self.burnin_optimizer = model.optimizer
    if model.train_function is not self._burnin_train_function:
      # A new train function (the first fit, or the model was compiled
      # again): the sampler's must be made for it too.
      self._burnin_train_function = model.train_function
      self._sampler_train_function = None

  def new_sampler(self):
    """The sampler was (re)built: its train function is made anew."""
    self._sampler_train_function = None

  def use_burnin(self, model):
    model.optimizer = self.burnin_optimizer
    if self._burnin_train_function is None:
      model.make_train_function(force=True)
      self._burnin_train_function = model.train_function
    model.train_function = self._burnin_train_function

  def use_sampler(self, model, sampler):
    model.optimizer = sampler
    if self._sampler_train_function is None:
      model.make_train_function(force=True)
      self._sampler_train_function = model.train_function
    model.train_function = self._sampler_train_function
