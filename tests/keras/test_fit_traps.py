"""Keras users' traps: each misuse of `fit` around
SamplingCallback is refused with an error naming the argument, the value
and the fix, or warned, at the earliest point it can be known
(tfp_sgmcmc/keras/validation/traps.py; the list is in docs/keras.md).

One test per trap, on tiny models (a 4 -> 3 softmax classifier on 60
examples) and 1-3 epochs; each fails if its check is removed.
"""

import json
import os
import re
import tempfile
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from workers import keras_resume_worker as worker
import tfp_sgmcmc.keras as sgk

N = 60


def data(n=N):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(n, 4)).astype(np.float32)
  y = (np.argmax(x[:, :3] + 0.5 * rng.normal(size=(n, 3)), axis=1)
       ).astype(np.int32)
  return x, y


def classifier(layers=None, from_logits=True):
  keras.utils.set_random_seed(0)
  layers = layers or [keras.layers.Dense(3)]
  model = keras.Sequential([keras.Input((4,))] + layers)
  model.compile(optimizer=keras.optimizers.SGD(0.1),
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=from_logits))
  return model


def sampling(sampler=None, num_examples=N, **kwargs):
  kwargs.setdefault("burnin_epochs", 1)
  return sgk.SamplingCallback(sampler or sgk.SGLD(step_size=1e-3, seed=1),
                              num_examples=num_examples, prior=1.,
                              **kwargs)


def fit(model, callbacks, *args, epochs=2, **kwargs):
  if not args:
    args = data()
    kwargs.setdefault("batch_size", 20)
  return model.fit(*args, epochs=epochs, verbose=0, shuffle=False,
                   callbacks=callbacks, **kwargs)


def our_warnings(record):
  return [str(w.message) for w in record
          if issubclass(w.category, (UserWarning, RuntimeWarning)) and
          ("SamplingCallback" in str(w.message) or "sample" in
           str(w.message) or "num_examples" in str(w.message))]


def test_num_examples_is_checked_against_what_the_first_epoch_saw():
  x, y = data()
  batched = tf.data.Dataset.from_tensor_slices((x, y)).batch(20)
  # len(batched) = 3 batches given as N, with a one-pass epoch (no
  # steps_per_epoch): refused after the first step, from the batch size
  # seen, during burn-in or, without one, after one sampler step.
  for burnin_epochs in (1, None):
    callback = sampling(num_examples=len(batched),
                        burnin_epochs=burnin_epochs)
    with pytest.raises(ValueError, match=r"num_examples=3, but the first "
                       r"epoch \(3 steps of about 20 examples\) holds about "
                       r"60 examples.*number of batches.*Pass "
                       r"num_examples=60"):
      fit(classifier(), [callback], batched)
    assert callback._steps_seen == 1
    assert (callback.sampler.step_count if callback.sampler else 0) == (
        0 if burnin_epochs else 1)
  # A pipeline of unknown length (filter): refused at the first epoch's
  # end, from the examples it saw (Keras' loss tracker counts them).
  unknown = batched.filter(lambda x, y: True)
  with pytest.raises(ValueError, match=r"num_examples=3, but the first epoch "
                     r"of fit saw 60 examples in 3 steps.*number of batches"):
    fit(classifier(), [sampling(num_examples=3)], unknown)
  # N = 600 on a pipeline of 60: warned at the end of the first epoch (a
  # tf.data epoch may legitimately draw batches with replacement).
  with pytest.warns(UserWarning, match=r"num_examples=600, but the first "
                    r"epoch of fit saw 60 examples in 3 steps.*Pass "
                    r"num_examples=60"):
    fit(classifier(), [sampling(num_examples=600)], batched, epochs=1)
  # Arrays: known at fit start, before any step.
  with pytest.raises(ValueError, match=r"num_examples=60, but fit got 30 "
                     r"training examples \(after validation_split=0.5.*"
                     r"Pass num_examples=30"):
    fit(classifier(), [sampling()], x, y, validation_split=0.5,
        batch_size=10)
  with pytest.raises(ValueError, match=r"num_examples=600, but fit got 60"
                     ) as refused:
    fit(classifier(), [sampling(num_examples=600)])
  # Arrays are the whole training set: passing steps_per_epoch does not
  # lift the refusal, so the message does not offer it.
  assert str(refused.value).endswith("Pass num_examples=60.")
  with pytest.raises(ValueError, match=r"num_examples=600, but fit got 60.*"
                     r"with steps_per_epoch N is still the size"):
    fit(classifier(), [sampling(num_examples=600)], steps_per_epoch=2)
  # Legitimate: each epoch a part of the data (steps_per_epoch), with
  # validation data (counted before validation resets Keras' tracker).
  repeated = tf.data.Dataset.from_tensor_slices((x, y)).batch(20).repeat()
  with warnings.catch_warnings(record=True) as record:
    warnings.simplefilter("always")
    fit(classifier(), [sampling()], repeated, steps_per_epoch=2)
    fit(classifier(), [sampling()], batched,
        validation_data=(x[:10], y[:10]))
  assert not [m for m in our_warnings(record) if "num_examples" in m]


