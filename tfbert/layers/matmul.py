"""`x @ kernel` whose float32 input gradient multiplies by a materialized kernel transpose.

TensorFlow's MatMul gradient computes the input gradient as `dy @ kernel^T` with
`transpose_b=True`. On CPU, oneDNN runs that layout slower than a plain product of the same
shape when the product narrows (kernel [K, N] with K <= N, so dx [M, K] has at most as many
columns as dy). Best of 20 calls on a 2-core AMD EPYC (Zen 4), M = 4096, float32:

| kernel [K, N] | `transpose_b` | plain product of the transpose |
|---|---|---|
| [256, 1024] (feed-forward in) | 14.6 ms | 11.3 ms |
| [256, 768] (query/key/value) | 9.3 ms | 8.9 ms |
| [256, 512] (key/value) | 7.2 ms | 6.3 ms |
| [256, 256] (attention output) | 3.7 ms | 3.3 ms |
| [1024, 256] (feed-forward out) | 12.1 ms | 12.6 ms |

In bfloat16 `transpose_b` was as fast or faster for every one of these (5.8 against 6.4 ms
for [256, 1024]), so 16-bit products and widening kernels keep TensorFlow's gradient.
Transposing and copying a [256, 1024] kernel (1 MB) added about 0.4 ms (11.7 against
11.3 ms for the product from a stored transpose).

A plain `tf.transpose` does not survive: Grappler's arithmetic optimizer folds a Transpose
feeding a MatMul back into `transpose_b`. `Snapshot` (a copy the optimizers keep) between the
two keeps the transposed kernel a real tensor.

Shape legend: M rows, K input channels, N output channels.
"""

import tensorflow as tf

from tfbert.layers import serving_ops


def transposed(kernel: tf.Tensor) -> tf.Tensor:
  """kernel^T [N, K] of a [K, N] kernel, as a tensor Grappler cannot fold into a MatMul."""
  return tf.raw_ops.Snapshot(input=tf.transpose(kernel))


def transposes_kernel(rows: int, columns: int, dtype: tf.DType) -> bool:
  """Whether `matmul` multiplies by `transposed(kernel)` for a [rows, columns] kernel."""
  return tf.as_dtype(dtype) == tf.float32 and rows <= columns


def matmul(x: tf.Tensor, kernel: tf.Tensor) -> tf.Tensor:
  """`x @ kernel`; for a float32 kernel with K <= N, dx = dy @ `transposed(kernel)`.

  Args:
    x: [M, K].
    kernel: [K, N], of x's dtype.

  Returns:
    [M, N] (in `serving_ops.scope()` a bare `tf.matmul`). The gradients are TensorFlow's
    MatMul gradients (dx = dy @ kernel^T, dkernel = x^T @ dy) in value; only the layout of
    dx's product differs.
  """
  x, kernel = tf.convert_to_tensor(x), tf.convert_to_tensor(kernel)
  if serving_ops.active():  # No gradient to shape; a bare MatMul fuses with its BiasAdd.
    return tf.matmul(x, kernel)
  rows, columns = kernel.shape
  if rows is None or columns is None or not transposes_kernel(rows, columns, kernel.dtype):
    return tf.matmul(x, kernel)

  @tf.custom_gradient
  def product(x, kernel):
    def grad(dy):
      return tf.matmul(dy, transposed(kernel)), tf.matmul(x, dy, transpose_a=True)

    return tf.matmul(x, kernel), grad

  return product(x, kernel)
