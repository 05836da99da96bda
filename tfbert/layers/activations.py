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


def _float32(x: tf.Tensor) -> tf.Tensor:
  return tf.cast(x, tf.float32) if x.dtype in (tf.bfloat16, tf.float16) else x


def gelu_tanh_value(x: tf.Tensor) -> tf.Tensor:
  """The formula itself, for tracing inside a fused kernel (`gelu_tanh` is the op)."""
  t = tf.tanh(_SQRT_2_OVER_PI * x * (1.0 + _CUBIC * x * x))
  return 0.5 * x * (1.0 + t)


def gelu_tanh_slope(x: tf.Tensor) -> tf.Tensor:
  """d gelu_tanh / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)."""
  x2 = x * x
  t = tf.tanh(_SQRT_2_OVER_PI * x * (1.0 + _CUBIC * x2))
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * (_SQRT_2_OVER_PI * (1.0 + 3.0 * _CUBIC * x2))


@tf.function(jit_compile=True, autograph=False)
def _gelu_tanh_forward(x: tf.Tensor) -> tf.Tensor:
  """One fused XLA loop; 16-bit inputs are computed in float32 and rounded once."""
  return tf.cast(gelu_tanh_value(_float32(x)), x.dtype)


@tf.function(jit_compile=True, autograph=False)
def _gelu_tanh_backward(x: tf.Tensor, dy: tf.Tensor) -> tf.Tensor:
  """dy * gelu'(x) in one fused XLA loop (recomputes the tanh instead of storing it)."""
  return tf.cast(_float32(dy) * gelu_tanh_slope(_float32(x)), dy.dtype)


@tf.custom_gradient
def gelu_tanh(x: tf.Tensor) -> tf.Tensor:
  """google-research/bert's GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

  The forward pass and the gradient, d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi)
  (1 + 3 * 0.044715 x^2) with t the tanh, are each one XLA-compiled element-wise loop over
  the [B, S, I] activations (in float32 also for bfloat16/float16 inputs). The same
  written-out gradient as separate TF ops took ~10 passes over that tensor: 1.7x the time
  in float32 and 1.9x in bfloat16 on [4096, 1024] (tools/benchmark.py --benchmark=kernels).
  `tests/layers/activations_test.py` checks it against float64 autodiff of the formula.
  """

  def grad(dy):
    return _gelu_tanh_backward(x, dy)

  return _gelu_tanh_forward(x), grad


def gelu_exact(x: tf.Tensor) -> tf.Tensor:
  """Exact GELU, 0.5 x (1 + erf(x / sqrt(2))): Hugging Face's "gelu", formula for formula.

  (`tf.nn.gelu(approximate=False)` uses another form that is 1.7e-7 off in float64 at x=-3.)
  Plain ops, so it also traces inside a fused kernel: the transformer layer runs it fused
  with its bias (`tfbert.layers.fused.bias_gelu`).
  """
  return 0.5 * x * (1.0 + tf.math.erf(x * (1.0 / math.sqrt(2.0))))


def gelu_exact_slope(x: tf.Tensor) -> tf.Tensor:
  """d gelu_exact / dx = 0.5 (1 + erf(x / sqrt(2))) + x exp(-x^2 / 2) / sqrt(2 pi)."""
  return (0.5 * (1.0 + tf.math.erf(x * (1.0 / math.sqrt(2.0))))
          + x * tf.exp(-0.5 * x * x) * (1.0 / math.sqrt(2.0 * math.pi)))


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
