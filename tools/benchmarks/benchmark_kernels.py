"""Fused kernels against the unfused ops they replace, timed alternately in one process.

Each `KernelCase` pairs tfbert's kernel (forward and gradient) with a `reference`: the
plain TensorFlow composition of the same math that the kernel replaced, at the shapes of the
pretraining benchmark (B 32, S 128, H 256, I 1024, P 20, V 30522). Both sides compute the
same function (`tests/benchmarks/benchmark_kernels_test.py` checks every pair's outputs agree), so
the time ratio is the speed-up of the kernel alone. `measure` alternates the two sides
(reference, kernel, reference, ...) and reports the median time of each.

Shape legend: M rows (B * S), N masked positions (B * P), V vocabulary.
"""

import dataclasses
import math
import statistics
import time
from typing import Callable

import tensorflow as tf

from tfbert.layers import activations, dropout, fused
from tfbert.layers.layer_norm import normalize
from tfbert.losses import pretraining_loss

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@dataclasses.dataclass(frozen=True)
class KernelCase:
  """A kernel and its unfused reference, as functions of the same inputs.

  Attributes:
    name: Row label.
    make_inputs: () -> list of input Tensors (the differentiated ones first).
    kernel, reference: (*inputs) -> list of Tensors (values and gradients).
  """
  name: str
  make_inputs: Callable[[], list]
  kernel: Callable[..., list]
  reference: Callable[..., list]


def _with_gradients(forward: Callable, num_differentiated: int) -> Callable[..., list]:
  """(*inputs) -> [forward value, gradients of sum(value * value) w.r.t. the first inputs]."""

  def run(*inputs):
    watched = list(inputs[:num_differentiated])
    with tf.GradientTape() as tape:
      tape.watch(watched)
      value = forward(*inputs)
      loss = tf.reduce_sum(tf.square(tf.cast(value, tf.float32)))
    return [value] + tape.gradient(loss, watched)

  return run


def _unfused_gelu(x):
  """The previous `gelu_tanh`: the same written-out gradient, as separate TF ops."""

  @tf.custom_gradient
  def gelu(x):
    x2 = x * x
    t = tf.tanh(_SQRT_2_OVER_PI * x * (1.0 + 0.044715 * x2))
    half_x = 0.5 * x

    def grad(dy):
      return dy * (0.5 * (1.0 + t) + half_x * (1.0 - t * t) * (
          _SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * x2)))

    return half_x * (1.0 + t), grad

  return gelu(x)


def _unfused_layer_norm(x, gamma, beta):
  """The previous LayerNorm: written-out gradient, separate TF ops."""

  @tf.custom_gradient
  def forward(x, gamma, beta):
    mean = tf.reduce_mean(x, axis=-1, keepdims=True)
    centered = x - mean
    rstd = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True) + 1e-12)
    xhat = centered * rstd

    def grad(dy):
      g = dy * gamma
      dx = rstd * (g - tf.reduce_mean(g, -1, keepdims=True)
                   - xhat * tf.reduce_mean(g * xhat, -1, keepdims=True))
      return dx, tf.reduce_sum(dy * xhat, 0), tf.reduce_sum(dy, 0)

    return xhat * gamma + beta, grad

  return forward(x, gamma, beta)


def _unfused_residual_block(h, bias, keep, residual, gamma, beta, scale):
  """The previous transformer-layer tail: Dense bias add, dropout, residual, LayerNorm."""
  dense = (h + bias) * (tf.cast(keep, h.dtype) * tf.cast(scale, h.dtype))
  y = _unfused_layer_norm(tf.cast(dense + residual, tf.float32), gamma, beta)
  return tf.cast(y, h.dtype)


def _unfused_dropout(probs, keep, scale):
  """The previous attention dropout: cast to bfloat16, then times the cast mask and scale."""
  x = tf.cast(probs, tf.bfloat16)
  return x * (tf.cast(keep, tf.bfloat16) * tf.cast(scale, tf.bfloat16))


def _cross_entropy_pair(labels):
  def kernel(logits):
    loss, hit = pretraining_loss.sparse_cross_entropy(labels, logits)
    return loss, hit

  def reference(logits):
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
    hit = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32)
    return loss, hit

  def run(fn):
    def f(logits):
      with tf.GradientTape() as tape:
        tape.watch(logits)
        loss, hit = fn(logits)
        total = tf.reduce_sum(loss)
      return [loss, hit, tape.gradient(total, logits)]
    return f

  return run(kernel), run(reference)


