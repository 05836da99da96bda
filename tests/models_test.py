"""Tests for tfbert.models: the public contract and head outputs vs the NumPy reference;
labels of another form are refused naming the form each head trains on."""

import inspect
import re
import typing

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import helpers, numpy_reference
from tfbert import BertClassifier, BertPretrainer, BertSpanLabeler, BertTokenClassifier
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.encoder import BertEncoder
from tfbert.serving import export, serving_dtype
from tfbert.training import distribution
from tfbert.training.accumulation import check_global_clipping, with_gradient_accumulation
from tfbert.training.optimizers import AdamW

TOL = 2e-5  # float32 vs float64 reference; see encoder_test.


def _weights(seed=0):
  config = helpers.odd_config()
  return config, numpy_reference.random_google_weights(config.to_dict(), seed)


def test_pretrainer_contract_and_logits_match_reference():
  config, weights = _weights()
  model = helpers.loaded(BertPretrainer(config), weights)
  f = helpers.random_features(config)
  out = model(f, training=False)
  b, s, p, h, v = helpers.BATCH, helpers.SEQ, helpers.PREDICTIONS, 32, 101
  assert {k: tuple(out[k].shape) for k in out} == {
      "sequence_output": (b, s, h), "pooled_output": (b, h), "mlm_logits": (b, p, v),
      "nsp_logits": (b, 2)}
  want = numpy_reference.bert_forward(weights, config.to_dict(), f["input_ids"],
                                      f["input_mask"], f["segment_ids"],
                                      f["masked_lm_positions"])
  assert helpers.max_abs_diff(out["mlm_logits"], want["mlm_logits"]) < TOL
  assert helpers.max_abs_diff(out["nsp_logits"], want["nsp_logits"]) < TOL


def test_mlm_decoder_is_tied_to_word_embeddings():
  config, weights = _weights()
  model = helpers.loaded(BertPretrainer(config), weights)
  names = [v.path for v in model.weights]
  assert not any("decoder" in n for n in names)  # No separate [V, H] output matrix.
  f = helpers.random_features(config)
  before = model(f, training=False)["mlm_logits"].numpy()
  table = model.encoder.embeddings.word_embeddings.embeddings
  table.assign(table.numpy() * 1.5)
  assert not np.allclose(before, model(f, training=False)["mlm_logits"].numpy())


def test_pretrainer_without_positions_predicts_every_position():
  config, weights = _weights()
  model = helpers.loaded(BertPretrainer(config), weights)
  f = helpers.random_features(config)
  every = model({k: v for k, v in f.items() if k != "masked_lm_positions"}, training=False)
  assert every["mlm_logits"].shape == (helpers.BATCH, helpers.SEQ, config.vocab_size)
  picked = model(f, training=False)["mlm_logits"].numpy()
  gathered = np.take_along_axis(every["mlm_logits"].numpy(),
                                f["masked_lm_positions"][..., None], axis=1)
  np.testing.assert_allclose(picked, gathered, atol=1e-6)


def _positions_with_repeats_and_zero(f):
  positions = f["masked_lm_positions"].copy()
  positions[0] = [0, 4, 4]  # Position 0 (the pooler's) and a repeat, as padded MLM rows have.
  return {**f, "masked_lm_positions": positions}


