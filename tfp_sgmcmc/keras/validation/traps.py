"""Misuses of `model.fit` around `SamplingCallback`, refused or warned.

Each check runs at the earliest point where what it needs is known:

* at the start of `fit`: a callback that already holds another model's
  chain, the other callbacks (a second `SamplingCallback`, learning-rate
  schedulers, `EarlyStopping`, `BackupAndRestore`), `class_weight` /
  `sample_weight`, the number of training examples when `fit` got arrays,
  a classifier's output activation against the loss' `from_logits`, the
  labels of a cross-entropy (`labels.py`: 0 / 1, one-hot, class
  indices), the checks on a first batch (`first_batch.py`: one output, one
  loss value per example, no layer random in training), whether the fit is
  long enough to keep one sample at the given `thinning`, and whether the
  kept samples will span a fair part of the chain (`max_samples` x
  `thinning`);
* after the first train step(s) of a fit whose first epoch is one pass
  over a pipeline of known length: the slips in the number of examples
  (N = the number of batches, N < one batch), from the batch size seen;
* at the end of the first epoch of each `fit`: the number of examples the
  epoch saw (Keras' loss tracker counts them), against `num_examples`;
* at every epoch end: a cross-entropy whose mean is negative (labels
  outside its likelihood, from a pipeline not read at the start); a chain
  whose energy rose far beyond what a chain at equilibrium shows (a step
  size that is too large);
* at the end of `fit`: no sample kept.

`fit`'s arguments and callback list are not handed to callbacks; they are
recorded by `fit_arguments` (`class_weight`, `sample_weight`,
`steps_per_epoch`, `validation_split`, `x`, `callbacks`, `initial_epoch`).
Where there is no record (a custom training loop calling the callbacks),
the checks that need it are skipped. One small host read per epoch (the
loss tracker's count), nothing per step. The checks of what `fit` is
given at its start (its callbacks, the output activation) are in
fit_checks.py.
"""

import math
import warnings
import weakref

import keras
import numpy as np
import tensorflow as tf

from tfp_sgmcmc.keras.fit import health
from tfp_sgmcmc.keras.validation import fit_arguments
from tfp_sgmcmc.keras.validation import first_batch
from tfp_sgmcmc.keras.validation import fit_checks
from tfp_sgmcmc.keras.validation import labels
from tfp_sgmcmc.keras.validation import model as model_lib
from tfp_sgmcmc.keras.validation.fit_checks import check_probabilities

# The checks read the callback's counters (its private state) by design.
# pylint: disable=protected-access

__all__ = ["FitTraps", "check_probabilities"]

# A chain at equilibrium sits about d/2 above the energy's minimum (d the
# number of weights; exactly so for a Gaussian posterior). A rise beyond
# this many times d, and this many times the lowest energy, is a blow-up.
BLOW_UP_FACTOR = 10.
# Kept samples spanning less than this fraction of the chain's transitions
# (max_samples x thinning against all of them) are warned: predict would
# average over the end of the chain only.
SPAN_FRACTION = 0.25


