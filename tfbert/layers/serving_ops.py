"""The layers' element-wise tails as plain TensorFlow ops, for exported (serving) graphs.

Training traces every dense projection's tail as an XLA-compiled loop with a written-out
gradient (`tfbert.layers.fused`, `tfbert.layers.layer_norm`), and `matmul.matmul` wraps its
MatMul in a custom gradient. A served graph needs neither gradient, and on CPU the XLA
calls cost more than they save at small batches: every call of a compiled function from a
graph is an `XlaLaunch` of about 60 us on the 2-core test machine (a graph of 50 chained
float32 adds over [128, 384]: 63 us per XLA-compiled add against 5 us per TensorFlow add;
a LayerNorm as one XLA call 80 us against 43 us as eight TensorFlow ops).

Inside `scope()` (entered by `tfbert.serving.export.served_outputs`, so by every
SavedModel, TFLite and ONNX export) the layers trace these instead, ordered the way
TensorFlow's Grappler remapper matches them when oneDNN is on (x86 Linux's default):

* `bias_gelu`: MatMul -> BiasAdd -> GELU becomes one oneDNN `_FusedMatMul` with the bias and
  the GELU as post-ops: `activations.gelu_exact` matches the remapper's "GeluExact";
  `tf.nn.gelu(x, approximate=True)` is google-research/bert's tanh formula in the op
  sequence of its "GeluApproximate" (the same formula written otherwise does not fuse).
* `fused.bias_dropout_residual_layer_norm`: MatMul -> BiasAdd is one `_FusedMatMul`; the
  residual sum is float32 and the LayerNorm is `layer_norm.normalize`'s serving form.
* `layer_norm.normalize` (`LayerNorm`'s, and the residual block's): its formula as float32
  ops.
* `matmul.matmul` is a bare `tf.matmul`, so the remapper sees MatMul -> BiasAdd.

Measured on the exported MiniLM-L6-H384 encoder, B 1, S 128: see BENCHMARKS.md.

Numerics. In float32 these are the fused kernels' formulas: outputs agree to float32
rounding (tests/layers/serving_ops_test.py). In bfloat16, oneDNN computes the bias and the
GELU on its float32 accumulator and rounds once, where the training kernel rounds the
MatMul output, adds the bias and applies the GELU in float32 and rounds again: one rounding
fewer. Without oneDNN (a GPU, `TF_ENABLE_ONEDNN_OPTS=0`) the GELU runs as bfloat16 ops, each
rounding; the residual sum and the LayerNorm are float32 either way.
"""

import contextlib
import threading

import tensorflow as tf

from tfbert.layers import activations

_STATE = threading.local()


@contextlib.contextmanager
def scope():
  """Within it (in this thread), the layers trace their serving form. Not for training:
  nothing traced inside has the fused kernels' gradients or dropout."""
  previous = active()
  _STATE.active = True
  try:
    yield
  finally:
    _STATE.active = previous


def active() -> bool:
  """Whether the layers trace their serving form."""
  return getattr(_STATE, "active", False)


def bias_gelu(h: tf.Tensor, bias: tf.Tensor, exact: bool) -> tf.Tensor:
  """GELU(h + bias) in the remapper's MatMul + BiasAdd + GELU pattern.

  Args:
    h: [M, C] output of a MatMul (directly: anything between breaks the fusion).
    bias: [C].
    exact: the erf form (Hugging Face's "gelu") instead of the tanh form.

  Returns:
    [M, C] in h's dtype.
  """
  x = tf.nn.bias_add(h, tf.cast(bias, h.dtype))
  if exact:
    return activations.gelu_exact(x)
  # TensorFlow's own op sequence for google-research/bert's formula, which the remapper
  # matches (`activations.gelu_tanh_value`'s, and the formula with tf.square, did not fuse).
  return tf.nn.gelu(x, approximate=True)
