"""Tests for tfbert.layers.attention."""

import numpy as np
import tensorflow as tf

from tfbert.layers.attention import MASK_ADDER, SelfAttention, attention_mask_adder


def test_mask_adder_is_googles_minus_10000():
  adder = attention_mask_adder(tf.constant([[1, 1, 0]]))
  assert adder.shape == (1, 1, 1, 3) and adder.dtype == tf.float32
  np.testing.assert_array_equal(adder.numpy().ravel(), [0.0, 0.0, -10000.0])
  assert MASK_ADDER == -10000.0


def test_masked_keys_get_no_attention():
  layer = SelfAttention(hidden_size=12, num_heads=3)
  rng = np.random.default_rng(0)
  x = rng.standard_normal((2, 5, 12)).astype(np.float32)
  mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
  y = layer(tf.constant(x), mask)
  x2 = x.copy()
  x2[0, 3:] = 100.0  # Change only the masked keys/values of example 0.
  y2 = layer(tf.constant(x2), mask)
  np.testing.assert_array_equal(y[0, :3], y2[0, :3])


def test_single_head_matches_softmax_formula():
  layer = SelfAttention(hidden_size=4, num_heads=1)
  x = np.random.default_rng(1).standard_normal((1, 3, 4)).astype(np.float32)
  y = layer(tf.constant(x), np.ones((1, 3)))
  q = x[0] @ layer.query.kernel.numpy() + layer.query.bias.numpy()
  k = x[0] @ layer.key.kernel.numpy() + layer.key.bias.numpy()
  v = x[0] @ layer.value.kernel.numpy() + layer.value.bias.numpy()
  s = q @ k.T / 2.0  # sqrt(head size 4)
  p = np.exp(s - s.max(-1, keepdims=True))
  p /= p.sum(-1, keepdims=True)
  np.testing.assert_allclose(y[0], p @ v, atol=1e-6)


def test_queries_attend_like_the_full_layer_gathered():
  layer = SelfAttention(hidden_size=12, num_heads=3)
  rng = np.random.default_rng(3)
  x = rng.standard_normal((2, 5, 12)).astype(np.float32)
  mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
  positions = np.array([[4, 1, 1], [0, 2, 3]])
  queries = np.take_along_axis(x, positions[..., None], axis=1)  # [B, F=3, H]
  got = layer(tf.constant(x), mask, queries=tf.constant(queries))
  assert got.shape == (2, 3, 12)
  full = layer(tf.constant(x), mask).numpy()
  # float32, same ops over fewer query rows: only summation order may differ.
  np.testing.assert_allclose(got, np.take_along_axis(full, positions[..., None], axis=1),
                             atol=1e-6)


def test_get_config_round_trips():
  layer = SelfAttention(hidden_size=12, num_heads=3, dropout_rate=0.1, initializer_range=0.1)
  assert SelfAttention.from_config(layer.get_config()).get_config() == layer.get_config()


def _unfolded_bfloat16(layer, x16, mask):
  """The layer's bfloat16 ops with the 1/sqrt(D) scale on the float32 scores instead."""
  b, s, h = x16.shape
  n, d = layer.num_heads, layer.head_size
  kernel = tf.concat([tf.cast(dense.kernel, tf.bfloat16) for dense in (layer.query, layer.key,
                                                                       layer.value)], 1)
  bias = tf.concat([tf.cast(dense.bias, tf.bfloat16) for dense in (layer.query, layer.key,
                                                                   layer.value)], 0)
  qkv = tf.matmul(tf.reshape(x16, [-1, h]), kernel) + bias
  q, k, v = tf.unstack(tf.transpose(tf.reshape(qkv, [b, s, 3, n, d]), [2, 0, 3, 1, 4]))
  scores = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32) / np.sqrt(d)
  probs = tf.cast(tf.nn.softmax(scores + attention_mask_adder(mask)), tf.bfloat16)
  return tf.reshape(tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3]), [b, s, h])


def test_bfloat16_folds_the_scale_into_the_query_only_when_exact():
  """D 16 (scale 1/4): folding is exact, bit-identical to scaling the scores. D 5 (scale
  1/sqrt(5)): the scores are scaled in float32, as the unfolded ops (bit-identical too)."""
  rng = np.random.default_rng(4)
  mask = np.array([[1, 1, 1, 1, 0, 0, 0], [1] * 7])
  for hidden, heads in ((48, 3), (15, 3)):
    layer = SelfAttention(hidden_size=hidden, num_heads=heads, dtype="mixed_bfloat16")
    x16 = tf.cast(rng.standard_normal((2, 7, hidden)), tf.bfloat16)
    got = layer(x16, mask)
    assert got.dtype == tf.bfloat16
    np.testing.assert_array_equal(tf.cast(got, tf.float32),
                                  tf.cast(_unfolded_bfloat16(layer, x16, mask), tf.float32))
