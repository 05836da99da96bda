"""Tests for tfbert.activations."""

import math

import numpy as np
import pytest
import tensorflow as tf

from tfbert import activations


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
