"""BertSentenceEncoder's training step: 2 replicas of B train exactly what one device trains
on the 2B batch, for every loss, because the candidates are gathered from every replica (and
the test shows a per-replica loss would not); accumulation is refused for batch losses."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import helpers, multi_worker
from tfbert import BertConfig
from tfbert.embeddings import sentence_encoder
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.training import distribution
from tfbert.training.accumulation import with_gradient_accumulation

# Odd sizes; no dropout: a replica's masks depend on its replica id, so with dropout one
# device and two replicas would draw different masks (tests/training cover that apart).
CONFIG = BertConfig(vocab_size=37, hidden_size=10, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=13, max_position_embeddings=17,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
SEQ, GLOBAL_BATCH = 7, 6


def _texts(rng):
  lengths = rng.integers(2, SEQ + 1, GLOBAL_BATCH)
  mask = (np.arange(SEQ)[None] < lengths[:, None]).astype(np.int32)
  ids = rng.integers(5, CONFIG.vocab_size, (GLOBAL_BATCH, SEQ)).astype(np.int32) * mask
  return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}


def _batch(loss):
  rng = np.random.default_rng(4)
  features = {"anchor": _texts(rng), "positive": _texts(rng)}
  if loss == "in_batch_negatives":
    features["negative"] = _texts(rng)
    return (features,)
  return features, rng.uniform(0.0, 1.0, GLOBAL_BATCH).astype(np.float32)


def _train(loss, replicas, steps=2, symmetric=False):
  """The weight updates and the logged loss after `steps` SGD steps on the same global
  batch."""
  strategy = distribution.create_strategy("one_device" if replicas == 1 else "mirrored",
                                          replicas)
  keras.utils.set_random_seed(3)
  with strategy.scope():
    model = BertSentenceEncoder(CONFIG, loss=loss, symmetric=symmetric)
    model.build()
    model.compile(optimizer=keras.optimizers.SGD(0.05))
  initial = [w.numpy() for w in model.weights]
  data = tf.data.Dataset.from_tensors(_batch(loss)).repeat(steps)
  history = model.fit(data, epochs=1, verbose=0)
  return ([w.numpy() - w0 for w, w0 in zip(model.weights, initial)],
          history.history["loss"][-1])


@pytest.fixture(scope="module")
def one_device():
  """`_train(loss, 1, symmetric=...)`, run once per module for each (loss, symmetric): the
  one-device reference that several tests compare with. Its results are arrays and a float,
  never a live model."""
  runs = {}

  def run(loss, symmetric=False):
    if (loss, symmetric) not in runs:
      runs[loss, symmetric] = _train(loss, 1, symmetric=symmetric)
    return runs[loss, symmetric]

  return run


def train_replicated(strategy, loss, steps=2):
  """`_train`'s run through `strategy.run` of the model's own `train_step`, each replica on
  its slice of the global batch (Keras' `fit` does not run under MultiWorkerMirroredStrategy,
  keras-team/keras#20585); returns the same (weight updates, last loss)."""
  keras.utils.set_random_seed(3)
  with strategy.scope():
    model = BertSentenceEncoder(CONFIG, loss=loss)
    model.build()
    model.compile(optimizer=keras.optimizers.SGD(0.05))
  initial = [w.numpy() for w in model.weights]
  batch = _batch(loss)
  replicas = strategy.num_replicas_in_sync
  per_replica = GLOBAL_BATCH // replicas

  def replica_slice(context):
    start = context.replica_id_in_sync_group * per_replica
    return tf.nest.map_structure(lambda x: tf.constant(x[start:start + per_replica]), batch)

  values = strategy.experimental_distribute_values_from_function(replica_slice)
  # Unconverted, as Keras' `fit` traces `train_step` (AutoGraph would only add cost).
  step = tf.function(lambda data: strategy.run(model.train_step, args=(data,)),
                     autograph=False)
  for _ in range(steps):
    logs = step(values)
  last = float(strategy.experimental_local_results(logs["loss"])[0])
  return [w.numpy() - w0 for w, w0 in zip(model.weights, initial)], last


def _deviation(a, b):
  """The largest difference of two runs' weight updates, relative to the largest update."""
  return (max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))
          / max(float(np.max(np.abs(y))) for y in b))