def default_cases(rows: int = 4096, hidden: int = 256, intermediate: int = 1024,
                  masked: int = 640, vocab: int = 30522) -> list[KernelCase]:
  """The kernel cases, at the pretraining benchmark's shapes by default."""
  rng = tf.random.Generator.from_seed(1)
  cases = []
  for dtype in (tf.float32, tf.bfloat16):
    suffix = f" {dtype.name} [{rows}, {intermediate}]"
    cases.append(KernelCase(
        "gelu_tanh fwd+bwd" + suffix,
        lambda dtype=dtype: [tf.cast(rng.normal([rows, intermediate]), dtype)],
        _with_gradients(activations.gelu_tanh, 1), _with_gradients(_unfused_gelu, 1)))

  def norm_inputs():
    return [rng.normal([rows, hidden]), 1.0 + 0.1 * rng.normal([hidden]),
            0.1 * rng.normal([hidden])]

  cases.append(KernelCase(
      f"LayerNorm fwd+bwd float32 [{rows}, {hidden}]", norm_inputs,
      _with_gradients(lambda x, g, b: normalize(x, g, b, 1e-12), 3),
      _with_gradients(_unfused_layer_norm, 3)))
  # Both sides are handed the same precomputed mask (the residual block's kernel takes a
  # stored mask); the attention-probs kernel draws its mask from the key inside its loops,
  # and its reference does not pay for a draw, so that speed-up is a lower bound.
  rate = 0.1
  key = tf.constant(0x5EED, tf.uint64)
  scale = dropout.keep_scale(rate)
  for dtype in (tf.float32, tf.bfloat16):
    def block_inputs(dtype=dtype):
      return [tf.cast(rng.normal([rows, hidden]), dtype), tf.cast(rng.normal([hidden]), dtype),
              tf.cast(rng.normal([rows, hidden]), dtype), 1.0 + 0.1 * rng.normal([hidden]),
              0.1 * rng.normal([hidden]),
              dropout.keep_mask(key, [rows, hidden], dropout.keep_threshold(rate))]
    cases.append(KernelCase(
        f"bias+dropout+residual+LayerNorm fwd+bwd {dtype.name} [{rows}, {hidden}]",
        block_inputs,
        _with_gradients(lambda h, b, r, g, be, keep: fused.bias_dropout_residual_layer_norm(
            h, b, keep, scale, r, g, be, 1e-12), 5),
        _with_gradients(lambda h, b, r, g, be, keep: _unfused_residual_block(
            h, b, keep, r, g, be, scale), 5)))

  probs_shape = [max(rows // 32, 1), 128, 128]  # [B*N, S, S]: B 32, N 4 at 4,096 rows

  def probs_inputs():
    return [tf.nn.softmax(rng.normal(probs_shape)),
            dropout.keep_mask(key, probs_shape, dropout.keep_threshold(rate))]

  cases.append(KernelCase(
      f"attention-probs dropout to bfloat16 fwd+bwd {probs_shape}", probs_inputs,
      _with_gradients(lambda p, keep: dropout.drop(p, key, rate, tf.bfloat16), 1),
      _with_gradients(lambda p, keep: _unfused_dropout(p, keep, scale), 1)))
  labels = tf.random.stateless_uniform([masked], [1, 2], 0, vocab, tf.int32)
  kernel, reference = _cross_entropy_pair(labels)
  cases.append(KernelCase(
      f"MLM cross-entropy + accuracy fwd+bwd float32 [{masked}, {vocab}]",
      lambda: [3.0 * rng.normal([masked, vocab])], kernel, reference))

  def head_inputs():
    return [tf.cast(rng.normal([masked, hidden]), tf.bfloat16),
            tf.cast(0.02 * rng.normal([vocab, hidden]), tf.bfloat16), rng.normal([vocab])]

  cases.append(KernelCase(
      f"MLM projection bias in float32 (vs bfloat16) fwd+bwd [{masked}, {vocab}]", head_inputs,
      _with_gradients(lambda x, t, b: tf.nn.bias_add(
          tf.cast(tf.matmul(x, t, transpose_b=True), tf.float32), b), 3),
      _with_gradients(lambda x, t, b: tf.cast(tf.nn.bias_add(
          tf.matmul(x, t, transpose_b=True), tf.cast(b, tf.bfloat16)), tf.float32), 3)))
  return cases


@dataclasses.dataclass(frozen=True)
class KernelResult:
  name: str
  kernel_ms: float
  reference_ms: float

  @property
  def speedup(self) -> float:
    return self.reference_ms / self.kernel_ms


def _time(fn: Callable, inputs: list, calls: int) -> float:
  """Milliseconds per call over `calls` calls (synchronized by fetching the results)."""
  start = time.perf_counter()
  for _ in range(calls):
    tf.nest.map_structure(lambda t: t.numpy(), fn(*inputs))
  return (time.perf_counter() - start) * 1000.0 / calls


def measure(case: KernelCase, repeats: int = 5, calls: int = 5) -> KernelResult:
  """Median ms per call of each side, alternating reference and kernel `repeats` times."""
  inputs = case.make_inputs()
  sides = [tf.function(case.reference), tf.function(case.kernel)]
  for side in sides:  # Trace and compile.
    _time(side, inputs, 2)
  times = ([], [])
  for _ in range(repeats):
    for i, side in enumerate(sides):
      times[i].append(_time(side, inputs, calls))
  return KernelResult(case.name, statistics.median(times[1]), statistics.median(times[0]))


def format_results(results: list[KernelResult]) -> str:
  lines = ["| kernel | unfused reference ms | tfbert ms | speed-up |", "|---|---|---|---|"]
  lines += [f"| {r.name} | {r.reference_ms:.1f} | {r.kernel_ms:.1f} | {r.speedup:.2f}x |"
            for r in results]
  return "\n".join(lines)
