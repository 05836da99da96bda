"""Tests for tfbert.dropout."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfbert import dropout


def test_keep_threshold_and_scale_for_berts_rate():
  # round(0.1 * 65536) = round(6553.6) = 6554, drop probability 6554 / 65536 = 0.100006.
  assert dropout.keep_threshold(0.1) == 6554
  assert dropout.keep_threshold(0.0) == 0


def test_inference_and_rate_zero_are_the_identity():
  x = tf.random.normal([3, 5, 7])
  assert dropout.Dropout(0.1)(x, training=False) is x
  np.testing.assert_array_equal(dropout.Dropout(0.0)(x, training=True), x)


def test_drop_rate_and_scale_over_many_elements():
  layer = dropout.Dropout(0.1, seed=3)
  x = tf.ones([251, 397])  # 99,647 elements, odd: the last 32-bit draw is half used.
  y = layer(x, training=True).numpy()
  kept_value = 65536 / (65536 - 6554)
  assert set(np.unique(y)) == {0.0, np.float32(kept_value)}
  dropped = float(np.mean(y == 0.0))
  # Binomial(99647, 0.100006): standard deviation sqrt(p (1 - p) / n) = 9.5e-4; 5 sigma.
  assert abs(dropped - 0.100006) < 5 * 9.5e-4
  # The mean of the output is 1 in expectation; its standard deviation is
  # kept_value * 9.5e-4 = 1.06e-3, and 5 sigma bounds it.
  assert abs(float(y.mean()) - 1.0) < 5 * 1.06e-3


def test_the_two_halves_of_a_draw_decide_independently():
  """Neighbouring elements come from the two halves of one 32-bit word: their decisions
  must not be correlated (a shared decision would give P(both dropped) = 0.1, not 0.01)."""
  y = dropout.Dropout(0.1, seed=5)(tf.ones([200000]), training=True).numpy()
  pairs = y.reshape(-1, 2) == 0.0
  both = float(np.mean(pairs[:, 0] & pairs[:, 1]))
  # 100,000 pairs, p = 0.1000061^2 = 0.0100012, sd sqrt(p (1 - p) / 1e5) = 3.1e-4; 5 sigma.
  assert abs(both - 0.0100012) < 5 * 3.1e-4


def test_gradient_is_the_same_mask_times_the_scale():
  layer = dropout.Dropout(0.3, seed=7)
  x = tf.Variable(tf.random.normal([13, 17]))
  with tf.GradientTape() as tape:
    y = layer(x, training=True)
    loss = tf.reduce_sum(y * 2.0)
  grad = tape.gradient(loss, x).numpy()
  mask = y.numpy() != 0.0  # x is never exactly 0 here
  scale = 65536 / (65536 - dropout.keep_threshold(0.3))
  np.testing.assert_allclose(grad, np.where(mask, 2.0 * scale, 0.0), rtol=1e-6)


def test_new_masks_each_call_and_repeatable_under_a_global_seed():
  def two_calls():
    keras.utils.set_random_seed(11)
    layer = dropout.Dropout(0.5)
    x = tf.ones([64])
    return layer(x, training=True).numpy(), layer(x, training=True).numpy()

  first, second = two_calls()
  assert not np.array_equal(first, second)
  again = two_calls()
  np.testing.assert_array_equal(first, again[0])
  np.testing.assert_array_equal(second, again[1])


def test_bfloat16_keeps_its_dtype_and_bad_rates_are_named():
  y = dropout.Dropout(0.1, dtype="mixed_bfloat16")(tf.ones([9], tf.bfloat16), training=True)
  assert y.dtype == tf.bfloat16
  with pytest.raises(ValueError, match="dropout rate must be in"):
    dropout.Dropout(1.0, name="attention_dropout")


def test_get_config_round_trips():
  layer = dropout.Dropout(0.2, seed=4, name="d")
  again = dropout.Dropout.from_config(layer.get_config())
  assert (again.rate, again.seed, again.name) == (0.2, 4, "d")
