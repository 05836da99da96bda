"""Activation functions named by `BertConfig.hidden_act`.

`"gelu"` is google-research/bert's tanh approximation (`modeling.gelu`); `"gelu_exact"` is the
erf form that Hugging Face calls `"gelu"`. The two differ by up to ~5e-4 per activation, which
is visible in a 2e-5 parity test, so the name must pick the right one.
"""

import math
from typing import Callable

import tensorflow as tf


def gelu_tanh(x: tf.Tensor) -> tf.Tensor:
  """google-research/bert's GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
  cdf = 0.5 * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))
  return x * cdf


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
