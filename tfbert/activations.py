"""Activation functions named by `BertConfig.hidden_act`.

`"gelu"` is google-research/bert's tanh approximation (`modeling.gelu`); `"gelu_exact"` is the
erf form that Hugging Face calls `"gelu"`. The two differ by up to ~5e-4 per activation, which
is visible in a 2e-5 parity test, so the name must pick the right one.
"""

import math
from typing import Callable

import tensorflow as tf


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_CUBIC = 0.044715


@tf.custom_gradient
def gelu_tanh(x: tf.Tensor) -> tf.Tensor:
  """google-research/bert's GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

  The gradient is written out, d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi)
  (1 + 3 * 0.044715 x^2) with t the tanh, instead of being traced through `tf.pow`: it
  reuses t and x^2 from the forward pass, and its few element-wise passes over the
  [B, S, I] activations replace autodiff's dozen (tools/benchmark.py, BENCHMARKS.md).
  `tests/activations_test.py` checks it against float64 autodiff of the formula.
  """
  x2 = x * x
  t = tf.tanh(_SQRT_2_OVER_PI * x * (1.0 + _CUBIC * x2))
  half_x = 0.5 * x

  def grad(dy):
    slope = 0.5 * (1.0 + t) + half_x * (1.0 - t * t) * (_SQRT_2_OVER_PI * (1.0 + 3.0 * _CUBIC * x2))
    return dy * slope

  return half_x * (1.0 + t), grad


def gelu_exact(x: tf.Tensor) -> tf.Tensor:
  """Exact GELU, 0.5 x (1 + erf(x / sqrt(2))): Hugging Face's "gelu", formula for formula.

  (`tf.nn.gelu(approximate=False)` uses another form that is 1.7e-7 off in float64 at x=-3.)
  """
  return 0.5 * x * (1.0 + tf.math.erf(x * (1.0 / math.sqrt(2.0))))


def _linear(x: tf.Tensor) -> tf.Tensor:
  return x


_ACTIVATIONS: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "gelu": gelu_tanh,
    "gelu_exact": gelu_exact,
    "relu": tf.nn.relu,
    "tanh": tf.tanh,
    "linear": _linear,
}


def get_activation(name: str) -> Callable[[tf.Tensor], tf.Tensor]:
  """Returns the activation function for a `BertConfig.hidden_act` value.

  Raises:
    ValueError: for an unknown name, listing the known ones.
  """
  try:
    return _ACTIVATIONS[name]
  except KeyError:
    raise ValueError(f"unknown hidden_act {name!r}; known: {sorted(_ACTIVATIONS)}") from None