def test_masked_positions_only_matches_reference_and_full_gradients():
  config, weights = _weights()
  model = helpers.loaded(BertPretrainer(config), weights)
  f = _positions_with_repeats_and_zero(helpers.random_features(config))
  want = numpy_reference.bert_forward(weights, config.to_dict(), f["input_ids"],
                                      f["input_mask"], f["segment_ids"],
                                      f["masked_lm_positions"])

  def outputs_and_grads(masked_positions_only):
    with tf.GradientTape() as tape:
      out = model(f, training=True, masked_positions_only=masked_positions_only)
      loss = tf.reduce_sum(out["mlm_logits"] ** 2) + tf.reduce_sum(out["nsp_logits"] ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    return out, [tf.convert_to_tensor(g).numpy() for g in grads]

  sparse, sparse_grads = outputs_and_grads(True)
  full, full_grads = outputs_and_grads(False)
  p, h = helpers.PREDICTIONS, config.hidden_size
  assert tuple(sparse["sequence_output"].shape) == (helpers.BATCH, p, h)
  # The same float32 ops on fewer rows: bit for bit where oneDNN runs the matmuls (AMD Zen 4,
  # Intel), but Eigen's matmul (TensorFlow's default on CPUs without AVX512, e.g. AMD Zen 3)
  # blocks a different row count differently: measured 7.2e-7 there (values ~1), one float32
  # rounding in the last places of a 37-term sum; 2e-6 is a few of those.
  np.testing.assert_allclose(
      sparse["sequence_output"],
      np.take_along_axis(full["sequence_output"].numpy(), f["masked_lm_positions"][..., None],
                         axis=1), rtol=0, atol=2e-6)
  assert helpers.max_abs_diff(sparse["mlm_logits"], want["mlm_logits"]) < TOL
  assert helpers.max_abs_diff(sparse["nsp_logits"], want["nsp_logits"]) < TOL
  # Same float32 ops over fewer rows; only the matmuls' summation order may differ. Gradient
  # entries are sums of terms up to the tensor's largest entry (up to ~2000 here, logits ~ 3,
  # initializer_range 0.2), so a small entry carries the rounding of those large terms: the
  # bound is 1e-4 plus 2e-6 of the tensor's largest entry. Measured: at most 6.4e-7 of the
  # largest entry (AMD Zen 3, Eigen's matmuls); a token-type entry of 1.84 moved by 1.3e-4
  # in one full-suite run there, beyond a flat 1e-4.
  for variable, a, b in zip(model.trainable_variables, sparse_grads, full_grads):
    np.testing.assert_allclose(a, b, atol=1e-4 + 2e-6 * np.abs(b).max(), rtol=1e-5,
                               err_msg=variable.path)
  assert max(np.abs(g).max() for g in full_grads) > 1.0  # The comparison is not of zeros.


def test_masked_positions_only_without_positions_predicts_every_position():
  config, weights = _weights()
  model = helpers.loaded(BertPretrainer(config), weights)
  f = {k: v for k, v in helpers.random_features(config).items() if k != "masked_lm_positions"}
  out = model(f, training=False, masked_positions_only=True)
  assert out["mlm_logits"].shape == (helpers.BATCH, helpers.SEQ, config.vocab_size)
  np.testing.assert_array_equal(out["mlm_logits"], model(f, training=False)["mlm_logits"])


def test_span_labeler_logits_are_googles_cls_squad_projection():
  config, weights = _weights()
  rng = np.random.default_rng(1)
  weights = {k: v for k, v in weights.items() if k.startswith("bert/")}
  weights["cls/squad/output_weights"] = rng.standard_normal((2, 32)).astype(np.float32)
  weights["cls/squad/output_bias"] = rng.standard_normal(2).astype(np.float32)
  model = helpers.loaded(BertSpanLabeler(config), weights)
  f = helpers.random_features(config)
  out = model(f, training=False)
  seq = numpy_reference.bert_forward(weights, config.to_dict(), f["input_ids"],
                                     f["input_mask"], f["segment_ids"])["sequence_output"]
  logits = seq @ weights["cls/squad/output_weights"].T + weights["cls/squad/output_bias"]
  assert helpers.max_abs_diff(out["start_logits"], logits[..., 0]) < TOL
  assert helpers.max_abs_diff(out["end_logits"], logits[..., 1]) < TOL


def test_classifier_logits_and_dropout_only_in_training():
  config, weights = _weights()
  rng = np.random.default_rng(2)
  weights = {k: v for k, v in weights.items() if k.startswith("bert/")}
  weights["output_weights"] = rng.standard_normal((5, 32)).astype(np.float32)
  weights["output_bias"] = rng.standard_normal(5).astype(np.float32)
  model = helpers.loaded(BertClassifier(config, num_classes=5, dropout_rate=0.5), weights)
  f = helpers.random_features(config)
  pooled = numpy_reference.bert_forward(weights, config.to_dict(), f["input_ids"],
                                        f["input_mask"], f["segment_ids"])["pooled_output"]
  want = pooled @ weights["output_weights"].T + weights["output_bias"]
  assert helpers.max_abs_diff(model(f, training=False)["logits"], want) < TOL
  assert helpers.max_abs_diff(model(f, training=True)["logits"], want) > 1e-3


@pytest.mark.parametrize("make", [lambda c: BertPretrainer(c), lambda c: BertSpanLabeler(c),
                                  lambda c: BertClassifier(c, 3)])
def test_keras_save_and_load_round_trip(make, tmp_path):
  config = helpers.odd_config()
  model = make(config)
  f = helpers.random_features(config)
  out = model(f, training=False)
  model.save(tmp_path / "m.keras")
  clone = keras.saving.load_model(tmp_path / "m.keras")
  assert type(clone) is type(model) and clone.config == config
  for key, value in clone(f, training=False).items():
    np.testing.assert_array_equal(value, out[key])


def test_mixed_bfloat16_computes_in_bfloat16_and_returns_float32_logits():
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  config, weights = _weights()
  model = helpers.loaded(BertPretrainer(config), weights)
  f = helpers.random_features(config)
  out = model(f, training=False)
  assert out["sequence_output"].dtype == "bfloat16"
  assert out["mlm_logits"].dtype == "float32" and out["nsp_logits"].dtype == "float32"
  assert all(v.dtype == "float32" for v in model.weights)
  want = numpy_reference.bert_forward(weights, config.to_dict(), f["input_ids"],
                                      f["input_mask"], f["segment_ids"],
                                      f["masked_lm_positions"])
  # bfloat16 keeps 8 mantissa bits (~4e-3 relative) through 3 layers; logits are O(1).
  assert helpers.max_abs_diff(out["nsp_logits"], want["nsp_logits"]) < 0.1


# Keras evaluate / fit(validation_data=...): the model's own loss and task metric, with no
# loss in compile, exact over batches and replicas. 37 examples in batches of 8: the last
# batch of 5 splits 3 / 2 over two replicas, so a mean of per-replica or per-batch means
# would be off. Tolerance: float32 logits, float64 sums; 1e-5 relative.
N_EVAL = 37
# One layer: what is proven is how evaluate and fit sum over batches and replicas, which
# the encoder's depth does not change (a 3-layer model only traced longer).
EVAL_CONFIG = dict(num_hidden_layers=1, hidden_dropout_prob=0.0,
                   attention_probs_dropout_prob=0.0)


def _eval_data(config, kind, seed=0):
  rng = np.random.default_rng(seed)
  features = {k: v for k, v in helpers.random_features(config, seed, N_EVAL, 11).items()
              if k != "masked_lm_positions"}
  if kind == "classifier":
    return features, {"logits": rng.integers(0, 3, N_EVAL).astype(np.int32)}
  if kind == "regression":
    return features, {"logits": rng.uniform(0, 5, N_EVAL).astype(np.float32)}
  if kind == "tagger":
    tags = rng.integers(0, 4, (N_EVAL, 11)).astype(np.int32)
    tags[rng.random((N_EVAL, 11)) < 0.4] = -1  # Positions where no word starts.
    tags[0] = -1  # An example with no labelled position.
    return features, {"logits": tags}
  ends = rng.integers(0, 11, (2, N_EVAL)).astype(np.int32)
  return features, {"start_logits": ends.min(0), "end_logits": ends.max(0)}  # In order.


def _make(kind, config):
  return {"classifier": lambda: BertClassifier(config, 3, 0.1),
          "regression": lambda: BertClassifier(config, 1, 0.1),
          "tagger": lambda: BertTokenClassifier(config, ("O", "B-x", "I-x", "E"), 0.1),
          "span": lambda: BertSpanLabeler(config)}[kind]()


def _cross_entropy(logits, labels):
  logits = logits.astype(np.float64)
  shifted = logits - logits.max(-1, keepdims=True)
  log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
  return -np.take_along_axis(log_probs, np.maximum(labels, 0)[..., None], -1)[..., 0]


def _numpy_eval(kind, logits, labels):
  """The expected `evaluate` results, from the model's logits on all examples at once."""
  if kind == "classifier":
    y = labels["logits"]
    return {"loss": _cross_entropy(logits["logits"], y).mean(),
            "accuracy": (logits["logits"].argmax(-1) == y).mean()}
  if kind == "regression":
    x, y = logits["logits"][:, 0].astype(np.float64), labels["logits"].astype(np.float64)
    return {"loss": ((x - y) ** 2).mean(), "pearson": np.corrcoef(x, y)[0, 1]}
  if kind == "tagger":
    y = labels["logits"]
    labelled = y >= 0
    per_example = ((_cross_entropy(logits["logits"], y) * labelled).sum(1)
                   / np.maximum(labelled.sum(1), 1))
    right = (logits["logits"].argmax(-1) == y) & labelled
    # The mean over the examples that have a labelled position (example 0 has none: its
    # loss 0 counted pulled the mean down, sweep 31, B46).
    return {"loss": per_example[labelled.any(1)].mean(),
            "accuracy": right.sum() / labelled.sum()}
  ce = sum(_cross_entropy(logits[n], labels[n]) for n in ("start_logits", "end_logits"))
  exact = ((logits["start_logits"].argmax(-1) == labels["start_logits"])
           & (logits["end_logits"].argmax(-1) == labels["end_logits"]))
  return {"loss": (0.5 * ce).mean(), "accuracy": exact.mean()}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["classifier", "regression", "tagger", "span"])
def test_evaluate_gives_the_models_loss_and_task_metric_on_one_device_and_mirrored(kind):
  config = helpers.odd_config(**EVAL_CONFIG)
  features, labels = _eval_data(config, kind)
  keras.utils.set_random_seed(3)
  model = _make(kind, config)
  model.build()
  # The README's compile: an optimizer only.
  model.compile(optimizer="adam")
  got = model.evaluate(features, labels, batch_size=8, verbose=0, return_dict=True)
  want = _numpy_eval(kind, {k: np.asarray(v) for k, v in
                            model(features, training=False).items()}, labels)
  assert sorted(got) == sorted(want)
  for name in want:
    assert got[name] == pytest.approx(want[name], rel=1e-5), (name, got, want)
  strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  with strategy.scope():
    mirrored = _make(kind, config)
    mirrored.build()
    mirrored.set_weights(model.get_weights())
    mirrored.compile(optimizer="adam")
  twice = mirrored.evaluate(features, labels, batch_size=8, verbose=0, return_dict=True)
  for name in want:
    assert twice[name] == pytest.approx(want[name], rel=1e-5), (name, twice, want)


