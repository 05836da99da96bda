"""Tests for tfbert.attention."""

import numpy as np
import tensorflow as tf

from tfbert.attention import MASK_ADDER, SelfAttention, attention_mask_adder


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
