"""Tests for tfbert.models: the public contract and head outputs vs the NumPy reference."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import helpers, numpy_reference
from tfbert import BertClassifier, BertPretrainer, BertSpanLabeler

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