def _uneven_fit(kind, strategy):
  """One epoch of `fit` on 7 examples in batches of 3: on 2 replicas the shares are 2 and 1,
  then 1 and 0 for the last batch. Returns (the epoch's loss, trained weights)."""
  config = helpers.odd_config(**EVAL_CONFIG)
  features = helpers.random_features(config, 5, 7, 9)
  ids = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
  scores = np.array([0.1, 0.9, 0.5, 0.3, 0.7, 0.2, 0.8], np.float32)
  with strategy.scope():
    keras.utils.set_random_seed(1)
    if kind == "classifier":
      model, x, y = BertClassifier(config, 3, 0.0), ids, {"logits": np.array(
          [0, 1, 1, 0, 2, 2, 1], np.int32)}
    else:
      model = BertSentenceEncoder(config, loss=kind)
      other = helpers.random_features(config, 6, 7, 9)
      x = {"anchor": ids, "positive": {k: other[k] for k in ids}}
      y = None if kind == "in_batch_negatives" else scores
    model.build()
    model.compile(optimizer=keras.optimizers.SGD(0.5))
  history = model.fit(x, y, batch_size=3, epochs=1, verbose=0, shuffle=False).history
  return history["loss"], np.concatenate([v.numpy().ravel() for v in model.trainable_variables])


@pytest.mark.slow  # 3-7 s: two fits. (CoSENT gathers as in-batch negatives do.)
@pytest.mark.parametrize("kind", ["classifier", "cosine_mse", "in_batch_negatives"])
def test_replicas_of_unequal_shares_train_as_one_device(kind):
  """Sweep 29, B103/B104: a batch split unequally over the replicas (3 rows: 2 and 1; a last
  row: 1 and 0) averaged each replica's mean as if the shares were equal: a classifier ended
  0.49 away from one device (a cosine-MSE encoder 0.021), the epoch loss was NaN (an empty
  replica's mean), a first batch of unequal shares failed in Keras' build (AddN) and the
  sentence encoder's batch losses failed to gather. The global batch's mean is over its
  examples, however they are spread."""
  one_losses, one = _uneven_fit(kind, tf.distribute.OneDeviceStrategy("/cpu:0"))
  two_losses, two = _uneven_fit(kind, distribution.create_strategy("mirrored", 2))
  assert np.abs(one - two).max() < 1e-5  # Measured: 6e-8 to 4e-6 (in-batch scale 20).
  np.testing.assert_allclose(two_losses, one_losses, rtol=1e-5)


@pytest.mark.slow  # ~3 s: two fits.
def test_a_keras_adam_fit_updates_repeated_embedding_rows_as_tfbert_optimizers_do():
  """Sweep 30, B74: Keras' Adam updated a sparse gradient row by row, so an embedding row
  looked up several times in a batch (every segment-0 position) moved 0.0046 where the
  dense update moves 0.0100; the train step now hands every optimizer dense gradients, and
  a plain `fit` equals the same step through tfbert's wrapper (which densified already)."""
  config = helpers.odd_config(**EVAL_CONFIG)
  features = helpers.random_features(config, 5, 4, 9)
  x = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
  y = {"logits": np.array([0, 1, 2, 1], np.int32)}

  def trained(wrap):
    keras.utils.set_random_seed(0)
    model = BertClassifier(config, 3, 0.0)
    model.build()
    optimizer = keras.optimizers.Adam(1e-2)
    model.compile(optimizer=with_gradient_accumulation(optimizer, 1) if wrap else optimizer)
    model.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False)
    return {w.path.split("/", 1)[1]: w.numpy() for w in model.trainable_variables}

  plain, wrapped = trained(False), trained(True)
  segments = "encoder/embeddings/token_type_embeddings/embeddings"
  assert np.abs(plain[segments] - wrapped[segments]).max() < 1e-6
  assert max(np.abs(plain[k] - wrapped[k]).max() for k in plain) < 1e-6


@pytest.mark.slow  # ~4 s: 4 evaluate traces.
def test_pretraining_labels_of_a_dataset_are_refused_naming_the_feature(caplog):
  """Sweep 30, B53/B54/B55/B63: a tf.data batch with a position of S or -1, a
  next-sentence label of 2 or a masked id past the vocabulary ended in TensorFlow's raw
  InvalidArgumentError; the same values as NumPy were refused naming the feature. And
  (B47) `jit_compile` runs without these checks: it says so."""
  config = helpers.odd_config(**EVAL_CONFIG)
  features = helpers.random_features(config, 5, 4, 9)
  features.update(masked_lm_ids=np.full((4, 3), 7, np.int32),
                  masked_lm_weights=np.ones((4, 3), np.float32),
                  next_sentence_labels=np.array([0, 1, 1, 0], np.int32),
                  masked_lm_positions=np.array([[1, 2, 3]] * 4, np.int32))
  model = BertPretrainer(config)
  model.build()
  model.compile(optimizer="adam")
  for name, value, expected in [
      ("masked_lm_positions", [[9, 2, 3]] * 4, "holds 9, outside the positions [0, S)"),
      ("masked_lm_positions", [[-1, 2, 3]] * 4, "holds -1, outside the positions [0, S)"),
      ("next_sentence_labels", [0, 2, 1, 0], "holds 2, outside the next-sentence labels"),
      ("masked_lm_ids", [[config.vocab_size] * 3] * 4,
       f"holds {config.vocab_size}, outside the vocabulary")]:
    data = tf.data.Dataset.from_tensor_slices(
        {**features, name: np.array(value, np.int32)}).batch(4)
    with pytest.raises(ValueError, match=re.escape(f"BertPretrainer.evaluate: a batch's "
                                                   f"{name} {expected}")):
      model.evaluate(data, verbose=0)
  caplog.set_level("WARNING", logger="absl")
  model.compile(optimizer="adam", jit_compile=True)
  model.evaluate(tf.data.Dataset.from_tensor_slices(features).batch(4), verbose=0)
  assert "BertPretrainer compiled with jit_compile=True: XLA drops asserts" in caplog.text


def test_a_frozen_encoder_stays_frozen_through_save_and_load_model(tmp_path):
  """Sweep 30, B44: Keras rebuilds a subclassed model's layers from its constructor, so an
  encoder frozen before `save` came back trainable (41 trainable variables for 2) and a
  resumed fit trained it."""
  model = BertClassifier(helpers.odd_config(**EVAL_CONFIG), 3)
  model.build()
  model.encoder.trainable = False
  model.encoder.embeddings.trainable = True  # A child unfrozen under its frozen parent.
  model.save(str(tmp_path / "m.keras"))
  loaded = keras.models.load_model(str(tmp_path / "m.keras"))
  assert not loaded.encoder.trainable and loaded.encoder.embeddings.trainable
  assert ([v.path.split("/", 1)[1] for v in loaded.trainable_variables]
          == [v.path.split("/", 1)[1] for v in model.trainable_variables])
  plain = BertClassifier(helpers.odd_config(**EVAL_CONFIG), 3)
  assert "layer_trainable" not in plain.get_config()  # Nothing frozen, nothing recorded.


