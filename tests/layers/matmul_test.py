"""Tests for tfbert.layers.matmul: TensorFlow's values and gradients, and the layout that
survives."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2, meta_graph_pb2
from tensorflow.python.grappler import tf_optimizer

from tfbert.layers import matmul

M = 13  # odd sizes


def _value_and_gradients(fn, x, kernel, dy):
  with tf.GradientTape() as tape:
    tape.watch([x, kernel])
    y = fn(x, kernel)
  return [y, *tape.gradient(y, [x, kernel], output_gradients=dy)]


@pytest.mark.parametrize("rows, columns", [(5, 11), (7, 7), (11, 5)])
@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_value_and_gradients_are_tensorflows(rows, columns, dtype):
  rng = np.random.default_rng(rows * columns)
  x, kernel, dy = (tf.constant(rng.normal(size=shape), dtype)
                   for shape in ([M, rows], [rows, columns], [M, columns]))
  ours = _value_and_gradients(matmul.matmul, x, kernel, dy)
  want = _value_and_gradients(tf.matmul, x, kernel, dy)
  # The same products, one of them with its operand laid out differently: oneDNN may block
  # the K sum differently, so float32 agrees to a few ulps of the O(5) sums (ulp 4.8e-7),
  # bfloat16 to one rounding of its 8-bit mantissa (2^-8 relative).
  rtol, atol = (1e-6, 1e-5) if dtype == tf.float32 else (2 ** -8, 2e-2)
  for name, got, expected in zip(["y", "dx", "dkernel"], ours, want):
    assert got.dtype == expected.dtype == dtype
    np.testing.assert_allclose(tf.cast(got, tf.float32), tf.cast(expected, tf.float32),
                               rtol=rtol, atol=atol, err_msg=name)


def test_only_narrowing_float32_kernels_are_transposed():
  assert matmul.transposes_kernel(256, 1024, tf.float32)
  assert matmul.transposes_kernel(256, 256, tf.float32)
  assert not matmul.transposes_kernel(1024, 256, tf.float32)
  assert not matmul.transposes_kernel(256, 1024, tf.bfloat16)
  assert not matmul.transposes_kernel(256, 1024, tf.float16)


def _optimized_matmuls(fn, rows, columns):
  """(transpose_a, transpose_b) of each MatMul after Grappler: dx's, then dkernel's.

  Only the gradients are fetched, so Grappler prunes the forward product.
  """
  @tf.function
  def step(x, kernel):
    with tf.GradientTape() as tape:
      tape.watch([x, kernel])
      y = fn(x, kernel)
    return tape.gradient(y, [x, kernel], output_gradients=tf.ones_like(y))

  concrete = step.get_concrete_function(tf.TensorSpec([M, rows]),
                                        tf.TensorSpec([rows, columns]))
  graph = concrete.graph
  meta = tf.compat.v1.train.export_meta_graph(graph_def=graph.as_graph_def(), graph=graph)
  fetches = meta_graph_pb2.CollectionDef()
  fetches.node_list.value.extend(t.op.name for t in concrete.outputs)
  meta.collection_def["train_op"].CopyFrom(fetches)
  optimized = tf_optimizer.OptimizeGraph(config_pb2.ConfigProto(), meta)
  nodes = list(optimized.node) + [n for f in optimized.library.function for n in f.node_def]
  return sorted((n.attr["transpose_a"].b, n.attr["transpose_b"].b) for n in nodes
                if n.op in ("MatMul", "_MklMatMul", "_FusedMatMul"))


def _folded_transpose_gradient(x, kernel):
  """`x @ kernel` whose dx multiplies by a bare `tf.transpose(kernel)`."""
  @tf.custom_gradient
  def product(x, kernel):
    def grad(dy):
      return tf.matmul(dy, tf.transpose(kernel)), tf.matmul(x, dy, transpose_a=True)
    return tf.matmul(x, kernel), grad
  return product(x, kernel)


def test_the_transposed_kernel_survives_grappler():
  plain, transposed_b = (False, False), (False, True)
  weight_gradient = (True, False)
  # TensorFlow's own gradient, and a bare transpose that Grappler folds back.
  assert _optimized_matmuls(tf.matmul, 5, 11) == [transposed_b, weight_gradient]
  assert _optimized_matmuls(_folded_transpose_gradient, 5, 11) == [transposed_b,
                                                                   weight_gradient]
  assert _optimized_matmuls(matmul.matmul, 5, 11) == [plain, weight_gradient]
  assert _optimized_matmuls(matmul.matmul, 11, 5) == [transposed_b, weight_gradient]


def test_compiles_under_xla_with_tensorflows_gradients():
  # A whole train step may run under jit_compile (alignment's "xla" execution): Snapshot
  # and the transpose must lower, and give the same products.
  rng = np.random.default_rng(3)
  x, kernel = (tf.constant(rng.normal(size=shape), tf.float32) for shape in ([M, 5], [5, 11]))

  def gradients(fn):
    @tf.function(jit_compile=True)
    def step(x, kernel):
      with tf.GradientTape() as tape:
        tape.watch([x, kernel])
        loss = tf.reduce_sum(tf.square(fn(x, kernel)))
      return tape.gradient(loss, [x, kernel])
    return step(x, kernel)

  # Same XLA dot for both; only dx's operand layout differs: a few ulps of O(10) sums.
  for got, expected in zip(gradients(matmul.matmul), gradients(tf.matmul)):
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-5)
