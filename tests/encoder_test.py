"""Tests for tfbert.encoder: parity with the NumPy reference and with Model Garden; what it
cannot read is refused when traced, its values asserted in Keras' calls only."""

import pathlib

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers, model_garden_peer, numpy_reference
from tfbert import models
from tfbert.config import BertConfig
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.encoder import BertEncoder
from tfbert.models import BertClassifier

# float32 model vs float64 reference over 3 layers of width 32: observed ~2e-6; 2e-5 is the
# issue's bound and still ~30x below the GELU-flavour gap this config produces.
TOL = 2e-5


def _encoder_and_reference(hidden_act="gelu", seed=0):
  config = helpers.odd_config(hidden_act=hidden_act)
  weights = numpy_reference.random_google_weights(config.to_dict(), seed)
  encoder = helpers.loaded(BertEncoder(config), {k: v for k, v in weights.items()
                                                 if k.startswith("bert/")})
  return config, weights, encoder


def test_outputs_match_numpy_reference_with_padding():
  config, weights, encoder = _encoder_and_reference()
  f = helpers.random_features(config)
  assert f["input_mask"].min() == 0  # Padding is exercised.
  got = encoder(f, training=False)
  want = numpy_reference.bert_forward(weights, config.to_dict(), f["input_ids"],
                                      f["input_mask"], f["segment_ids"])
  assert got["sequence_output"].shape == (helpers.BATCH, helpers.SEQ, config.hidden_size)
  assert helpers.max_abs_diff(got["sequence_output"], want["sequence_output"]) < TOL
  assert helpers.max_abs_diff(got["pooled_output"], want["pooled_output"]) < TOL
  assert len(got["encoder_outputs"]) == config.num_hidden_layers
  for mine, ref in zip(got["encoder_outputs"], want["encoder_outputs"]):
    assert helpers.max_abs_diff(mine, ref) < TOL


def test_output_positions_compute_the_last_layer_at_position_0_and_them():
  config, weights, encoder = _encoder_and_reference()
  f = helpers.random_features(config)
  positions = f["masked_lm_positions"]  # [B, P], with repeats
  got = encoder(f, training=False, output_positions=positions)
  want = numpy_reference.bert_forward(weights, config.to_dict(), f["input_ids"],
                                      f["input_mask"], f["segment_ids"])
  b, s, p, h = helpers.BATCH, helpers.SEQ, helpers.PREDICTIONS, config.hidden_size
  assert [tuple(x.shape) for x in got["encoder_outputs"]] == [(b, s, h)] * 2 + [(b, 1 + p, h)]
  gathered = np.take_along_axis(want["sequence_output"], positions[..., None], axis=1)
  assert got["sequence_output"].shape == (b, p, h)
  assert helpers.max_abs_diff(got["sequence_output"], gathered) < TOL
  assert helpers.max_abs_diff(got["pooled_output"], want["pooled_output"]) < TOL


def test_golden_values_pin_the_reference():
  # Pins the reference itself (seed 0, ODD_CONFIG) so that a change to it cannot silently move
  # both sides of the parity test. Values are float64 reference outputs, cross-checked
  # against Model Garden in test_matches_model_garden_encoder.
  config, weights, encoder = _encoder_and_reference()
  f = helpers.random_features(config)
  want = numpy_reference.bert_forward(weights, config.to_dict(), f["input_ids"],
                                      f["input_mask"], f["segment_ids"])
  got = encoder(f, training=False)["pooled_output"].numpy()
  golden = np.array(GOLDEN_POOLED_0_4)
  np.testing.assert_allclose(want["pooled_output"][0, :4], golden, atol=1e-9)
  np.testing.assert_allclose(got[0, :4], golden, atol=TOL)


# float64 reference, seed 0, ODD_CONFIG, example 0, first four pooled units.
GOLDEN_POOLED_0_4 = [-0.4277688287900571, -0.3485716603388499, 0.25535702294973506,
                     0.7567660880170263]