def test_keras_clipping_is_refused_where_it_would_clip_each_replica_apart():
  """Sweep 29, B71: Keras clips in `apply`, per replica, before the gradients are summed:
  under 2 replicas `global_clipnorm=1e-3` let through an update of norm 1.2e-3."""
  for arg in ("clipnorm", "global_clipnorm", "clipvalue"):
    optimizer = keras.optimizers.SGD(0.1, **{arg: 1e-3})
    check_global_clipping(optimizer, 1)  # One replica: clipped as a whole.
    with pytest.raises(ValueError, match=rf"^{arg}=0.001 of SGD would clip each of the 2 "
                       r"replicas' gradients apart .*with_gradient_accumulation\(optimizer, 1, "
                       rf"clip_norm=...\) and no {arg}$"):
      check_global_clipping(optimizer, 2)
    with pytest.raises(ValueError, match=f"{arg}=0.001 of SGD"):  # Under a loss scaler too.
      check_global_clipping(keras.optimizers.LossScaleOptimizer(optimizer), 2)
  check_global_clipping(with_gradient_accumulation(keras.optimizers.SGD(0.1), 1,
                                                   clip_norm=1e-3), 2)  # tfbert's: global.
  # Sweep 29, B69: Keras' own accumulation was refused in the clipping rule's words.
  with pytest.raises(ValueError, match="gradient_accumulation_steps=2 of Keras would "
                                       "accumulate a second time, 2 micro-steps inside each "
                                       "of these 3"):
    with_gradient_accumulation(keras.optimizers.SGD(0.1, gradient_accumulation_steps=2), 3)


@pytest.mark.slow  # ~3 s: a mirrored model traced.
def test_fit_under_two_replicas_refuses_keras_clipping_before_any_update():
  config = helpers.odd_config(**EVAL_CONFIG)
  features = helpers.random_features(config, 5, 4, 9)
  x = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
  with distribution.create_strategy("mirrored", 2).scope():
    model = BertClassifier(config, 2, 0.0)
    model.build()
    model.compile(optimizer=AdamW(1e-3, 0.0, global_clipnorm=1.0))
  before = [v.numpy() for v in model.trainable_variables]
  with pytest.raises(ValueError, match="global_clipnorm=1.0 of AdamW would clip each of the 2"):
    model.fit(x, {"logits": np.array([0, 1, 1, 0], np.int32)}, batch_size=4, verbose=0)
  assert all((v.numpy() == b).all() for v, b in zip(model.trainable_variables, before))


def _pearson_of(model, x, y):
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  sums = {"examples": tf.constant(float(len(x)), tf.float64),
          **{k: tf.constant(v, tf.float64) for k, v in
             {"x": x.sum(), "y": y.sum(), "xx": (x * x).sum(), "yy": (y * y).sum(),
              "xy": (x * y).sum()}.items()}}
  return float(model.metric_values(sums)["pearson"])


def test_regression_pearson_is_nan_where_a_side_is_constant_and_r_elsewhere():
  # Constant targets once evaluated to pearson 0.0, a measured-looking value; scipy and the
  # tools' GLUE metrics give NaN. 0.1 x 7 leaves its float64 sums 1.1e-16 off a zero spread.
  model = BertClassifier(helpers.odd_config(**EVAL_CONFIG), 1)
  varied = [0.3, -1.2, 2.5, 0.9, 1.7, -0.4, 3.1]
  for constant in ([2.5] * 7, [0.1] * 7):
    assert np.isnan(_pearson_of(model, varied, constant)), constant
    assert np.isnan(_pearson_of(model, constant, varied)), constant
  other = [1.0, -0.5, 2.0, 2.2, 0.7, 0.1, 2.9]
  assert _pearson_of(model, varied, other) == pytest.approx(
      np.corrcoef(varied, other)[0, 1], abs=1e-12)
  assert _pearson_of(model, varied, [-v for v in varied]) == pytest.approx(-1.0, abs=1e-12)


@pytest.mark.slow
def test_pretrainer_evaluate_is_the_same_over_batches_and_replicas():
  config = helpers.odd_config(**EVAL_CONFIG)
  rng = np.random.default_rng(4)
  features = helpers.random_features(config, 4, N_EVAL, 11)
  features.update(masked_lm_ids=rng.integers(0, config.vocab_size, (N_EVAL, 3)).astype(np.int32),
                  masked_lm_weights=(rng.random((N_EVAL, 3)) < 0.7).astype(np.float32),
                  next_sentence_labels=rng.integers(0, 2, (N_EVAL, 1)).astype(np.int32))
  model = BertPretrainer(config)
  model.build()
  model.compile(optimizer="adam")
  whole = model.evaluate(features, batch_size=N_EVAL, verbose=0, return_dict=True)
  strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  with strategy.scope():
    mirrored = BertPretrainer(config)
    mirrored.build()
    mirrored.set_weights(model.get_weights())
    mirrored.compile(optimizer="adam")
  batched = mirrored.evaluate(features, batch_size=8, verbose=0, return_dict=True)
  assert sorted(whole) == ["loss", "mlm_accuracy", "mlm_loss", "nsp_accuracy", "nsp_loss"]
  for name in whole:
    assert batched[name] == pytest.approx(whole[name], rel=1e-5), (name, batched, whole)
  assert whole["loss"] == pytest.approx(whole["mlm_loss"] + whole["nsp_loss"], rel=1e-6)


@pytest.mark.slow
def test_fit_reports_validation_metrics_that_early_stopping_can_watch():
  config = helpers.odd_config(num_hidden_layers=1)
  features, labels = _eval_data(config, "classifier")
  model = BertClassifier(config, 3)
  # Learning rate 0: the weights, so val_loss, never change. The callback then stops after
  # the second epoch (no improvement on the first's, patience 0) if, and only if, it finds
  # val_loss: a missing monitor only warns, and all four epochs run.
  model.compile(optimizer=keras.optimizers.Adam(0.0))
  history = model.fit(features, labels, batch_size=8, epochs=4, verbose=0,
                      validation_data=(features, labels),
                      callbacks=[keras.callbacks.EarlyStopping(monitor="val_loss", patience=0)])
  assert sorted(history.history) == ["loss", "val_accuracy", "val_loss"]
  assert len(history.history["loss"]) == 2
  assert 0.5 < history.history["val_loss"][0] < 3.0  # A 3-class cross-entropy, not 0.
  # The task metric without `mode=` (README): Keras reads its direction from
  # `model.metrics` and refused it before ("Pass `mode='max'`"); as a bigger-is-better
  # metric that never improves, it stops after the second epoch too.
  stopper = keras.callbacks.EarlyStopping(monitor="val_accuracy", patience=0)
  history = model.fit(features, labels, batch_size=8, epochs=4, verbose=0,
                      validation_data=(features, labels), callbacks=[stopper])
  assert len(history.history["loss"]) == 2 and stopper.monitor_op is keras.ops.greater
  assert model.metrics_names == ["loss", "metric_directions"]  # No reported value added.
  directions = {m.name: m._direction for m in model.metrics[-1].metrics}
  assert directions == {"accuracy": "up"}
  assert {m.name: m._direction for m in BertClassifier(config, 1).metrics[-1].metrics} == {
      "pearson": "up"}