class FitTraps:
  """The state of the checks over the fits of one `SamplingCallback`."""

  def __init__(self):
    self._fit_uses_arrays = False
    self._one_pass = False
    self._validation_split = 0.
    self._count_epoch = None  # The epoch whose examples are counted.
    self._count_pending = False
    self._fit_start = None
    self._counted = None
    self._lowest_energy = None
    self._blow_up_warned = False
    self._steps_at_start = 0
    self._in_epoch = False
    self._epoch_start_steps = 0
    self._sampled_whole_epoch = False
    self._probe = False
    self._span_warned = False
    self._owner = None  # A weak reference to the model of the chain.

  # --- fit start -----------------------------------------------------------

  def train_begin(self, callback):
    fit_checks.check_same_model(callback, self._owner, callback.model)
    self._check_fit_start(callback)
    # Checked: from here on the callback's state is this model's chain.
    self._owner = weakref.ref(callback.model)

  def _check_fit_start(self, callback):
    model = callback.model
    arguments = fit_arguments.of(model)
    self._count_epoch = None
    self._count_pending = False
    self._probe = False
    self._fit_start = None
    self._counted = None
    self._steps_at_start = callback._sampler_steps
    if arguments is None:
      self._fit_uses_arrays = self._one_pass = False
      return
    fit_checks.check_callbacks(callback, arguments.callbacks())
    for name in ("class_weight", "sample_weight"):
      if arguments.get(name) is not None:
        raise ValueError(
            f"`{name}` was passed to fit: it weights each example's "
            "log-likelihood, which samples another posterior (a weighted, "
            "tempered likelihood) than the model's. SamplingCallback does "
            f"not support it; remove `{name}` (for imbalanced classes, "
            "resample the data or put the class prior in the model).")
    x = arguments.get("x")
    triple = None
    if isinstance(x, tf.data.Dataset) and isinstance(
        x.element_spec, tuple) and len(x.element_spec) == 3:
      triple = (f"element_spec with 3 parts: {x.element_spec}",
                "dataset.map(lambda x, y, w: (x, y))")
    elif isinstance(x, keras.utils.PyDataset):
      batch = first_batch.first_element(x)
      if isinstance(batch, (tuple, list)) and len(batch) == 3:
        triple = ("its first batch has 3 parts",
                  "__getitem__ returning (x, y)")
    if triple:
      raise ValueError(
          "the dataset passed to fit yields (x, y, sample_weight) "
          f"triples ({triple[0]}): the weights scale each example's "
          "log-likelihood, which samples another posterior than the "
          "model's. SamplingCallback does not support it; yield (x, y) "
          f"pairs, e.g. {triple[1]}.")
    steps_per_epoch = arguments.get("steps_per_epoch")
    self._validation_split = float(arguments.get("validation_split") or 0.)
    examples = arguments.examples(fit_checks.examples_in)
    self._fit_uses_arrays = examples is not None
    self._one_pass = steps_per_epoch is None
    if examples is not None and examples != callback.num_examples:
      raise ValueError(self._examples_message(
          callback, f"fit got {examples} training examples" +
          (f" (after validation_split={self._validation_split:g} held out "
           "the rest)" if self._validation_split else ""), examples, None))
    fit_checks.check_outputs(callback, x)
    first_batch.check_first_batch(callback, x, arguments.get("y"))
    first_batch.check_random_layers(callback, x, arguments.get("y"))
    labels.check_labels(callback, x, arguments.get("y"))
    # The first epoch of this fit is counted (unless arrays told us N).
    self._count_pending = not self._fit_uses_arrays
    self._fit_start = dict(
        initial_epoch=int(arguments.get("initial_epoch") or 0),
        order=model_lib.repeated_order(arguments, self._fit_uses_arrays))

  def check_thinning(self, callback):
    """Warns if this fit (not resumed) is too short to keep a sample."""
    fit_start = self._fit_start
    params = callback.params or {}
    if fit_start is None:
      return
    steps, epochs = params.get("steps"), params.get("epochs")
    if not steps or epochs is None:
      return
    epochs_left = epochs - int(fit_start.get("initial_epoch") or 0)
    total = epochs_left * steps
    burnin = 0
    if not callback._sampling:
      if callback.burnin_epochs is not None:
        burnin = max(0, callback.burnin_epochs -
                     callback._epochs_seen) * steps
      elif callback.burnin_steps is not None:
        burnin = max(0, callback.burnin_steps -
                     callback._steps_seen)
    sampling_steps = max(0, total - burnin)
    if sampling_steps == 0:
      return  # A burn-in-only fit: deliberate; nothing to keep.
    done = callback._transitions if callback._sampling else 0
    if callback._amagold:
      t = callback._spec.num_leapfrog_steps
      carried = (callback._trajectory_steps
                 if callback._sampling else 0)
      transitions = (carried + sampling_steps) // t
      unit = (f"{transitions} M-H test(s) (one every num_leapfrog_steps="
              f"T={t} steps; for AMAGOLD `thinning` counts M-H tests, not "
              "steps)")
    else:
      transitions = sampling_steps
      unit = f"{transitions} transition(s) (one per train step)"
    kept = (done + transitions) // callback.thinning - (
        done // callback.thinning)
    self._check_span(callback, done + transitions, transitions,
                     "M-H test(s)" if callback._amagold else "transition(s)")
    if fit_start["order"] and not callback._amagold:
      model_lib.check_batch_positions(steps, callback.thinning,
                                      callback._spe, fit_start["order"])
    if kept == 0 and not callback._samples:
      warnings.warn(
          f"this fit will keep no sample: {epochs_left} epoch(s) of "
          f"{steps} steps, {total - sampling_steps} of them burn-in, leave "
          f"{sampling_steps} sampling steps = {unit}, fewer than "
          f"thinning={callback.thinning}. Use thinning <= "
          f"{max(1, done + transitions)} or more epochs (a later fit with "
          "the same callback continues the chain and its count).",
          UserWarning, stacklevel=4)

  def _check_span(self, callback, total, this_fit, unit):
    """Warns (once per callback) when the kept samples will cover a small
    part of the chain: `max_samples` keeps the most recent ones only.
    max_samples=1 asks for the latest state only: nothing to spread."""
    span = callback.max_samples * callback.thinning
    if (self._span_warned or callback.max_samples == 1 or
        span >= SPAN_FRACTION * total):
      return
    self._span_warned = True
    spread = -(-total // callback.max_samples)
    if not callback._amagold:  # A multiple of steps_per_execution.
      spread = -(-spread // callback._spe) * callback._spe
    warnings.warn(
        f"the kept samples will span only the last {span} of the {total} "
        f"{unit} the chain will have made by the end of this fit "
        f"({100. * span / total:.2g}%; {this_fit} in this fit): "
        f"max_samples={callback.max_samples} keeps the most recent "
        f"samples, one every thinning={callback.thinning}, and drops the "
        "older ones, so predict() averages over the end of the chain only. "
        f"To spread them over the whole run use thinning={spread} (or "
        f"max_samples={-(-total // callback.thinning)} at thinning="
        f"{callback.thinning}); the running moments "
        "(posterior.mean, .variance) cover every transition either way. "
        "The progress bar and the logs show `kept_samples`.",
        UserWarning, stacklevel=5)

  # --- during fit ----------------------------------------------------------

  def epoch_begin(self, callback, epoch):
    self._in_epoch = True
    if self._count_pending:
      self._count_pending = False
      self._count_epoch = epoch
      self._probe = self._one_pass and bool((callback.params or {}).get(
          "steps"))
    self._epoch_start_steps = callback._steps_seen
    self._sampled_whole_epoch = callback._sampling

  def batch_end(self, callback):
    """After the first execution of a fit's first epoch (one pass over a
    pipeline of known length): the slips, from the batch size seen, before
    the sampler runs on (burn-in) or much beyond (no burn-in) a wrong N."""
    if not self._probe:
      return
    self._probe = False
    steps = (callback.params or {}).get("steps")
    count = self._read_count(callback.model)
    done = callback._steps_seen - self._epoch_start_steps
    if not steps or not count or not done or done >= steps:
      return
    per_step = count / done
    estimate = round(per_step * steps)
    self._judge(callback, estimate, steps, per_step,
                f"the first epoch ({steps} steps of about {per_step:.0f} "
                f"examples) holds about {estimate} examples",
                slips_only=True)

  def test_begin(self, callback):
    # Validation inside fit resets the loss tracker: count before it.
    if (self._count_epoch is not None and self._counted is None and
        self._in_epoch):
      self._counted = self._read_count(callback.model)

  def epoch_end(self, callback, epoch, logs):
    self._in_epoch = False
    if self._count_epoch is not None and epoch == self._count_epoch:
      counted = self._counted
      if counted is None:
        counted = self._read_count(callback.model)
      self._count_epoch = None
      if counted and not callback.model.stop_training:
        self._check_counted(callback, int(round(counted)))
    labels.check_loss_sign(callback, epoch, logs)
    self._check_step_size(callback, epoch, logs)
    self._check_energy(callback, epoch, logs)

  @staticmethod
  def _check_step_size(callback, epoch, logs):
    """Another callback (a custom schedule) changed the sampler's step
    size, which the sampler keeps in its `learning_rate`."""
    if (not callback._sampling or logs is None or
        callback._step_size_adaptation is not None):
      return
    configured = callback.sampler.get_config().get("step_size")
    seen = logs.get("step_size")
    if (isinstance(configured, bool) or
        not isinstance(configured, (int, float, np.floating)) or
        seen is None or not math.isfinite(seen)):
      return  # A LearningRateSchedule on the sampler is its own business.
    if abs(seen - configured) > 1e-5 * abs(configured):
      raise ValueError(
          f"the sampler's step size is {seen:.6g} at the end of epoch "
          f"{epoch}, but {type(callback.sampler).__name__} was built with "
          f"step_size={configured!r}: something in fit (a callback setting "
          "model.optimizer.learning_rate, a learning-rate schedule) changed "
          "the chain's step size mid-run. Remove it; give the sampler a "
          "keras.optimizers.schedules.LearningRateSchedule as step_size if "
          "a decreasing step size is meant.")

  @staticmethod
  def _read_count(model):
    tracker = getattr(model, "_loss_tracker", None)
    count = getattr(tracker, "count", None)
    if count is None:
      return None
    return float(np.asarray(count.numpy() if hasattr(count, "numpy")
                            else count))

  def _check_counted(self, callback, seen):
    n = callback.num_examples
    if seen == n:
      return
    steps = callback._steps_seen - self._epoch_start_steps
    self._judge(callback, seen, steps, seen / max(steps, 1),
                f"the first epoch of fit saw {seen} examples in {steps} steps")

  def _judge(self, callback, seen, steps, per_step, phrase,
             slips_only=False):
    """An error for the unmistakable slips (N is the number of batches, or
    smaller than one batch) in an epoch that is one pass over the data; a
    warning otherwise: a tf.data pipeline may draw its batches with
    replacement or repeat, so its epoch need not be the training set.
    With steps_per_epoch (a part of the data, or several passes, per
    epoch by design), only the slips are warned."""
    n = callback.num_examples
    if abs(seen - n) < per_step:
      return  # drop_remainder=True drops less than one batch per epoch.
    # N = steps is a slip only for one pass: with steps_per_epoch it is
    # as likely a coincidence (an epoch of N batches by design).
    slip = n < per_step or (self._one_pass and n == steps and per_step > 1)
    if self._one_pass:
      phrase += " (steps_per_epoch not given, so one pass over the data)"
    else:
      phrase += f" (about {per_step:.0f} per step, steps_per_epoch given)"
    message = self._examples_message(
        callback, phrase, seen if self._one_pass else None, steps)
    if self._one_pass and slip:
      raise ValueError(message)
    if (self._one_pass or slip) and not slips_only:
      warnings.warn(message, UserWarning, stacklevel=4)

  def _examples_message(self, callback, seen_phrase, seen, steps):
    n = callback.num_examples
    hints = []
    if steps is not None and n == steps:
      hints.append(f"{n} is the number of batches: len() of a batched "
                   "tf.data.Dataset counts batches, not examples")
    if self._validation_split:
      hints.append(f"validation_split={self._validation_split:g} holds out "
                   "part of x, so N is the size of the rest")
    fix = (f"Pass num_examples={seen}" if seen is not None else
           "Pass the number of training examples")
    return (f"num_examples={n}, but {seen_phrase}. N must be the number of "
            "training examples the likelihood sums over (the energy is N "
            "times the mean loss); a wrong N samples a posterior tempered "
            f"by {n}/(true N). " + ("; ".join(hints) + ". " if hints else "")
            + fix + (". If each epoch deliberately covers part of the data, "
                     "several passes over it or batches drawn with "
                     "replacement, pass steps_per_epoch to fit (then only "
                     "the slips above are warned)." if self._one_pass and
                     not self._fit_uses_arrays else "." if self._one_pass
                     else " (with steps_per_epoch N is still the size of "
                     "the whole training set)."))

  def _check_energy(self, callback, epoch, logs):
    energy = None if logs is None else logs.get("energy")
    if energy is None or not math.isfinite(energy):
      return
    full_sampling_epoch = callback._sampling and self._sampled_whole_epoch
    if (full_sampling_epoch and self._lowest_energy is not None and
        not self._blow_up_warned):
      lowest, lowest_epoch = self._lowest_energy
      d = sum(int(np.prod(v.shape))
              for v in callback.model.trainable_variables)
      rise = energy - lowest
      # Beyond both d and the lowest energy itself, by an order of
      # magnitude: the epoch's N * mean loss is a noisy estimate (its
      # spread grows like N / sqrt(examples seen)), a blow-up is not.
      if rise > BLOW_UP_FACTOR * max(d, abs(lowest)):
        self._blow_up_warned = True
        spec = callback._spec
        config = spec.get_config()
        loss = logs.get("loss")
        warnings.warn(
            f"{type(spec).__name__}'s chain is blowing up: at epoch {epoch} "
            f"its energy N*loss - log p(theta) is {energy:.4g}"
            + (f" (loss {loss:.4g} per example)" if loss is not None else "")
            + f", {rise:.3g} above its lowest ({lowest:.4g}, epoch "
            f"{lowest_epoch}), i.e. {rise / d:.3g} per weight, while a "
            f"chain at equilibrium sits about d/2 = {d / 2:g} (0.5 per "
            f"weight, d = {d} weights) above the minimum. The step size "
            f"(now {config.get('step_size')!r}) is most likely too large."
            + health.step_size_advice(callback.sampler) +
            " max_abs_weight= stops such a chain.", RuntimeWarning,
            stacklevel=3)
    if self._lowest_energy is None or energy < self._lowest_energy[0]:
      self._lowest_energy = (float(energy), epoch)

  # --- fit end and predict ------------------------------------------------

  def train_end(self, callback):
    if (callback._sampling and
        callback._sampler_steps > self._steps_at_start and
        not callback._samples and callback.divergence is None):
      what = (f"{callback.num_tests} M-H test(s) (for AMAGOLD `thinning` "
              "counts M-H tests, one every num_leapfrog_steps="
              f"{callback._spec.num_leapfrog_steps} steps)"
              if callback._amagold else
              f"{callback._transitions} transition(s)")
      warnings.warn(
          f"fit ended with no sample kept: the chain made {what}, fewer "
          f"than thinning={callback.thinning}. predict() needs at least "
          "one: fit longer (the same callback continues the chain) or "
          "use a smaller thinning.", UserWarning, stacklevel=3)