@pytest.mark.slow
@pytest.mark.parametrize("loss, symmetric", [("in_batch_negatives", False),
                                             ("in_batch_negatives", True), ("cosent", False),
                                             ("cosine_mse", False)])
def test_two_replicas_equal_one_device_on_the_whole_batch(loss, symmetric, one_device,
                                                         monkeypatch):
  # The same examples, reduced in another order: float32 rounding only. The updates differ
  # by 3e-7 to 1e-5 of the largest update (measured: in-batch negatives, CoSENT, cosine
  # MSE, whose 2 steps move weights least); without the gather, by 4e-2 and more.
  one, one_loss = one_device(loss, symmetric)
  calls = {"losses": 0, "counts": 0}
  counts, losses = sentence_encoder.replica_counts, BertSentenceEncoder._replica_loss_and_pairs

  def counted(name, function):
    def call(*args, **kwargs):
      calls[name] += 1
      return function(*args, **kwargs)
    return call

  monkeypatch.setattr(sentence_encoder, "replica_counts", counted("counts", counts))
  monkeypatch.setattr(BertSentenceEncoder, "_replica_loss_and_pairs",
                      counted("losses", losses))
  two, two_loss = _train(loss, 2, symmetric=symmetric)
  # One all-reduce of the replicas' counts per replica's loss, shared by its gathers, offset
  # and the loss tracker's weight (it was up to 5: one per gathered tensor, the offset, the
  # total and the tracker's weight).
  assert calls["losses"] > 0 and calls["counts"] == calls["losses"], calls
  assert two_loss == pytest.approx(one_loss, rel=1e-5)
  assert _deviation(two, one) < 3e-5


@pytest.mark.parametrize("loss", ["in_batch_negatives", "cosent"])
@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_without_the_gather_each_replica_trains_another_objective(loss, monkeypatch,
                                                                  one_device):
  """The same run with each replica's loss on its own rows only (no gather, offset 0): the
  loss and the weights move away from the one-device run far beyond rounding."""
  one, one_loss = one_device(loss)
  monkeypatch.setattr(sentence_encoder, "gather_replicas", lambda local, counts=None: local)
  monkeypatch.setattr(sentence_encoder, "replica_offset", lambda counts: 0)
  two, two_loss = _train(loss, 2)
  assert abs(two_loss - one_loss) > 0.1 * abs(one_loss), (two_loss, one_loss)
  assert _deviation(two, one) > 1e-2


@pytest.mark.parametrize("scale", [0, -20.0, float("nan"), float("inf")])
def test_a_scale_that_trains_nothing_or_the_wrong_way_is_refused(scale):
  """The rule run_embeddings' --scale follows (one check, `embedding_losses.scale_problem`)."""
  with pytest.raises(ValueError, match=rf"scale must be a finite number > 0, got {scale}"):
    BertSentenceEncoder(CONFIG, scale=scale)


