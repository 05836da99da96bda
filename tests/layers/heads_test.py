"""Tests for tfbert.layers.heads (numerics are covered end to end in models_test)."""

import numpy as np
import pytest
import tensorflow as tf

from tfbert.layers.heads import ClassifierHead, MaskedLMHead, NextSentenceHead, SpanHead


def test_projection_weights_have_googles_c_by_h_layout():
  head = NextSentenceHead()
  head.build((None, 8))
  assert tuple(head.output_weights.shape) == (2, 8)
  x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
  want = x @ head.output_weights.numpy().T + head.output_bias.numpy()
  np.testing.assert_allclose(head(tf.constant(x)), want, atol=1e-6)


def test_span_head_splits_start_and_end():
  head = SpanHead()
  head.build((None, None, 8))
  out = head(tf.ones((2, 5, 8)))
  assert set(out) == {"start_logits", "end_logits"} and out["start_logits"].shape == (2, 5)


def test_mlm_head_gathers_positions_per_example():
  head = MaskedLMHead(vocab_size=7, hidden_size=4)
  head.build()
  seq = tf.constant(np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4))
  table = tf.constant(np.random.default_rng(0).standard_normal((7, 4)), tf.float32)
  both = head(seq, tf.constant([[2], [0]]), table)
  first = head(seq[:1], tf.constant([[2]]), table)
  second = head(seq[1:], tf.constant([[0]]), table)
  np.testing.assert_allclose(both, tf.concat([first, second], 0), atol=1e-6)


@pytest.mark.parametrize("layer", [NextSentenceHead(initializer_range=0.1),
                                   ClassifierHead(num_classes=3, dropout_rate=0.2),
                                   MaskedLMHead(vocab_size=7, hidden_size=4, hidden_act="relu")])
def test_get_config_round_trips(layer):
  assert type(layer).from_config(layer.get_config()).get_config() == layer.get_config()


# Each head's projection in float16 and bfloat16 against NumPy float64 on the same (rounded)
# inputs and weights. The bound is the precision's own rounding: a product of H = 37 terms
# rounded once to float16 (2^-11 ~ 4.9e-4) or bfloat16 (2^-8 ~ 3.9e-3) per output, measured
# <= 4.2e-4 and <= 4.8e-3 on an AMD EPYC (Zen 3); about 5x that. In float16 the
# `tf.einsum("...H,CH->...C")` that the heads used before was off by 1.2-1.6 on an Intel
# Xeon with AVX512_FP16 (docs/pitfalls.md, "float16 einsum"): this test would have caught it.
REDUCED_BOUNDS = {"float16": 2.5e-3, "bfloat16": 2e-2}


@pytest.mark.parametrize("dtype", sorted(REDUCED_BOUNDS))
@pytest.mark.parametrize("head, shape", [(NextSentenceHead, (13, 37)), (SpanHead, (5, 11, 37)),
                                         (lambda **kw: ClassifierHead(3, 0.0, **kw), (5, 11, 37))])
def test_projection_heads_are_right_in_reduced_precision(head, shape, dtype):
  layer = head(dtype=f"mixed_{dtype}")
  layer.build((None,) * (len(shape) - 1) + (shape[-1],))
  rng = np.random.default_rng(3)
  layer.output_weights.assign(rng.standard_normal(layer.output_weights.shape))
  layer.output_bias.assign(rng.standard_normal(layer.output_bias.shape))
  x = tf.cast(rng.standard_normal(shape), dtype)
  out = layer(x)
  logits = (tf.stack([out["start_logits"], out["end_logits"]], -1) if isinstance(out, dict)
            else out)
  assert logits.dtype == tf.float32 and tuple(logits.shape) == shape[:-1] + (
      layer.output_weights.shape[0],)
  w = tf.cast(tf.cast(layer.output_weights, dtype), tf.float64).numpy()
  b = tf.cast(tf.cast(layer.output_bias, dtype), tf.float64).numpy()
  want = tf.cast(x, tf.float64).numpy() @ w.T + b
  error = np.max(np.abs(logits.numpy() - want)) / np.max(np.abs(want))
  assert error <= REDUCED_BOUNDS[dtype], error


@pytest.mark.parametrize("num_classes", [0, -3, 2.0, True])
def test_a_classifier_head_of_no_int_count_is_refused_naming_num_classes(num_classes):
  """It was accepted, and 0 gave logits [B, 0]; -3 and 2.0 failed in Keras' shape code at
  build, naming neither (sweep 13, b47/b48/b75)."""
  with pytest.raises(ValueError, match=rf"num_classes={num_classes!r}: must be an int >= 1"):
    ClassifierHead(num_classes)
  assert ClassifierHead(np.int64(3)).num_classes == 3


@pytest.mark.parametrize("head, inputs", [
    (lambda: ClassifierHead(3), np.ones((2, 5), np.float32)),
    (lambda: NextSentenceHead(), np.ones((2, 5), np.float32)),
    (lambda: SpanHead(), np.ones((2, 4, 5), np.float32))])
def test_a_built_head_names_an_input_of_another_width(head, inputs):
  """Sweep 31, B43: a classifier head of H 16 given [2, 8] failed in TensorFlow's MatMul
  ("Matrix size-incompatible"); Keras' input check now names the width it expects."""
  layer = head()
  layer(inputs)
  wider = np.ones(inputs.shape[:-1] + (7,), np.float32)
  with pytest.raises(ValueError, match=r"expected axis -1 of input shape to have value 5, but "
                                       r"received input with shape \(2, (4, )?7\)"):
    layer(wider)
