"""Tests for tfbert.layers.activations."""

import math

import numpy as np
import pytest
import tensorflow as tf

from tfbert.layers import activations


def test_gelu_golden_values():
  x = tf.constant([-3.0, -1.0, 0.0, 0.5, 1.0, 2.0], tf.float64)
  # Golden values from the closed forms, evaluated with Python's math module:
  # exact: x * 0.5 * (1 + erf(x / sqrt(2))); tanh: Google's modeling.gelu formula.
  exact = [v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.numpy()]
  approx = [0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
            for v in x.numpy()]
  assert exact[4] == pytest.approx(0.8413447460685429, abs=1e-15)
  assert approx[4] == pytest.approx(0.8411919906082768, abs=1e-15)
  # float64 math: agreement to 1e-12 leaves room only for libm rounding.
  np.testing.assert_allclose(activations.get_activation("gelu_exact")(x), exact, atol=1e-12)
  np.testing.assert_allclose(activations.get_activation("gelu")(x), approx, atol=1e-12)


def test_the_two_gelus_differ_measurably():
  x = tf.linspace(-4.0, 4.0, 801)
  gap = np.max(np.abs(activations.gelu_tanh(x) - activations.gelu_exact(x)))
  assert 1e-4 < gap < 1e-3  # ~4.7e-4 near |x| = 2: far above a 2e-5 parity tolerance.


def test_unknown_activation_names_the_known_ones():
  with pytest.raises(ValueError, match="unknown hidden_act 'swish'; known:"):
    activations.get_activation("swish")


def _gelu_tanh_traced(x):
  """Google's formula as written, differentiated by autodiff (the reference gradient)."""
  return 0.5 * x * (1.0 + tf.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))


@pytest.mark.parametrize("dtype,tol", [
    # float64: the two gradients are the same function; 1e-13 leaves only rounding.
    (tf.float64, 1e-13),
    # float32: two orders of ~10 roundings each (values up to 1.2, ulp 1.2e-7, some
    # amplified by the slope factor sqrt(2/pi) (1 + 3 * 0.044715 x^2) up to 6.0 at |x| = 7);
    # measured max 3.7e-6 (XLA-fused kernels, whose tanh approximation differs from Eigen's).
    (tf.float32, 5e-6)])
def test_gelu_tanh_written_out_gradient_matches_autodiff(dtype, tol):
  x = tf.cast(tf.linspace(-7.0, 7.0, 1401), dtype)
  dy = tf.cast(tf.cos(tf.linspace(0.0, 40.0, 1401)), dtype)  # a non-constant upstream
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    ours, traced = activations.gelu_tanh(x), _gelu_tanh_traced(x)
  np.testing.assert_allclose(ours, traced, atol=tol)
  np.testing.assert_allclose(tape.gradient(ours, x, dy), tape.gradient(traced, x, dy), atol=tol)


def test_gelu_tanh_gradient_in_bfloat16_follows_float32():
  x = tf.linspace(-5.0, 5.0, 501)
  with tf.GradientTape() as tape:
    xb = tf.cast(x, tf.bfloat16)
    tape.watch(xb)
    y = activations.gelu_tanh(xb)
  grad = tf.cast(tape.gradient(y, xb), tf.float32)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y32 = _gelu_tanh_traced(x)
  # bfloat16 keeps 8 significant bits (relative step 2^-8 = 3.9e-3); slopes lie in
  # [-0.13, 1.13], so a few roundings stay below 2e-2.
  assert y.dtype == tf.bfloat16 and grad.dtype == tf.float32
  np.testing.assert_allclose(grad, tape.gradient(y32, x), atol=2e-2)