@pytest.mark.parametrize("hidden_act, approximate", [("gelu", True), ("gelu_exact", False)])
def test_matches_model_garden_encoder(hidden_act, approximate):
  config, weights, encoder = _encoder_and_reference(hidden_act)
  f = helpers.random_features(config, seed=5)
  peer = model_garden_peer.build_model_garden_encoder(config.to_dict(), weights, approximate)
  want = model_garden_peer.model_garden_forward(peer, f["input_ids"], f["input_mask"],
                                                f["segment_ids"])
  got = encoder(f, training=False)
  assert helpers.max_abs_diff(got["sequence_output"], want["sequence_output"]) < TOL
  assert helpers.max_abs_diff(got["pooled_output"], want["pooled_output"]) < TOL


def test_wrong_gelu_flavour_is_caught_by_the_parity_tolerance():
  config, weights, encoder = _encoder_and_reference("gelu")
  f = helpers.random_features(config)
  exact = numpy_reference.bert_forward(weights, config.to_dict(), f["input_ids"],
                                       f["input_mask"], f["segment_ids"], gelu_approximate=False)
  got = encoder(f, training=False)
  assert helpers.max_abs_diff(got["sequence_output"], exact["sequence_output"]) > 10 * TOL


def test_padded_positions_do_not_leak_into_real_tokens():
  config, _, encoder = _encoder_and_reference()
  f = helpers.random_features(config)
  g = dict(f, input_ids=np.where(f["input_mask"] == 1, f["input_ids"], 1))
  a = encoder(f, training=False)["sequence_output"].numpy()
  b = encoder(g, training=False)["sequence_output"].numpy()
  real = f["input_mask"] == 1
  # exp(-10000) underflows to exactly 0 in float32, so real positions are bit-identical.
  np.testing.assert_array_equal(a[real], b[real])
  assert not np.array_equal(a[~real], b[~real])


def test_defaults_for_missing_mask_and_segments():
  config, _, encoder = _encoder_and_reference()
  ids = helpers.random_features(config)["input_ids"]
  a = encoder({"input_ids": ids}, training=False)["sequence_output"]
  b = encoder({"input_ids": ids, "input_mask": np.ones_like(ids),
               "segment_ids": np.zeros_like(ids)}, training=False)["sequence_output"]
  np.testing.assert_array_equal(a, b)
  with pytest.raises(KeyError, match="features need 'input_ids'"):
    encoder({"input_mask": ids})


def test_get_config_round_trips():
  config, _, encoder = _encoder_and_reference()
  clone = BertEncoder.from_config(encoder.get_config())
  assert clone.config == config


@pytest.mark.parametrize("config, given", [
    ("bert_config.json", r"str 'bert_config.json'"),
    (pathlib.Path("run/bert_config.json"), r"PosixPath 'run/bert_config.json'"),
    (None, r"NoneType"), (42, r"int"), ([("hidden_size", 32)], r"list"),
], ids=["path_str", "pathlib", "none", "int", "list"])
@pytest.mark.parametrize("build", [
    BertEncoder, lambda c: models.BertClassifier(c, num_classes=2),
    lambda c: models.BertTokenClassifier(c, labels=["O", "B"]), models.BertSpanLabeler,
    models.BertPretrainer, BertSentenceEncoder,
], ids=["encoder", "classifier", "tagger", "span", "pretrainer", "sentence_encoder"])
def test_a_config_that_is_not_a_bert_config_or_its_dict_is_refused_by_name(build, config, given):
  """A config file path (a new user's natural slip), None or a number failed inside dict()
  ("dictionary update sequence element #0 has length 1"), naming neither the argument nor
  what it takes."""
  with pytest.raises(TypeError, match=(
      rf"^config must be a tfbert.BertConfig or a dict of its fields, got {given}: pass "
      r"tfbert.BertConfig\(...\), tfbert.BertConfig.from_json_file\(path\) for a "
      r"bert_config.json file, or tfbert.load\(path\) for a saved model$")):
    build(config)


def test_a_config_dict_still_builds_the_encoder():
  config = helpers.odd_config()
  assert BertEncoder(config.to_dict()).config == config


