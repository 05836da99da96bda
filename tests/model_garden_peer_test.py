"""Cross-validates the two independent references: Model Garden vs the NumPy reference.

Model Garden's float32 `BertEncoder` (and `MaskedLM` head), loaded from Google-named
weights, must equal `numpy_reference.bert_forward` in float64 on random weights, with an
odd-sized config and padded examples, for both gelu flavours.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top

from tests import model_garden_peer as peer  # pylint: disable=g-import-not-at-top
from tests import numpy_reference as ref  # pylint: disable=g-import-not-at-top

# Odd sizes so a swapped axis cannot go unnoticed; max_position_embeddings > seq_length
# checks that only the first S position rows are used. initializer_range 0.2 (not 0.02)
# makes pre-activations O(1): attention is far from uniform and the gelu flavours differ.
CONFIG = {"vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 4, "intermediate_size": 37, "hidden_act": "gelu",
          "max_position_embeddings": 11, "type_vocab_size": 3, "initializer_range": 0.2}
BATCH, SEQ = 3, 7
# float32 peer vs float64 reference. Measured max |difference| over seeds 0-3, both gelu
# flavours: sequence_output 1.4e-6, pooled_output 6.8e-7, mlm_logits 2.4e-6, i.e. float32
# rounding (eps 6e-8) grown through 2 layers. 2e-5 leaves room for other CPUs' summation
# orders and is still 30x below the 6e-4 that separates the two gelu flavours.
ATOL = 2e-5


def _compare(gelu_approximate, seed):
  weights = ref.random_google_weights(CONFIG, seed)
  ids, mask, segments = ref.random_inputs(CONFIG, BATCH, SEQ, seed)
  positions = np.random.default_rng(seed).integers(0, SEQ, size=(BATCH, 5))
  expected = ref.bert_forward(weights, CONFIG, ids, mask, segments, positions,
                              gelu_approximate=gelu_approximate)
  encoder = peer.build_model_garden_encoder(CONFIG, weights, gelu_approximate)
  actual = peer.model_garden_forward(encoder, ids, mask, segments)
  masked_lm = peer.build_model_garden_masked_lm(encoder, weights, gelu_approximate)
  actual["mlm_logits"] = peer.model_garden_mlm_logits(
      masked_lm, actual["sequence_output"], positions)
  return expected, actual


@pytest.mark.parametrize("gelu_approximate", [True, False], ids=["tanh", "erf"])
def test_model_garden_equals_numpy_reference(gelu_approximate):
  expected, actual = _compare(gelu_approximate, seed=3)
  for key in ("sequence_output", "pooled_output", "mlm_logits"):
    np.testing.assert_allclose(actual[key], expected[key], rtol=0, atol=ATOL, err_msg=key)
  for i, (a, e) in enumerate(zip(actual["encoder_outputs"], expected["encoder_outputs"])):
    np.testing.assert_allclose(a, e, rtol=0, atol=ATOL, err_msg=f"encoder_outputs[{i}]")


def test_gelu_flavour_is_visible_at_this_tolerance():
  """The two gelu flavours differ by far more than ATOL, so the test above can tell."""
  weights = ref.random_google_weights(CONFIG, 3)
  inputs = ref.random_inputs(CONFIG, BATCH, SEQ, 3)
  tanh = ref.bert_forward(weights, CONFIG, *inputs, gelu_approximate=True)
  erf = ref.bert_forward(weights, CONFIG, *inputs, gelu_approximate=False)
  assert np.abs(tanh["sequence_output"] - erf["sequence_output"]).max() > 10 * ATOL


def test_model_garden_gelu_is_the_tanh_approximation():
  """Model Garden's get_activation("gelu") is Google's tanh gelu, not exact erf."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  x = tf.constant([1.0], tf.float32)
  # Golden values from numpy_reference_test; the flavours differ by 1.5e-4 at x = 1,
  # float32 rounding is ~1e-7.
  tanh, erf = peer.gelu_activation(True)(x).numpy()[0], peer.gelu_activation(False)(x).numpy()[0]
  assert tanh == pytest.approx(0.8411919906082768, abs=1e-6)
  assert erf == pytest.approx(0.8413447460685429, abs=1e-6)


def test_weight_mapping_rejects_a_missing_google_weight():
  weights = ref.random_google_weights(CONFIG, 0)
  del weights["bert/encoder/layer_1/output/LayerNorm/beta"]
  with pytest.raises(KeyError, match="layer_1/output/LayerNorm/beta"):
    peer.build_model_garden_encoder(CONFIG, weights)


def test_weight_mapping_rejects_an_unused_google_weight():
  weights = ref.random_google_weights(CONFIG, 0)
  weights["bert/encoder/layer_2/output/dense/bias"] = np.zeros(32, np.float32)
  with pytest.raises(ValueError, match="left unused.*layer_2/output/dense/bias"):
    peer.build_model_garden_encoder(CONFIG, weights)