@pytest.mark.parametrize("scheduler", [
    keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=1),
    keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.5)])
def test_learning_rate_schedulers_are_refused_at_fit_start(scheduler):
  callback = sampling()
  with pytest.raises(ValueError, match=f"{type(scheduler).__name__} is "
                     "among fit's callbacks.*sampler's step size"):
    fit(classifier(), [callback, scheduler])
  assert callback._epochs_seen == 0  # Nothing ran.


class HalveLearningRate(keras.callbacks.Callback):
  def on_epoch_begin(self, epoch, logs=None):
    self.model.optimizer.learning_rate = 0.5 * float(
        self.model.optimizer.learning_rate)


def test_a_step_size_changed_by_another_callback_is_refused():
  # A scheduler the fit-start check cannot know: caught at the first
  # sampling epoch's end (burn-in's SGD may be scheduled at will).
  with pytest.raises(ValueError, match=r"step size is 0.0005 at the end of "
                     r"epoch 1, but SGLD was built with step_size=0.001"):
    fit(classifier(), [sampling(), HalveLearningRate()])


def test_early_stopping_restoring_weights_is_refused_and_plain_warned():
  with pytest.raises(ValueError, match=r"EarlyStopping\(restore_best_weights"
                     r"=True\).*not the chain's position"):
    fit(classifier(), [sampling(), keras.callbacks.EarlyStopping(
        monitor="loss", restore_best_weights=True)])
  with pytest.warns(UserWarning, match=r"EarlyStopping\(monitor='loss', "
                    r"patience=2\).*stop fit after 2 epoch"):
    fit(classifier(), [sampling(), keras.callbacks.EarlyStopping(
        monitor="loss", patience=2)], epochs=1)


def test_backup_and_restore_needs_the_callbacks_backup_dir(tmp_path):
  d = str(tmp_path / "backup")
  with pytest.raises(ValueError, match=r"SamplingCallback has no "
                     r"`backup_dir`.*backup_dir='.*backup'"):
    fit(classifier(), [sampling(), keras.callbacks.BackupAndRestore(d)])
  with pytest.raises(ValueError, match="name different directories"):
    fit(classifier(), [sampling(backup_dir=str(tmp_path / "other")),
                       keras.callbacks.BackupAndRestore(d)])
  with pytest.raises(ValueError, match="list SamplingCallback first"):
    fit(classifier(), [keras.callbacks.BackupAndRestore(d),
                       sampling(backup_dir=d)])
  with pytest.raises(ValueError, match=r"save_freq=3"):
    fit(classifier(), [sampling(backup_dir=d),
                       keras.callbacks.BackupAndRestore(d, save_freq=3)])


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
  d = str(tmp_path_factory.mktemp("reference"))
  model, callback, backup = worker.build("sghmc", d, 5)
  worker.fit(model, [callback, backup])
  return worker.result(model, callback)