def test_keras_export_points_to_tfberts_exporter_which_writes_the_id_signatures(tmp_path):
  config = helpers.odd_config()
  model = BertClassifier(config, 3, labels=("a", "b", "c"))
  model.build()
  for kwargs in ({}, {"format": "onnx"}):
    with pytest.raises(NotImplementedError, match=r"export_ids_saved_model\(model, path\).*"
                       r"tools/export_onnx.py"):
      model.export(str(tmp_path / "x"), **kwargs)
  assert not (tmp_path / "x").exists()
  export.export_ids_saved_model(model, str(tmp_path / "exported"))
  loaded = tf.saved_model.load(str(tmp_path / "exported"))
  assert sorted(loaded.signatures) == sorted(export.ID_SIGNATURES)
  assert (tmp_path / "exported" / "labels.txt").read_text() == "a\nb\nc\n"
  assert serving_dtype.read_record(str(tmp_path / "exported"))["compute_dtype"] == "float32"
  features = {k: v for k, v in helpers.random_features(config, 1).items()
              if k in export.FEATURE_NAMES}
  got = loaded.signatures["serving_hf"](
      input_ids=tf.constant(features["input_ids"], tf.int64),
      attention_mask=tf.constant(features["input_mask"], tf.int64),
      token_type_ids=tf.constant(features["segment_ids"], tf.int64))
  want = model(features, training=False)["logits"]
  assert helpers.max_abs_diff(got["logits"], want) < TOL


# --- labels refused naming the form each head trains on (issue 47) --------------------------

@pytest.fixture(scope="module")
def heads():
  """One tiny compiled model per fine-tuning head (1 layer), never trained."""
  config = helpers.odd_config(num_hidden_layers=1)
  models = {}
  for kind in ("classifier", "regression", "tagger", "span"):
    models[kind] = _make(kind, config)
    models[kind].build()
    models[kind].compile(optimizer="adam")
  return config, models


def _head_features(config, batch=4, seq=5):
  return {k: v for k, v in helpers.random_features(config, 2, batch, seq).items()
          if k != "masked_lm_positions"}


_IDS = np.array([0, 1, 2, 1], np.int32)


@pytest.mark.parametrize("kind, labels, message", [
    ("classifier", None, r"BertClassifier trains and evaluates on labels: pass y, or a dataset "
     r"of \(features, labels\), with labels \{'logits': int class ids \[B\] in \[0, 3\)\} \(or "
     r"that array alone\); got none"),
    ("classifier", {"wrong": _IDS}, r"BertClassifier's labels are \{'logits': int class ids "
     r"\[B\] in \[0, 3\)\} \(or that array alone\); got a dict with keys \['wrong'\]"),
    ("classifier", {"logits": _IDS, "extra": _IDS}, r"got a dict with keys \['extra', 'logits'\]"),
    ("classifier", np.eye(3, dtype=np.float32)[_IDS], r"BertClassifier's labels have shape "
     r"\[4, 3\]: one-hot or probabilities over the classes, where the head trains on int class "
     r"ids \[B\] in \[0, 3\); pass the class ids, e.g. labels.argmax\(-1\)"),
    ("classifier", _IDS.astype(np.float32) + 0.5, r"BertClassifier's labels are float32: the "
     r"head trains on int class ids \[B\] in \[0, 3\), integers"),
    ("classifier", np.array(["a", "b", "c", "a"]), r"labels are strings: the head trains on int "
     r"class ids .*fit\(texts, labels\) on raw text takes its label names"),
    ("regression", np.ones((4, 2), np.float32), r"BertClassifier's labels have shape \[4, 2\]: "
     r"the head trains on float scores \[B\]"),
    ("tagger", np.zeros((4, 5, 4), np.float32), r"BertTokenClassifier's labels have shape "
     r"\[4, 5, 4\]: one-hot or probabilities .* int tag ids \[B, S\] in \[0, 4\)"),
    ("tagger", _IDS, r"BertTokenClassifier's labels have shape \[4\]: the head trains on int "
     r"tag ids \[B, S\]"),
    ("span", _IDS, r"BertSpanLabeler's labels are \{'start_logits': int positions \[B\] in "
     r"\[0, S\), 'end_logits': int positions \[B\] in \[0, S\)\}; got a"),
    ("span", {"start_logits": _IDS}, r"BertSpanLabeler's labels are .*got a dict with keys "
     r"\['start_logits'\]"),
], ids=["classifier_none", "classifier_wrong_key", "classifier_extra_key", "classifier_one_hot",
        "classifier_float_ids", "classifier_strings", "regression_two_scores",
        "tagger_one_hot", "tagger_rank_1", "span_one_array", "span_missing_key"])
def test_labels_of_another_form_are_refused_naming_the_form_the_head_trains_on(
    heads, kind, labels, message):
  """Sweep 6 A33 ("None values not supported."), A34 (KeyError: 'logits'), A36 (TensorFlow's
  "`labels.shape.rank` must equal ..."); float class ids were silently truncated."""
  config, models = heads
  features = _head_features(config)
  data = tf.data.Dataset.from_tensors(features if labels is None else (features, labels))
  for call in (models[kind].evaluate, models[kind].fit):
    with pytest.raises(ValueError, match=message):
      call(data, verbose=0)


_TAGS = np.zeros((4, 5), np.int32)


def _tags(value, at=(1, 2)):
  tags = _TAGS.copy()
  tags[at] = value
  return tags


@pytest.mark.parametrize("kind, labels, message", [
    ("classifier", np.array([0, 1, 5, 1]), r"BertClassifier's labels hold 5 at \[2\]: the "
     r"head trains on int class ids \[B\] in \[0, 3\)$"),
    ("classifier", [0, -1, 2, 1], r"BertClassifier's labels hold -1 at \[1\]"),
    ("classifier", {"logits": tf.constant([[0], [1], [2], [3]])}, r"BertClassifier's "
     r"labels\['logits'\] hold 3 at \[3\]"),
    ("tagger", _tags(7), r"BertTokenClassifier's labels hold 7 at \[1, 2\]: the head trains "
     r"on int tag ids \[B, S\] in \[0, 4\), or -1 / -100 where no word starts$"),
    ("tagger", _tags(-2), r"BertTokenClassifier's labels hold -2 at \[1, 2\]"),
    ("span", {"start_logits": _IDS, "end_logits": np.array([0, 1, 5, 1])}, r"BertSpanLabeler's "
     r"labels\['end_logits'\] hold 5 at \[2\]: the head trains on int positions \[B\] in "
     r"\[0, S\) \(S = 5 here\)$"),
], ids=["classifier_5", "classifier_minus_1", "classifier_dict_b_1", "tagger_7", "tagger_minus_2",
        "span_beyond_s"])
def test_label_values_out_of_range_are_refused_at_the_entry_of_each_call(
    heads, kind, labels, message):
  """Sweep 22 P1 / S1: out-of-range ids reached SparseSoftmaxCrossEntropyWithLogits (a
  multi-line kernel error; NaN on a GPU), and a tagger trained on nothing for -2. Checked
  before Keras runs (no step is traced), in each call that takes labels."""
  config, models = heads
  model, features = models[kind], _head_features(config)
  before = [w.numpy() for w in model.weights]
  for call in (lambda: model.fit(features, labels, verbose=0),
               lambda: model.evaluate(features, labels, verbose=0),
               lambda: model.fit(features, _valid(kind), verbose=0,
                                 validation_data=(features, labels)),
               lambda: model.train_on_batch(features, labels),
               lambda: model.test_on_batch(features, labels)):
    with pytest.raises(ValueError, match=message.replace("labels", "(labels|validation_data"
                                                                    r"\[1\])", 1)):
      call()
  for w, w0 in zip(model.weights, before):
    np.testing.assert_array_equal(w.numpy(), w0)