def test_accumulation_of_a_batch_loss_is_refused_saying_why():
  model = BertSentenceEncoder(CONFIG)
  model.build()
  model.compile(optimizer=with_gradient_accumulation(keras.optimizers.SGD(0.1), 2))
  data = tf.data.Dataset.from_tensors(_batch("in_batch_negatives"))
  with pytest.raises(ValueError, match=r"gradient accumulation \(2 micro-steps\) with the "
                     r"in_batch_negatives loss would train another objective"):
    model.fit(data, epochs=1, verbose=0)


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_cosine_mse_accumulates_like_the_big_batch(one_device):
  """A mean of per-pair terms: 2 micro-batches of 3 equal one batch of 6, over the 2 SGD
  steps of the shared one-device run on the batch of 6 (the same model, seed and data)."""
  keras.utils.set_random_seed(3)
  model = BertSentenceEncoder(CONFIG, loss="cosine_mse")
  model.build()
  model.compile(optimizer=with_gradient_accumulation(keras.optimizers.SGD(0.05), 2))
  initial = [w.numpy() for w in model.weights]
  features, scores = _batch("cosine_mse")
  data = tf.data.Dataset.from_tensor_slices((features, scores)).batch(GLOBAL_BATCH // 2)
  model.fit(data.repeat(2), epochs=1, verbose=0)  # 2 windows of 2 micro-batches.
  assert int(model.optimizer.iterations.numpy()) == 2
  big_batch, _ = one_device("cosine_mse")
  assert _deviation([w.numpy() - w0 for w, w0 in zip(model.weights, initial)], big_batch) < 3e-5


@pytest.mark.slow  # A cluster: two worker processes (forked) trace the step.
def test_two_workers_equal_one_device_on_the_whole_batch(tmp_path, one_device):
  """MultiWorkerMirroredStrategy, one replica per worker process: the negatives gathered
  across processes give the one-device run's loss and weight updates (as for mirrored
  replicas above); both workers end with the same updates."""
  one, one_loss = one_device("in_batch_negatives")
  output = str(tmp_path / "embeddings")
  # This process's environment (`-m` finds tests/ from cwd): the workers are forked from
  # tests/forked.py's server (another PYTHONPATH or TF_CPP_MIN_LOG_LEVEL than its own made
  # them fresh interpreters, each importing TensorFlow: about 8 s of CPU more).
  results = multi_worker.launch_workers(
      multi_worker.worker_command("embeddings", output, "in_batch_negatives"), cwd=helpers.ROOT,
      timeout=300)
  for result in results:
    assert result.returncode == 0, result.stdout[-3000:]
  workers = [np.load(f"{output}.{index}.npz") for index in range(2)]
  for worker in workers:
    updates = [worker[f"arr_{i}"] for i in range(len(one))]
    assert float(worker["loss"]) == pytest.approx(one_loss, rel=1e-5)
    assert _deviation(updates, one) < 3e-5


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_the_replicated_step_equals_fit_on_one_device_and_on_mirrored_replicas(one_device):
  """`train_replicated` (the multi-worker test's loop) trains as `fit` does."""
  one, one_loss = one_device("in_batch_negatives")
  for replicas in (1, 2):
    strategy = distribution.create_strategy("one_device" if replicas == 1 else "mirrored",
                                            replicas)
    updates, loss = train_replicated(strategy, "in_batch_negatives")
    assert loss == pytest.approx(one_loss, rel=1e-5)
    assert _deviation(updates, one) < 3e-5


def test_the_unused_pooler_is_frozen_and_every_other_weight_trains():
  """The sentence vector never passes the [CLS] pooler: its weights are not trainable (no
  'Gradients do not exist' warning, no optimizer slots), and AdamW's weight decay leaves
  them bit for bit, while every other weight moves."""
  keras.utils.set_random_seed(3)
  model = BertSentenceEncoder(CONFIG)
  model.build()
  model.compile(optimizer=keras.optimizers.AdamW(0.01, weight_decay=0.1))
  pooler = {id(w) for w in model.encoder.pooler.weights}
  assert len(pooler) == 2 and not pooler & {id(w) for w in model.trainable_variables}
  initial = {id(w): w.numpy() for w in model.weights}
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model.fit(tf.data.Dataset.from_tensors(_batch("in_batch_negatives")), verbose=0)
  assert not [w for w in caught if "Gradients do not exist" in str(w.message)]
  for w in model.weights:
    moved = not np.array_equal(w.numpy(), initial[id(w)])
    assert moved == (id(w) not in pooler), w.path


@pytest.mark.parametrize("loss", ["in_batch_negatives", "cosent", "cosine_mse"])
def test_evaluate_and_validation_data_take_the_pairs_fit_takes(loss):
  """Keras' default test step called the model on the pairs dict (`KeyError: 'input_ids'`):
  `evaluate` now scores the training objective, without dropout, on what `fit` accepts."""
  keras.utils.set_random_seed(3)
  model = BertSentenceEncoder(CONFIG, loss=loss)
  model.build()
  model.compile(optimizer=keras.optimizers.SGD(0.0))  # No update: the weights stay.
  data = tf.data.Dataset.from_tensors(_batch(loss))
  features, *labels = _batch(loss)
  want = float(model.replica_loss(features, *(labels or [None]), training=False))
  assert model.evaluate(data, verbose=0) == pytest.approx(want, rel=1e-6)
  history = model.fit(data, validation_data=data, epochs=1, verbose=0)
  assert history.history["val_loss"][0] == pytest.approx(want, rel=1e-6)


def test_evaluate_is_the_mean_over_pairs_whatever_the_batches():
  """Sweep 30, B75: `evaluate` of cosine MSE in batches of 4 of 6 pairs was the mean of the
  two batch means (a batch of 2 weighed as one of 4)."""
  keras.utils.set_random_seed(3)
  model = BertSentenceEncoder(CONFIG, loss="cosine_mse")
  model.build()
  model.compile(optimizer=keras.optimizers.SGD(0.0))
  features, scores = _batch("cosine_mse")
  whole = model.evaluate(features, scores, batch_size=GLOBAL_BATCH, verbose=0)
  assert model.evaluate(features, scores, batch_size=4, verbose=0) == pytest.approx(whole,
                                                                                    rel=1e-6)


def test_fit_names_the_pairs_and_scores_it_takes():
  """A scored-pair loss fitted without labels, or with labels under another key, failed
  inside TensorFlow (`tf.cast` of None or of a dict); pairs under other keys, with a
  KeyError. Each is now one line naming what `fit` takes; {"score": scores} is accepted."""
  keras.utils.set_random_seed(3)
  model = BertSentenceEncoder(CONFIG, loss="cosent")
  model.build()
  model.compile(optimizer=keras.optimizers.SGD(0.0))
  features, scores = _batch("cosent")
  with pytest.raises(ValueError, match=r"the cosent loss trains on scored pairs: fit\(\(pairs, "
                                       r"scores\)\) .*got no labels"):
    model.fit(tf.data.Dataset.from_tensors((features,)), verbose=0)
  with pytest.raises(ValueError, match=r"float \[B\], or a dict with the one key 'score'; got "
                                       r"keys \['label'\]"):
    model.fit(tf.data.Dataset.from_tensors((features, {"label": scores})), verbose=0)
  with pytest.raises(ValueError, match=r"features must be \{'anchor': .*got \['positive', "
                                       r"'query'\]"):
    renamed = {"query": features["anchor"], "positive": features["positive"]}
    model.fit(tf.data.Dataset.from_tensors((renamed, scores)), verbose=0)
  want = float(model.replica_loss(features, scores, training=False))
  history = model.fit(tf.data.Dataset.from_tensors((features, {"score": scores})), verbose=0)
  assert history.history["loss"][0] == pytest.approx(want, rel=1e-6)


def test_batches_with_sample_weights_are_refused_naming_both_arguments():
  """Sweep 10 c150/c151: the steps dropped a batch's sample weights (Keras' own from
  sample_weight= or class_weight=, or a dataset's third element)."""
  model = BertSentenceEncoder(CONFIG, loss="cosine_mse")
  model.build()
  model.compile(optimizer=keras.optimizers.SGD(0.1))
  features, scores = _batch("cosine_mse")
  data = tf.data.Dataset.from_tensors((features, scores, np.zeros_like(scores)))
  before = [w.numpy() for w in model.weights]
  for call in (model.fit, model.evaluate):
    with pytest.raises(ValueError, match=r"BertSentenceEncoder takes no sample_weight or "
                                         r"class_weight \(got batches of \(x, y, "
                                         r"sample_weight\)"):
      call(data, verbose=0)
  for w, w0 in zip(model.weights, before):
    np.testing.assert_array_equal(w.numpy(), w0)


def test_pairs_and_scores_that_do_not_fit_are_refused_naming_the_part():
  """Scores [B, 2] broadcast against the [B] similarities, a fourth part was silently
  left out, a Hugging Face name in a part was dropped (the mask read as all ones), and an
  id past the vocabulary failed in TensorFlow's gather."""
  keras.utils.set_random_seed(3)
  model = BertSentenceEncoder(CONFIG, loss="cosine_mse")
  model.build()
  model.compile(optimizer=keras.optimizers.SGD(0.0))
  features, scores = _batch("cosine_mse")
  bad_id = {**features["positive"], "input_ids": features["positive"]["input_ids"].copy()}
  bad_id["input_ids"][2, 1] = CONFIG.vocab_size
  renamed = {"input_ids": features["anchor"]["input_ids"],
             "attention_mask": features["anchor"]["input_mask"]}
  for data, error, message in (
      ((features, np.stack([scores, scores], 1)), ValueError, r"the cosine_mse loss takes one "
       r"gold score per pair, float \[B\]; got float32 scores of shape \(6, 2\)"),
      (({**features, "hard_negative": features["anchor"]}, scores), ValueError,
       r"features must be \{'anchor': .*got \['anchor', 'hard_negative', 'positive'\]"),
      (({**features, "anchor": renamed}, scores), ValueError, r"x\['anchor'\] has "
       r"attention_mask \(Hugging Face's name; tfbert's is input_mask\)")):
    with pytest.raises(error, match=message):
      model.fit(tf.data.Dataset.from_tensors(data), verbose=0)
  with pytest.raises(ValueError, match=r"x\['positive'\]\['input_ids'\] holds 37 at \[2, 1\], "
                                       r"outside the vocabulary \[0, 37\)"):
    model.fit({**features, "positive": bad_id}, scores, verbose=0)
  # Scores [B, 1] are one per pair too (they broadcast to [B, B] before).
  want = float(model.replica_loss(features, scores, training=False))
  assert model.evaluate(features, scores[:, None], verbose=0) == pytest.approx(want, rel=1e-6)


def test_scores_a_loss_cannot_read_or_reach_are_refused_before_training():
  """Sweep 32: the default encoder (in-batch negatives) fit on scored pairs trained each pair
  as a positive, the scores ignored (B32: evaluate gave 0.6123567 with or without them);
  cosine MSE took STS-B's 0-5 scores, which no cosine reaches (B31: loss 7.05)."""
  features = _batch("cosent")[0]
  default = BertSentenceEncoder(CONFIG)
  default.compile(optimizer=keras.optimizers.SGD(0.1))
  with pytest.raises(ValueError, match=r"in_batch_negatives loss \(its default\), which takes "
                                       r"no labels.*pass loss='cosent' or loss='cosine_mse'"):
    default.fit(features, np.ones(GLOBAL_BATCH, np.float32), verbose=0)
  mse = BertSentenceEncoder(CONFIG, loss="cosine_mse")
  mse.compile(optimizer=keras.optimizers.SGD(0.1))
  sts = np.array([4.0, 5.0, 1.0, 0.0, 2.5, 3.0], np.float32)
  with pytest.raises(ValueError, match=r"BertSentenceEncoder's y hold 4.0 at \[0\]: the "
                                       r"cosine_mse loss .* a cosine is in \[-1, 1\]; scale the "
                                       r"scores first \(STS-B's 0-5: divide by 5\)"):
    mse.fit(features, sts, verbose=0)
  assert not mse.optimizer.built or all(
      not np.any(v.numpy()) for v in mse.optimizer.variables[1:])  # Nothing trained.
  assert np.isfinite(mse.evaluate(features, sts / 5, verbose=0))