@pytest.mark.parametrize("truncate", ["keras_weights", "keras_metadata",
                                      "ours"])
def test_a_backup_truncated_by_a_kill_resumes_bit_identically(
    truncate, tmp_path, uninterrupted):
  # A process killed while BackupAndRestore wrote latest.weights.h5 (or its
  # metadata) leaves a truncated file; ours are written atomically, but a
  # truncated one of ours (disk trouble) is survived too: the resumed run
  # starts from the newest complete state of ours, rewrites Keras' files
  # from it and ends bit-identical to a run that never stopped.
  expected = uninterrupted
  d = str(tmp_path / "backup")
  model, callback, backup = worker.build("sghmc", d, seed=5)
  with pytest.raises(RuntimeError, match="interrupted"):
    worker.fit(model, [callback, backup, worker.Interrupt(3, 4, kill=False)])
  assert json.load(open(os.path.join(d, "training_metadata.json"))) == {
      "epoch": 3, "batch": 0}
  name = dict(keras_weights="latest.weights.h5",
              keras_metadata="training_metadata.json",
              ours=os.path.join("sampling_callback", "epoch_000003.npz"))
  path = os.path.join(d, name[truncate])
  with open(path, "rb+") as f:
    f.truncate(os.path.getsize(path) // 2)
  # Ours unreadable: back to the previous epoch's state (the last two are
  # kept), Keras' files rewritten to match.
  epoch = 2 if truncate == "ours" else 3
  with pytest.warns(RuntimeWarning, match="unreadable.*Resuming from "
                    "SamplingCallback's complete state after epoch "
                    f"{epoch}"):
    history = worker.fit(model, [callback, backup])
  assert len(history.history["loss"]) == 6 - epoch
  got = worker.result(model, callback)
  assert sorted(got) == sorted(expected)
  for key in expected:
    np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


def test_a_blowing_up_sgld_chain_warns_and_a_healthy_one_does_not():
  # h = 1 with a N(0, 1) prior: the prior's pull cancels the position each
  # step and the likelihood's gradient (bounded for a softmax) throws the
  # weights about by ~N |x|: logits in the tens, energy thousands above
  # the burn-in's, finite (no divergence stop), for d = 15 weights.
  with pytest.warns(RuntimeWarning, match=r"SGLD's chain is blowing up: at "
                    r"epoch 1 .*per weight.*d/2 = 7.5.*step size \(now 1.0\)"):
    fit(classifier(), [sampling(sgk.SGLD(step_size=1., seed=1))])
  with warnings.catch_warnings(record=True) as record:
    warnings.simplefilter("always")
    fit(classifier(), [sampling(sgk.SGLD(step_size=1e-3, seed=1))],
        epochs=3)
  assert not [m for m in our_warnings(record) if "blowing up" in m]



def test_a_blowing_up_chain_is_warned_in_the_units_the_sampler_was_built():
  # An SGD learning rate on the mean loss, 0.5, not divided by N = 60:
  # the weights blow up (finite) within an epoch. Both warnings name the
  # argument passed and the /N cause, as the divergence report does,
  # not only the step size sqrt(0.5) the user never wrote.
  with warnings.catch_warnings(record=True) as record:
    warnings.simplefilter("always")
    fit(classifier(), [sampling(sgk.SGHMC.from_sgd_momentum(
        learning_rate=0.5, momentum_decay=0.1, seed=1))], epochs=6)
  warned = [str(w.message) for w in record
            if re.search("blowing up|heating up", str(w.message))]
  assert len(warned) == 2, warned
  for message in warned:
    assert re.search(r"Try a smaller learning_rate \(you passed "
                     r"learning_rate=0.5 to SGHMC.from_sgd_momentum.*"
                     r"momentum_decay \(now 0.1\).*not divided by N = "
                     r"num_examples = 60.*0.5 / 60 = 0.00833", message), message

def test_amagold_thinning_counts_tests_and_keeping_nothing_warns():
  x, y = data()
  amagold = sgk.AMAGOLD(step_size=1e-3, num_leapfrog_steps=3, friction=1.,
                        seed=1)
  callback = sampling(amagold, thinning=10, energy_data=(x, y))
  with pytest.warns(UserWarning) as record:
    fit(classifier(), [callback], epochs=3)
  messages = [str(w.message) for w in record]
  # At fit start, with the numbers: 2 sampling epochs of 3 steps = 2 tests.
  assert any("this fit will keep no sample: 3 epoch(s) of 3 steps, 3 of "
             "them burn-in, leave 6 sampling steps = 2 M-H test(s)" in m and
             "`thinning` counts M-H tests" in m and "thinning <= 2" in m
             for m in messages), messages
  # At the end of fit, with what ran.
  assert any("fit ended with no sample kept: the chain made 2 M-H test(s)"
             in m for m in messages), messages
  assert callback.num_tests == 2 and not callback.samples


def test_logits_read_as_probabilities_are_refused():
  # A linear output layer with from_logits=False: refused at fit start.
  with pytest.raises(ValueError, match=r"from_logits=False.*output layer "
                     r"'dense.*' has activation='linear'.*from_logits=True"):
    fit(classifier(from_logits=False), [sampling()])
  # No activation to read (Rescaling after the logits): the outputs on the
  # first training examples are checked.
  with pytest.raises(ValueError, match=r"from_logits=False.*outputs on the "
                     r"first training examples range from -"):
    fit(classifier([keras.layers.Dense(3), keras.layers.Rescaling(2.)],
                   from_logits=False), [sampling()])
  # A tf.data pipeline is not iterated at fit start (that would advance
  # its reshuffling): caught at predict, on the averaged outputs.
  x, y = data()
  callback = sampling()
  fit(classifier([keras.layers.Dense(3), keras.layers.Rescaling(2.)],
                 from_logits=False), [callback],
      tf.data.Dataset.from_tensor_slices((x, y)).batch(20))
  with pytest.raises(ValueError, match=r"from_logits=False.*the averaged "
                     r"predictions range from -"):
    callback.predict(x)
  # The same check travels with the Posterior, also through save / load.
  with pytest.raises(ValueError, match=r"from_logits=False.*the averaged "
                     r"predictions range from -"):
    callback.posterior.predict(x)
  path = os.path.join(tempfile.mkdtemp(), "posterior.npz")
  callback.posterior.save(path)
  with pytest.raises(ValueError, match=r"from_logits=False.*the averaged "
                     r"predictions range from -"):
    sgk.Posterior.load(path, model=callback.model).predict(x)
  # A Softmax layer gives probabilities: accepted, and so are its averages.
  callback = sampling()
  fit(classifier([keras.layers.Dense(3), keras.layers.Softmax()],
                 from_logits=False), [callback])
  assert callback.predict(x).shape == (N, 3)
  # And the other way round: softmax applied twice.
  with pytest.raises(ValueError, match="from_logits=True, but the output "
                     "layer .* activation='softmax'"):
    fit(classifier([keras.layers.Dense(3, activation="softmax")]),
        [sampling()])


def test_class_and_sample_weights_are_refused():
  x, y = data()
  with pytest.raises(ValueError, match="`class_weight` was passed to fit.*"
                     "another posterior"):
    fit(classifier(), [sampling()], x, y, batch_size=20,
        class_weight={0: 1., 1: 2., 2: 1.})
  with pytest.raises(ValueError, match="`sample_weight` was passed to fit"):
    fit(classifier(), [sampling()], x, y, batch_size=20,
        sample_weight=np.ones(N, np.float32))
  # Weights yielded by a dataset, as (x, y, w) triples, the same.
  weighted = tf.data.Dataset.from_tensor_slices(
      (x, y, np.ones(N, np.float32))).batch(20)
  with pytest.raises(ValueError, match=r"yields \(x, y, sample_weight\) "
                     r"triples.*dataset.map\(lambda x, y, w: \(x, y\)\)"):
    fit(classifier(), [sampling()], weighted)
  # And by a PyDataset (weights 2 sampled the posterior at T = 1/2).
  with pytest.raises(ValueError, match=r"triples \(its first batch has 3 "
                     r"parts\).*__getitem__ returning \(x, y\)"):
    fit(classifier(), [sampling()], _WeightedBatches(x, y))


class _WeightedBatches(keras.utils.PyDataset):

  def __init__(self, x, y):
    super().__init__()
    self.x, self.y = x, y

  def __len__(self):
    return 3

  def __getitem__(self, i):
    part = slice(20 * i, 20 * (i + 1))
    return self.x[part], self.y[part], np.full(20, 2., np.float32)


def test_two_sampling_callbacks_in_one_fit_are_refused():
  # Each would install its own sampler; both would keep the one chain.
  first, second = sampling(), sampling(sgk.SGLD(step_size=1e-3, seed=2))
  with pytest.raises(ValueError, match=r"fit got 2 SamplingCallbacks: each "
                     "installs its own sampler"):
    fit(classifier(), [first, second])
  with pytest.raises(ValueError, match=r"fit got 2 SamplingCallbacks \(the "
                     "same one listed more than once\)"):
    fit(classifier(), [first, first])
  assert first._steps_seen == second._steps_seen == 0


def test_a_callback_reused_on_another_model_is_refused():
  callback = sampling()
  model = classifier()
  fit(model, [callback], epochs=1)
  with pytest.raises(ValueError, match=r"already holds the chain of model "
                     r"'sequential.*'.*a fit of model 'other'.*create a new "
                     "SamplingCallback"):
    other = classifier()
    other.name = "other"
    fit(other, [callback], epochs=1)
  # The same model object continues its chain.
  fit(model, [callback], epochs=1)
  assert callback._epochs_seen == 2


class LogKeys(keras.callbacks.Callback):
  """Records the keys of each epoch's logs, as CSVLogger and TensorBoard
  read them."""

  def __init__(self):
    super().__init__()
    self.keys = []

  def on_epoch_end(self, epoch, logs=None):
    self.keys.append(sorted(logs))


def test_epoch_logs_reach_the_callbacks_listed_after_it(tmp_path):
  path = str(tmp_path / "log.csv")
  after = LogKeys()
  fit(classifier(), [sampling(), after, keras.callbacks.CSVLogger(path)])
  expected = ["energy", "kept_samples", "loss", "step_size"]
  assert after.keys == [expected, expected]
  with open(path) as f:
    header = f.readline().strip().split(",")
    rows = [line.strip().split(",") for line in f]
  assert set(expected) <= set(header), header
  # Burn-in epoch, then a sampling epoch that kept its 3 steps' samples.
  kept = header.index("kept_samples")
  assert [float(r[kept]) for r in rows] == [0., 3.]
  assert float(rows[1][header.index("energy")]) > 0.


def test_a_logger_listed_before_the_callback_is_refused_naming_the_order(
    tmp_path):
  # The callback adds its values in its own on_epoch_end (Keras' callback
  # list is not changed): a logger before it would never write them.
  with pytest.raises(ValueError, match=r"CSVLogger is listed before "
                     r"SamplingCallback.*List SamplingCallback first"):
    fit(classifier(), [keras.callbacks.CSVLogger(str(tmp_path / "l.csv")),
                       sampling()])
  before = LogKeys()
  with pytest.warns(UserWarning, match=r"LogKeys is listed before "
                    r"SamplingCallback.*does not see them"):
    fit(classifier(), [before, sampling()])
  assert before.keys == [["loss"], ["loss"]]


def test_kept_samples_show_in_the_progress_bar_and_a_short_span_warns(
    capsys):
  # 2 sampling epochs x 3 steps, thinning=1, max_samples=2: the samples
  # kept span the last 2 of 6 transitions (33% > 25%: no warning) ...
  with warnings.catch_warnings(record=True) as record:
    warnings.simplefilter("always")
    fit(classifier(), [sampling(burnin_epochs=0, max_samples=2)], epochs=2)
  assert not [m for m in our_warnings(record) if "span" in m]
  # ... and of 12 with 4 epochs (17%): warned with the numbers and the fix.
  callback = sampling(burnin_epochs=0, max_samples=2)
  with pytest.warns(UserWarning, match=r"the kept samples will span only "
                    r"the last 2 of the 12 transition\(s\) .*\(17%; 12 in "
                    r"this fit\).*max_samples=2 keeps the most recent.*"
                    r"thinning=6 \(or max_samples=12 at thinning=1\)"):
    model = classifier()
    capsys.readouterr()
    model.fit(*data(), batch_size=20, epochs=4, verbose=1, shuffle=False,
              callbacks=[callback])
  assert "kept_samples: 2" in capsys.readouterr().out


def test_kept_samples_read_as_a_count_in_the_progress_bar(capsys):
  # A burn-in epoch (none kept) then a sampling epoch of 3 steps: the bar
  # shows the counts as integers, not as the floats Keras formats
  # (`0.0000e+00`, `3.0000`); the History and CSV still hold numbers.
  model = classifier()
  capsys.readouterr()
  history = model.fit(*data(), batch_size=20, epochs=2, verbose=1,
                      shuffle=False, callbacks=[sampling()])
  out = capsys.readouterr().out
  assert "kept_samples: 0 " in out or "kept_samples: 0\n" in out, out
  assert "kept_samples: 3" in out and "kept_samples: 3.0" not in out, out
  assert "kept_samples: 0.0000e+00" not in out
  assert history.history["kept_samples"] == [0., 3.]


def test_predict_without_a_sample_says_why_with_the_numbers():
  # A fit shorter than the burn-in keeps nothing by design (a burn-in-only
  # fit), so it is not warned; predict then says that the sampler has not
  # started, and how far burn-in got, rather than guessing at the cause.
  x, y = data()
  callback = sampling(burnin_epochs=3)
  fit(classifier(), [callback], epochs=2)
  with pytest.raises(ValueError, match=r"ran 2 epoch\(s\), all of them "
                     r"burn-in \(burnin_epochs=3\).*more than 1 epoch\(s\)"):
    callback.predict(x)
  # Sampling, but fewer transitions than thinning: the count and the fix.
  callback = sampling(thinning=50)
  with pytest.warns(UserWarning, match="keep no sample"):
    fit(classifier(), [callback], epochs=2)
  with pytest.raises(ValueError, match=r"made 3 transition\(s\) since its "
                     r"burn-in, fewer than thinning=50.*thinning <= 3"):
    callback.predict(x)


def test_samples_kept_at_one_batch_position_warn():
  # Where the batch order repeats each epoch, the chain's state depends on
  # its position in the epoch: samples kept every `steps per epoch` steps
  # all come after the same batch, and were biased by it without a word.
  x, y = data()
  def positions_warnings(thinning, shuffle, seed=0):
    with warnings.catch_warnings(record=True) as record:
      warnings.simplefilter("always")
      model = classifier()
      tf.random.set_seed(seed)  # None: no global seed.
      model.fit(x, y, batch_size=20, epochs=4, verbose=0, shuffle=shuffle,
                callbacks=[sampling(thinning=thinning)])
    return [str(w.message) for w in record
            if "position(s) in the epoch" in str(w.message)]
  message, = positions_warnings(6, shuffle=False)
  assert message.startswith(
      "every kept sample comes at one of 1 position(s) in the epoch's 3 "
      "steps (thinning=6), and the batch order repeats every epoch "
      "(shuffle=False)"), message
  assert "Use thinning=7" in message
  # Arrays shuffled under a global seed (keras.utils.set_random_seed sets
  # it): the same permutation every epoch.
  message, = positions_warnings(3, shuffle=True)
  assert "shuffle=True after keras.utils.set_random_seed" in message
  # Spread over every position, or reshuffled each epoch: no warning.
  assert not positions_warnings(4, shuffle=False)
  assert not positions_warnings(3, shuffle=True, seed=None)