@pytest.mark.parametrize("jit_compile", [False, pytest.param(True, marks=pytest.mark.slow)])
@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_label_values_of_a_dataset_are_checked_in_its_pipeline_even_under_xla(jit_compile):
  """Sweep 22 P1 for tf.data: the check is a `map` of the dataset (not an op of the step,
  so XLA, which drops asserts, keeps it), raised by graph_checks as one line. (~3 s, XLA ~6
  s: the step is traced before the first batch is read.)"""
  config = helpers.odd_config(num_hidden_layers=1)
  model = BertTokenClassifier(config, ("O", "B-x", "I-x", "B-y"))
  model.build()
  model.compile(optimizer="adam", jit_compile=jit_compile)
  before = [w.numpy() for w in model.weights]
  bad = tf.data.Dataset.from_tensors((_head_features(config), _tags(-2)))
  for call in (model.fit, model.evaluate)[:1 if jit_compile else 2]:
    with pytest.raises(ValueError, match=r"^BertTokenClassifier\.(fit|evaluate): a batch's "
                                         r"labels hold -2: BertTokenClassifier trains on int "
                                         r"tag ids \[B, S\] in \[0, 4\), or -1 / -100"):
      call(bad, verbose=0)
  for w, w0 in zip(model.weights, before):
    np.testing.assert_array_equal(w.numpy(), w0)


def _valid(kind):
  return {"classifier": _IDS, "tagger": _TAGS, "span": {"start_logits": _IDS,
                                                        "end_logits": _IDS}}[kind]


def test_a_tagger_ignores_minus_1_and_hugging_faces_minus_100(heads):
  """Sweep 22 S1: -1 (tagging_features.IGNORE) and -100 (Hugging Face's ignore index) are
  skipped by the loss, and accepted at the entry check."""
  config, models = heads
  features = _head_features(config)
  tags = _tags(-100, (slice(None), slice(0, 3)))
  tags[:, 3] = -1
  outputs = models["tagger"](features, training=False)
  labelled = models["tagger"].example_losses(outputs, {"logits": tags})
  alone = models["tagger"].example_losses(
      {"logits": outputs["logits"][:, 4:]}, {"logits": tags[:, 4:]})
  np.testing.assert_allclose(labelled.numpy(), alone.numpy(), rtol=1e-6)
  models["tagger"].test_on_batch(features, tags)


def test_class_ids_of_shape_b_1_are_read_as_b(heads):
  """Keras' sparse losses take [B, 1] class ids; the cross-entropy refused them (rank)."""
  config, models = heads
  features = _head_features(config)
  flat = models["classifier"].evaluate(features, _IDS, verbose=0, return_dict=True)
  column = models["classifier"].evaluate(features, _IDS[:, None], verbose=0, return_dict=True)
  assert column == pytest.approx(flat, rel=1e-6)


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_a_refused_fit_leaves_the_model_trainable():
  """The optimizer is built in the first trace of the training step; a first trace that
  failed made every later fit fail ("Creating variables on a non-first call")."""
  config = helpers.odd_config(num_hidden_layers=1)
  model = BertClassifier(config, 3)
  model.build()
  model.compile(optimizer="adam")
  features = _head_features(config)
  with pytest.raises(ValueError, match="got none"):
    model.fit(tf.data.Dataset.from_tensors(features), verbose=0)
  assert np.isfinite(model.fit(features, _IDS, verbose=0).history["loss"][0])


def test_batches_with_sample_weights_are_refused_before_the_step_changes_anything():
  """Sweep 10 c150/c151: `train_step` and `test_step` dropped a batch's sample weights
  (a dataset's third element, or Keras' own from sample_weight= or class_weight=). Both
  step kinds (`_FineTuningStep`, the pretrainer's) refuse them at trace time."""
  config = helpers.odd_config(num_hidden_layers=1)
  classifier, pretrainer = BertClassifier(config, 3), BertPretrainer(config)
  features = _head_features(config)
  labelled = {**helpers.random_features(config, 3, 4, 5),
              "masked_lm_ids": np.ones((4, 3), np.int32),
              "masked_lm_weights": np.ones((4, 3), np.float32),
              "next_sentence_labels": np.zeros(4, np.int32)}
  weights = np.zeros(4, np.float32)
  for model, data in ((classifier, (features, _IDS, weights)),
                      (pretrainer, (labelled, _IDS, weights))):
    model.build()
    model.compile(optimizer="adam")
    before = [w.numpy() for w in model.weights]
    for call in (model.fit, model.evaluate):
      with pytest.raises(ValueError, match=(
          rf"{type(model).__name__} takes no sample_weight or class_weight \(got batches of "
          r"\(x, y, sample_weight\): from sample_weight=, class_weight= or a dataset's")):
        call(tf.data.Dataset.from_tensors(data), verbose=0)
    for w, w0 in zip(model.weights, before):
      np.testing.assert_array_equal(w.numpy(), w0)


def _labelled_pretrainer():
  """A compiled 1-layer pretrainer, 4 sequences of 5 features, and those features with
  labels for 3 predictions each."""
  config = helpers.odd_config(num_hidden_layers=1)
  model = BertPretrainer(config)
  model.build()
  model.compile(optimizer="adam")
  features = helpers.random_features(config, 3, 4, 5)
  labelled = {**features, "masked_lm_ids": np.ones((4, 3), np.int32),
              "masked_lm_weights": np.ones((4, 3), np.float32),
              "next_sentence_labels": np.zeros(4, np.int32)}
  return model, features, labelled


def test_a_pretrainer_takes_its_labels_among_its_features():
  model, features, labelled = _labelled_pretrainer()
  form = (r"BertPretrainer trains and evaluates on features holding its labels: "
          r"masked_lm_positions and masked_lm_ids int \[B, P\], masked_lm_weights float "
          r"\[B, P\], next_sentence_labels int \[B\]")
  for data, message in (
      (features, form + r".*; x has no masked_lm_ids, masked_lm_weights, next_sentence_labels"),
      ((features, labelled["masked_lm_ids"]), form + r".*; got labels \(y\) apart from x"),
      ({**labelled, "next_sentence_labels": np.eye(2, dtype=np.int32)[[0, 1, 0, 1]]},
       r"x\['next_sentence_labels'\] has shape \[4, 2\], not one label per sequence"),
      ({**labelled, "masked_lm_label": np.ones((4, 3), np.int32)},
       r"x has masked_lm_label, which the model does not read")):
    for call in (model.evaluate, model.fit):
      with pytest.raises(ValueError, match=message):
        call(tf.data.Dataset.from_tensors(data), verbose=0)
  assert np.isfinite(model.evaluate(labelled, verbose=0, return_dict=True)["loss"])


@pytest.mark.parametrize("num_classes", [0, -3, 2.0, True, "2"])
def test_a_classifier_of_no_int_count_is_refused_when_built_naming_num_classes(num_classes):
  """0 was accepted (logits [B, 0]); -3 and 2.0 failed at the first call in Keras' shape
  code, naming neither (sweep 13, b47/b48/b75)."""
  with pytest.raises(ValueError, match=rf"^num_classes={re.escape(repr(num_classes))}: must "
                                       r"be an int >= 1 \(the number of classes; 1 = "
                                       r"regression, one score\)$"):
    BertClassifier(helpers.odd_config(), num_classes)
  assert BertClassifier(helpers.odd_config(), np.int64(1)).num_classes == 1