@pytest.mark.parametrize("spec, error, message", [
    ({"input_ids": tf.TensorSpec([None, None], tf.float32)}, TypeError,
     r"features\['input_ids'\] is float32: token ids are integers"),
    ({"input_ids": tf.TensorSpec([None, None, 1], tf.int32)}, ValueError,
     r"features\['input_ids'\] has shape \[None, None, 1\]: features are \[B, S\]"),
    ({"input_ids": tf.TensorSpec([None, 20], tf.int32)}, ValueError,
     r"features\['input_ids'\] has sequence length 20, outside \[1, 19\]: the model has 19 "
     r"positions \(max_position_embeddings in the config\)"),
    ({"input_ids": tf.TensorSpec([None, None], tf.int32),
      "token_type_ids": tf.TensorSpec([None, None], tf.int32)}, ValueError,
     r"features has token_type_ids \(Hugging Face's name; tfbert's is segment_ids\), which "
     r"the model does not read"),
    ({"input_ids": tf.TensorSpec([None, None], tf.string)}, TypeError,
     r"features\['input_ids'\] holds strings: raw text goes to predict"),
], ids=["float", "rank_3", "beyond_positions", "hugging_face_name", "strings"])
def test_what_the_encoder_cannot_read_is_refused_when_traced(spec, error, message):
  """A float id was truncated, a Hugging Face name silently unread, and a length beyond the
  positions failed inside a gather: each is now refused when the graph is built."""
  _, _, encoder = _encoder_and_reference()
  traced = tf.function(lambda features: encoder(features, training=False)["pooled_output"])
  with pytest.raises(error, match=message):
    traced.get_concrete_function(spec)


def test_value_asserts_are_in_keras_calls_only_never_in_what_exports_trace():
  """Keras' predict on a dataset refuses a negative id (which read a row from the end of the
  table, silently); the encoder traced outside Keras' calls, as every export, TFLite and ONNX
  conversion traces it, holds no Assert op."""
  config, _, encoder = _encoder_and_reference()
  features = helpers.random_features(config)
  features = {name: features[name] for name in ("input_ids", "input_mask", "segment_ids")}
  features["input_ids"][0, 0] = -1
  with pytest.raises(ValueError, match=r"BertEncoder.predict: a batch's input_ids holds -1, "
                                       r"outside the vocabulary \[0, 101\)"):
    encoder.predict(tf.data.Dataset.from_tensors(features), verbose=0)
  traced = tf.function(lambda f: encoder(f, training=False)["pooled_output"])
  graph = traced.get_concrete_function(
      {name: tf.TensorSpec([None, None], tf.int32) for name in features}).graph
  assert not [op for op in graph.get_operations() if op.type == "Assert"]


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_a_dtype_policy_tfbert_does_not_compute_in_is_refused_naming_the_ones_it_does(dtype):
  """Sweep 31, B42: BertClassifier(config, 2, dtype="float64") (or "float16", "bfloat16")
  was made and then failed inside LayerNorm.call ("Input 'y' of 'Mul' Op has type float64
  that does not match float32"). The mixed policies and float32 are made."""
  config = BertConfig(vocab_size=23, hidden_size=6, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=7, max_position_embeddings=9)
  with pytest.raises(ValueError, match=rf"dtype policy '{dtype}' is not one tfbert computes "
                                       r"in; use one of \['float32', 'mixed_bfloat16', "
                                       r"'mixed_float16'\]"):
    BertClassifier(config, 2, dtype=dtype)
  for good in ("float32", "mixed_bfloat16", "mixed_float16"):
    assert BertClassifier(config, 2, dtype=good).encoder.dtype_policy.name == good


def test_a_model_made_in_a_strategys_scope_and_built_outside_it_is_refused():
  """Sweep 31, B77: made in a MirroredStrategy's scope, called once outside it (plain
  variables), compiled in it: evaluate failed in TensorFlow ("colocate_vars_with must only
  be passed a variable created in this scope") with the embedding table dumped."""
  from tfbert.training import distribution  # pylint: disable=import-outside-toplevel
  strategy = distribution.create_strategy("mirrored", 2)
  config = BertConfig(vocab_size=23, hidden_size=6, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=7, max_position_embeddings=9)
  features = {"input_ids": np.ones((2, 5), np.int32)}
  with strategy.scope():
    model = BertClassifier(config, 2)
  with pytest.raises(ValueError, match=r"the model was made in the scope of a MirroredStrategy "
                                       r"but is built .* outside it: build it in the same scope"):
    model(features)
  assert not model.weights
  with strategy.scope():
    model.build()
  assert model(features)["logits"].shape == (2, 2)
  assert isinstance(model.encoder.embeddings.weights[0].value, tf.distribute.DistributedValues)
