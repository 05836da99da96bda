"""Tests for tfbert.serving.serving_dtype: an export's compute dtype, chosen and recorded."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import helpers, numpy_reference
from tfbert import BertClassifier, BertEncoder
from tfbert.checkpoints import pretrained
from tfbert.classifier import classifier_export
from tfbert.runtime import cpu
from tfbert.serving import export, serving_dtype


def _encoder(policy="float32"):
  config = helpers.odd_config()
  weights = numpy_reference.random_google_weights(config.to_dict(), seed=5)
  return config, weights, helpers.loaded(BertEncoder(config, dtype=policy), weights,
                                         allow_unused=True)


def _records(path):
  return [json.loads(open(os.path.join(folder, serving_dtype.RECORD_FILE)).read())
          for folder in (path, os.path.join(path, export.ID_DIR))]


def _serve(path, features):
  signature = tf.saved_model.load(os.path.join(path, export.ID_DIR)).signatures[
      export.SERVING_SIGNATURE]
  return signature(**{k: tf.constant(v) for k, v in features.items()})


@pytest.mark.slow
def test_a_float32_model_exported_in_bfloat16_computes_and_records_bfloat16(tmp_path):
  config, weights, encoder = _encoder()
  features = helpers.random_features(config, seed=1)
  features = {n: features[n] for n in export.FEATURE_NAMES}
  own = export.export_encoder_saved_model(encoder, str(tmp_path / "own"))
  half = export.export_encoder_saved_model(encoder, str(tmp_path / "half"),
                                           export_dtype="bfloat16")
  assert encoder.dtype_policy.name == "float32"  # The caller's model is left as it was.
  for record in _records(own):
    assert record["compute_dtype"] == "float32" and record["chosen_by"] == "the model's policy"
  for record in _records(half):
    assert (record["compute_dtype"], record["chosen_by"]) == ("bfloat16", "the caller")
    assert record["cpu"] == cpu.describe()
  want = numpy_reference.bert_forward(weights, config.to_dict(),
                                      *(features[n] for n in export.FEATURE_NAMES))
  got, got_half = _serve(own, features), _serve(half, features)
  for name in export.OUTPUT_NAMES:
    # float32: float32 rounding (export_test's bound); bfloat16: every value a bfloat16
    # number, within bfloat16's rounding through 3 layers (export_test: measured 0.05).
    assert helpers.max_abs_diff(got[name], want[name]) < 1e-5
    np.testing.assert_array_equal(tf.cast(tf.cast(got_half[name], tf.bfloat16), tf.float32),
                                  got_half[name])
    assert 1e-4 < helpers.max_abs_diff(got_half[name], want[name]) < 0.1


def test_auto_takes_bfloat16_only_where_its_matmuls_are_clearly_faster(monkeypatch):
  _, _, encoder = _encoder()
  real = serving_dtype.choose(encoder, "auto")
  seconds = real["matmul_seconds"]
  assert real["chosen_by"] == "measured on this CPU" and all(s > 0 for s in seconds.values())
  faster = seconds["bfloat16"] <= serving_dtype.BFLOAT16_SPEEDUP * seconds["float32"]
  assert real["compute_dtype"] == ("bfloat16" if faster else "float32")
  for bf16, want in ((0.5, "bfloat16"), (0.8, "bfloat16"), (0.9, "float32"), (2.0, "float32")):
    monkeypatch.setattr(serving_dtype, "matmul_seconds",
                        lambda dtype, *_, b=bf16: b if dtype == "bfloat16" else 1.0)
    assert serving_dtype.choose(encoder, "auto")["compute_dtype"] == want, bf16


@pytest.mark.slow
def test_a_mixed_precision_task_model_exported_in_float32_serves_its_float32_copy(tmp_path):
  keras.utils.set_random_seed(7)
  model = BertClassifier(helpers.odd_config(vocab_size=30522), 2, dtype="mixed_bfloat16")
  model.build()
  copy = serving_dtype.in_dtype(model, "float32")
  assert copy.dtype_policy.name == "float32" and copy is not model
  assert serving_dtype.in_dtype(model, "bfloat16") is model
  for a, b in zip(copy.weights, model.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  path = classifier_export.export_classifier_saved_model(
      model, str(tmp_path / "classifier"), pretrained.minilm_vocab_file(), True, 11,
      ("no", "yes"), True, export_dtype="float32")
  assert [r["compute_dtype"] for r in _records(path)] == ["float32", "float32"]
  features = helpers.random_features(model.config, seed=2)
  features = {n: features[n] for n in export.FEATURE_NAMES}
  want = copy(features, training=False)["logits"]
  assert helpers.max_abs_diff(_serve(path, features)["logits"], want) < 1e-5


def test_model_keeps_a_mixed_float16_model_as_trained():
  _, _, encoder = _encoder("mixed_float16")
  model, record = serving_dtype.for_serving(encoder, "model")
  assert model is encoder
  assert (record["compute_dtype"], record["chosen_by"]) == ("float16", "the model's policy")


def test_an_unknown_compute_dtype_is_refused_before_anything_is_written(tmp_path):
  _, _, encoder = _encoder()
  with pytest.raises(ValueError, match="export_dtype must be one of"):
    export.export_encoder_saved_model(encoder, str(tmp_path / "x"), export_dtype="float16")
  assert not os.listdir(tmp_path)