# Each public model class, with the positional arguments its construction needs.
_PUBLIC_MODELS = {BertEncoder: (), BertPretrainer: (), BertSpanLabeler: (),
                  BertClassifier: (2,), BertTokenClassifier: (["O", "B-x"],),
                  BertSentenceEncoder: ()}


@pytest.mark.parametrize("cls", _PUBLIC_MODELS, ids=lambda cls: cls.__name__)
def test_every_public_models_typed_arguments_are_checked_by_their_annotations(cls):
  """Sweep 18: `BertSentenceEncoder(config, normalize="false")` normalized anyway
  (`bool("false")` is True) and `symmetric="false"` was read as True, without a word; a
  classifier's `dropout_rate="0.1"` failed in Keras naming no argument. Every argument of
  every public model class annotated int, float, bool or str refuses a value of another
  kind, naming the class and the argument (`validation.typed_arguments`; `num_classes`
  has its own message, tested above)."""
  wrong = {int: 2.5, float: "0.1", bool: "false", str: 3}
  kinds = typing.get_type_hints(inspect.unwrap(cls.__init__))
  typed = {arg: kind for arg, kind in kinds.items() if kind in wrong and arg != "num_classes"}
  for arg, kind in typed.items():
    with pytest.raises(ValueError, match=rf"^{cls.__name__}: {arg} must be .*, got "
                                         rf"{re.escape(repr(wrong[kind]))}$"):
      cls(helpers.odd_config(), *_PUBLIC_MODELS[cls], **{arg: wrong[kind]})
  assert set(typed) == {  # What the loop covered: every typed argument there is.
      BertClassifier: {"dropout_rate"}, BertTokenClassifier: {"dropout_rate"},
      BertPretrainer: {"objective"}, BertEncoder: set(), BertSpanLabeler: set(),
      BertSentenceEncoder: {"pooling_mode", "normalize", "loss", "scale", "symmetric"},
  }[cls]


@pytest.mark.parametrize("make", [
    lambda rate: BertClassifier(helpers.odd_config(), 2, dropout_rate=rate),
    lambda rate: BertTokenClassifier(helpers.odd_config(), ["O", "B-x"], dropout_rate=rate)])
def test_a_dropout_rate_outside_0_1_is_refused_naming_dropout_rate(make):
  """Keras refused -0.1 naming an inner layer (`dropout_164`); 1.0 dropped everything."""
  for rate in (-0.1, 1.0):
    with pytest.raises(ValueError, match=r"^dropout_rate must be a number in \[0, 1\) .*, got "
                                         rf"{rate}$"):
      make(rate)
  assert make(np.float32(0.25)).dropout_rate == 0.25 and make(0).dropout_rate == 0.0


def test_a_classifier_or_tagger_of_fewer_than_two_labels_is_refused_naming_labels():
  """A one-label tagger was built and trained with loss 0 (sweep 13, b49): the rule of the
  CoNLL reader (`tfbert.tagging.conll.tag_set`), for every path that builds one."""
  config = helpers.odd_config()
  for labels in (["O"], []):
    with pytest.raises(ValueError, match=r"^labels=\[.*\]: a tagger needs at least 2 labels "
                                         r"\(O and B-<type>/I-<type> tags\).*learns nothing"):
      BertTokenClassifier(config, labels)
  with pytest.raises(ValueError, match=r"labels=\['O', 'B-X', 'O'\] names 'O' more than once"):
    BertTokenClassifier(config, ["O", "B-X", "O"])
  with pytest.raises(TypeError, match="labels= must be a sequence of tag names, not the str 'OBI'"):
    BertTokenClassifier(config, "OBI")
  with pytest.raises(TypeError, match="labels= must be a sequence of tag names, not the int 5: "
                                      "pass a list of str, one per label id"):
    BertTokenClassifier(config, labels=5)
  with pytest.raises(TypeError, match="labels= must be a sequence of names, not the int 2"):
    BertClassifier(config, 2, labels=2)
  with pytest.raises(ValueError, match=r"^labels=\['only'\] with num_classes=1: a classifier "
                                       r"needs at least 2 label names .*leave labels= out$"):
    BertClassifier(config, 1, labels=["only"])
  assert BertTokenClassifier(config, ("O", "B-X")).labels == ("O", "B-X")


@pytest.mark.parametrize("labels, error, message", [
    ([0, 1], TypeError, r"^labels=\[0, 1\]: entry 0 \(0\) is of type int: label names must "
                        r"be str, e.g. \['0', '1'\]$"),
    (["O", None], TypeError, r"^labels=\['O', None\]: entry 1 \(None\) is of type NoneType"),
    ([b"O", "B-X"], TypeError, r"entry 0 \(b'O'\) is of type bytes: .* e.g. \['O', 'B-X'\]$"),
    (["good\nbad", "ok"], ValueError, r"^labels=\['good\\nbad', 'ok'\]: entry 0 \('good\\nbad'\) "
                                      r"holds a line break: labels.txt holds one name per line"),
    (["ok", "a\rb"], ValueError, r"entry 1 \('a\\rb'\) holds a line break"),
    (["", "x"], ValueError, r"^labels=\['', 'x'\]: entry 0 \(''\) is empty: each label needs "
                            "a name")], ids=["int", "none", "bytes", "newline", "cr", "empty"])
def test_label_names_that_are_not_one_line_str_are_refused_where_given(labels, error, message):
  """Int label names were accepted and classify() failed in TensorFlow's tensor conversion;
  a name holding a newline was written into labels.txt as two (sweep 15, N1/N2): one check
  (`check_label_names`) for every model that takes label names, and its `hf_task`."""
  config = helpers.odd_config()
  with pytest.raises(error, match=message):
    BertClassifier(config, 2, labels=labels)
  with pytest.raises(error, match=message):
    BertTokenClassifier(config, labels)
  with pytest.raises(error, match=message):
    BertClassifier(config, 2).hf_task(labels)
  named = BertClassifier(config, 2, labels=np.array(["neg", "pos"]))
  assert named.labels == ("neg", "pos") and all(type(n) is str for n in named.labels)


# --- sweep 31: labels a head cannot mean, and the means of nothing -------------------------

def test_labels_no_head_can_mean_are_refused_naming_them(heads):
  """Sweep 31: an unbatched dataset crashed in the label check ("mask cannot be scalar",
  B23); tags of another length than the features ended in "Dimensions must be equal ...
  node Equal" (B48); a span ending before it starts (swapped keys) trained silently (B51)."""
  config, models = heads
  features = _head_features(config)
  before = [w.numpy() for w in models["span"].weights]
  with pytest.raises(ValueError, match=r"^BertClassifier: the dataset's labels have shape \[\], "
                                       r"one example's: .*batch the dataset, e.g. "
                                       r"dataset.batch\(32\)"):
    models["classifier"].fit(tf.data.Dataset.from_tensor_slices((features, _IDS)), verbose=0)
  with pytest.raises(ValueError, match=r"BertTokenClassifier's labels have shape \[4, 4\] but "
                                       r"x\['input_ids'\] has \[4, 5\]: the head trains on int "
                                       r"tag ids \[B, S\]"):
    models["tagger"].evaluate(features, _tags(0)[:, :4], verbose=0)
  swapped = {"start_logits": np.array([0, 3, 1, 0], np.int32),
             "end_logits": np.array([0, 2, 1, 4], np.int32)}
  with pytest.raises(ValueError, match=r"BertSpanLabeler's y: example 1 ends at 2, before it "
                                       r"starts at 3: the end_logits position of a span is at "
                                       r"or after its start_logits position"):
    models["span"].fit(features, swapped, verbose=0)
  with pytest.raises(ValueError, match=r"BertSpanLabeler.evaluate: a batch's labels end_logits "
                                       r"hold 2 before their start_logits"):
    models["span"].evaluate(tf.data.Dataset.from_tensors((features, swapped)), verbose=0)
  for w, w0 in zip(models["span"].weights, before):
    np.testing.assert_array_equal(w.numpy(), w0)
  in_order = {"start_logits": swapped["start_logits"], "end_logits": np.array([0, 3, 1, 4])}
  assert np.isfinite(models["span"].evaluate(features, in_order, verbose=0,
                                            return_dict=True)["loss"])


def test_a_taggers_loss_is_the_mean_over_examples_with_a_labelled_position(heads):
  """Sweep 31, B46: an example of no labelled position (a window whose words are all read
  in other windows) has loss 0, and counting it pulled the mean down: 0.8293 where the
  labelled examples' mean is 1.1057. In training, the same count divides the gradient:
  a batch with such an example trains as the batch without it."""
  config, models = heads
  tagger = models["tagger"]
  features = _head_features(config)
  tags = _tags(1)
  tags[2] = -100
  got = tagger.evaluate(features, tags, verbose=0, return_dict=True)["loss"]
  losses = tagger.example_losses(tagger(features, training=False), tags).numpy()
  assert losses[2] == 0.0
  assert got == pytest.approx(np.delete(losses, 2).mean(), rel=1e-6)
  assert got > losses.mean() * 1.2  # What counting it gave: 3/4 of that.
  kept = [0, 1, 3]
  without = tagger.evaluate({k: v[kept] for k, v in features.items()}, tags[kept], verbose=0,
                            return_dict=True)["loss"]
  assert got == pytest.approx(without, rel=1e-6)


def test_a_pretrainers_negative_or_absent_prediction_weights_are_named():
  """Sweep 31, B54: masked_lm_weights of -1 trained that token away without a word; B55:
  with every weight 0 (nothing to predict), mlm_loss and mlm_accuracy read 0.0, a perfect
  loss. Refused, as arrays and in a dataset; NaN for a mean of nothing."""
  model, features, labelled = _labelled_pretrainer()
  negative = {**labelled, "masked_lm_weights": np.array([[1, -1, 1]] * 4, np.float32)}
  with pytest.raises(ValueError, match=r"x\['masked_lm_weights'\] holds -1.0 at \[0, 1\]: the "
                                       r"weight of a prediction is a finite number >= 0"):
    model.evaluate(negative, verbose=0)
  with pytest.raises(ValueError, match=r"a batch's masked_lm_weights holds -1: the weight "
                                       r"of a prediction is a finite number >= 0"):
    model.evaluate(tf.data.Dataset.from_tensors(negative), verbose=0)
  none = model.evaluate({**labelled, "masked_lm_weights": np.zeros((4, 3), np.float32)},
                        verbose=0, return_dict=True)
  assert np.isnan(none["mlm_loss"]) and np.isnan(none["mlm_accuracy"]), none
  assert np.isfinite(none["nsp_loss"])
  some = model.evaluate(labelled, verbose=0, return_dict=True)
  assert np.isfinite(some["mlm_loss"]) and some["mlm_loss"] > 0


def test_labels_of_no_text_position_are_refused_or_named(heads, caplog):
  """Sweep 33: tags that label no position trained on a loss of 0.0 and scored accuracy 0.0
  (B178, B181); tags, span positions and masked positions on padding were trained on and
  scored without a word (B182, B185, B188)."""
  caplog.set_level("WARNING", logger="absl")
  config, models = heads
  features = _head_features(config)
  features["input_mask"] = np.ones((4, 5), np.int32)
  features["input_mask"][1, 3:] = 0
  tagger = models["tagger"]
  none = np.full((4, 5), -1, np.int32)
  none[0, 0] = -100
  for call in (lambda: tagger.fit(features, none, verbose=0),
               lambda: tagger.evaluate(features, none, verbose=0)):
    with pytest.raises(ValueError, match=r"BertTokenClassifier's labels label no position "
                                         r"\(every one is -1 or -100\): there is nothing to "
                                         r"train on or score"):
      call()
  # A metric of no token is NaN, not 0.0 (a dataset is not checked on entry for this).
  empty = tagger.evaluate(tf.data.Dataset.from_tensors((features, none)), verbose=0,
                          return_dict=True)
  assert np.isnan(empty["accuracy"]), empty
  on_pad = np.where(features["input_mask"] == 1, 0, -1).astype(np.int32)
  tagger.evaluate(features, on_pad, verbose=0)
  assert "padding" not in caplog.text  # Padding labelled -1: nothing said.
  on_pad[1, 4] = 2
  tagger.evaluate(features, on_pad, verbose=0)
  assert ("BertTokenClassifier's labels label 1 padding position(s) (x['input_mask'] 0 "
          "there), the first position 4 of example 1") in caplog.text
  span = {"start_logits": np.array([0, 3, 1, 2]), "end_logits": np.array([0, 4, 1, 2])}
  models["span"].evaluate(features, span, verbose=0)
  assert ("BertSpanLabeler's labels['start_logits'] label 1 padding position(s) "
          "(x['input_mask'] 0 there), the first position 3 of example 1") in caplog.text


def test_a_pretrainers_masked_positions_on_padding_and_nsp_labels_it_ignores_are_named(
    caplog):
  """Sweep 33, B188: a masked position of weight 1 on padding trained toward the pad's
  token; B189: next_sentence_labels given to an "mlm" pretrainer were ignored."""
  caplog.set_level("WARNING", logger="absl")
  model, _, labelled = _labelled_pretrainer()
  mask = np.ones((4, 5), np.int32)
  mask[2, 4] = 0
  positions = np.array([[0, 1, 2]] * 4, np.int32)
  model.evaluate({**labelled, "input_mask": mask, "masked_lm_positions": positions}, verbose=0)
  assert "padding" not in caplog.text
  positions[2, 1] = 4
  weights = np.ones((4, 3), np.float32)
  weights[2, 1] = 0.0  # A padding prediction of weight 0: as google-research/bert pads.
  model.evaluate({**labelled, "input_mask": mask, "masked_lm_positions": positions,
                  "masked_lm_weights": weights}, verbose=0)
  assert "padding" not in caplog.text
  model.evaluate({**labelled, "input_mask": mask, "masked_lm_positions": positions},
                 verbose=0)
  assert ("x['masked_lm_positions']: 1 prediction(s) of masked_lm_weights > 0 on padding "
          "(input_mask 0 there), the first 4 at [2, 1]") in caplog.text
  mlm = BertPretrainer(model.config, objective="mlm")
  mlm.compile(optimizer="adam")
  for call in (mlm.fit, mlm.evaluate):
    with pytest.raises(ValueError, match=r"x\['next_sentence_labels'\]: this BertPretrainer's "
                                         r"objective is 'mlm', without the NSP head"):
      call(labelled, verbose=0)
  without = {k: v for k, v in labelled.items() if k != "next_sentence_labels"}
  assert np.isfinite(mlm.evaluate(without, verbose=0, return_dict=True)["loss"])
