"""The matmul floor of a training step: its GEMMs timed alone, and the ratio they allow.

A training step cannot be faster than its matrix multiplications, run back to back at the
speed each reaches alone on this machine. This module lists the GEMMs of tfbert's training
step for a `benchmark.StepCase` (forward, input gradient and weight gradient of every
matmul, in the layouts of the step's gradients: TensorFlow's MatMul gradient, except the
encoder projections' input gradients that `tfbert.layers.matmul` computes from a transposed
kernel), times each distinct one alone,
and sums them. Against a peer's measured step time, the floor bounds the ratio tfbert /
peer that any implementation with these GEMMs can reach:

    ceiling = peer step seconds / floor seconds

(every non-matmul op free and the GEMMs not sped up by running side by side). A ratio goal
above the ceiling needs fewer FLOPs or faster GEMM kernels, not less overhead.

tfbert's pretraining step computes its last layer only at the [CLS] and the P masked
positions (`encoder.BertEncoder`): keys and values over all S positions, everything else
over F = 1 + P rows. The SQuAD step runs every layer over all S positions.

Shape legend: B batch, S sequence, F last-layer query rows, H hidden, I intermediate,
N heads, D = H / N, P masked positions, V vocabulary.
"""

import dataclasses

import tensorflow as tf

from tfbert.layers import matmul
from tfbert_tools.benchmarks import benchmark, benchmark_mfu


@dataclasses.dataclass(frozen=True)
class Gemm:
  """`count` x `batch` products [m, k] x [k, n] (operands stored transposed when flagged).

  Attributes:
    name: what the product computes, e.g. "feed-forward in: input gradient".
    m, k, n: the product's shape, [m, k] x [k, n] -> [m, n].
    transpose_a, transpose_b: whether the operand is stored as [k, m] / [n, k], as
      TensorFlow's MatMul gradient passes it.
    batch: independent products in one batched matmul (attention: B * N).
    count: how many times the step runs it (layers of the same shape).
  """
  name: str
  m: int
  k: int
  n: int
  transpose_a: bool = False
  transpose_b: bool = False
  batch: int = 1
  count: int = 1

  @property
  def flops(self) -> int:
    """FLOPs of all `count` runs; a multiply-add counts 2."""
    return 2 * self.count * self.batch * self.m * self.k * self.n


def _trained(name: str, m: int, k: int, n: int, count: int = 1, batch: int = 1,
             transposed_kernel: bool = False) -> list[Gemm]:
  """x [m, k] @ w [k, n], and its gradients dx = dy @ w^T and dw = x^T @ dy.

  dx multiplies by w stored as [k, n] (TensorFlow's `transpose_b` gradient), or by a
  materialized w^T when `transposed_kernel` (`tfbert.layers.matmul.matmul`).
  """
  return [Gemm(f"{name}: forward", m, k, n, batch=batch, count=count),
          Gemm(f"{name}: input gradient", m, n, k, transpose_b=not transposed_kernel,
               batch=batch, count=count),
          Gemm(f"{name}: weight gradient", k, m, n, transpose_a=True, batch=batch,
               count=count)]


def _attention(queries: int, keys: int, head_size: int, batch: int, count: int) -> list[Gemm]:
  """Scores q @ k^T [F, D] x [D, T] and context p @ v [F, T] x [T, D], with gradients."""
  return [
      Gemm("scores: forward", queries, head_size, keys, transpose_b=True, batch=batch,
           count=count),
      Gemm("scores: query gradient", queries, keys, head_size, batch=batch, count=count),
      Gemm("scores: key gradient", keys, queries, head_size, transpose_a=True, batch=batch,
           count=count),
      *_trained("context", queries, keys, head_size, count, batch)]


def _layer(rows: int, query_rows: int, case: benchmark.StepCase, count: int) -> list[Gemm]:
  """One transformer layer over `rows` key rows and `query_rows` query rows (of B*S)."""
  h, i = case.hidden_size, case.intermediate_size
  b, n = case.batch_size, case.num_heads
  dtype = benchmark_mfu.matmul_dtype(case.dtype_policy)

  def dense(name, m, k, width):  # The layer's projections go through tfbert.layers.matmul.matmul.
    return _trained(name, m, k, width, count,
                    transposed_kernel=matmul.transposes_kernel(k, width, dtype))

  if rows == query_rows:
    projections = dense("query/key/value", rows, h, 3 * h)
  else:
    projections = dense("key/value", rows, h, 2 * h) + dense("query", query_rows, h, h)
  return [*projections,
          *_attention(query_rows // b, rows // b, h // n, b * n, count),
          *dense("attention output", query_rows, h, h),
          *dense("feed-forward in", query_rows, h, i),
          *dense("feed-forward out", query_rows, i, h)]


def step_gemms(case: benchmark.StepCase) -> list[Gemm]:
  """The GEMMs of tfbert's training step for `case` (module docstring), layers merged.

  Returns:
    list of `Gemm`; layers of equal shapes are one entry with `count` = their number.
  """
  b, s, h = case.batch_size, case.seq_length, case.hidden_size
  rows = b * s
  if case.task == "squad":
    return [*_layer(rows, rows, case, case.num_layers),
            *_trained("span logits", rows, h, 2)]
  f = 1 + case.max_predictions  # [CLS] and the masked positions.
  masked = b * case.max_predictions
  gemms = _layer(rows, rows, case, case.num_layers - 1) if case.num_layers > 1 else []
  return [*gemms, *_layer(rows, b * f, case, 1),
          *_trained("MLM transform", masked, h, h),
          # The decoder is the tied table [V, H]: logits = x @ table^T.
          Gemm("MLM logits: forward", masked, h, case.vocab_size, transpose_b=True),
          Gemm("MLM logits: input gradient", masked, case.vocab_size, h),
          Gemm("MLM logits: table gradient", case.vocab_size, masked, h, transpose_a=True),
          *_trained("pooler", b, h, h), *_trained("NSP classifier", b, h, 2)]


def time_gemm(gemm: Gemm, dtype: str, warmup: int = 2, repeats: int = 7) -> float:
  """Seconds of one run of `gemm` (count 1) in `dtype`, alone: a lower bound.

  The fastest of `repeats` calls after warm-up, less the fastest call of the same
  `tf.function` without the product (the call's own overhead, ~0.1 ms). The fastest, not
  the median, as for `benchmark_mfu.measure_matmul_peak`: a floor is what the machine can
  reach, and a lower floor only raises the ratio ceiling. The function returns one element
  of the product, so each call is synchronized without copying or reducing the product.
  """
  shape_a = [gemm.k, gemm.m] if gemm.transpose_a else [gemm.m, gemm.k]
  shape_b = [gemm.n, gemm.k] if gemm.transpose_b else [gemm.k, gemm.n]
  if gemm.batch > 1:
    shape_a, shape_b = [gemm.batch, *shape_a], [gemm.batch, *shape_b]
  a = tf.cast(tf.random.stateless_normal(shape_a, seed=[1, 2]), dtype)
  b = tf.cast(tf.random.stateless_normal(shape_b, seed=[3, 4]), dtype)

  def corner(x):
    return tf.cast(tf.reshape(x, [-1])[0], tf.float32)

  product = tf.function(lambda x, y: corner(
      tf.matmul(x, y, transpose_a=gemm.transpose_a, transpose_b=gemm.transpose_b)))
  call = tf.function(lambda x, y: corner(x) + corner(y))
  return max(benchmark_mfu.fastest_call(product, (a, b), warmup, repeats)
             - benchmark_mfu.fastest_call(call, (a, b), warmup, repeats), 0.0)


def measure_floor(case: benchmark.StepCase, repeats: int = 7) -> dict:
  """Times every GEMM of `step_gemms(case)` alone in the case's matmul dtype.

  Returns:
    dict with `gemms`: per GEMM its fields, `flops`, `seconds` (one run) and
    `step_seconds` (x count); `floor_seconds`, their sum; `flops`, the GEMMs' total.
  """
  dtype = benchmark_mfu.matmul_dtype(case.dtype_policy)
  rows = []
  for gemm in step_gemms(case):
    seconds = time_gemm(gemm, dtype, repeats=repeats)
    rows.append({**dataclasses.asdict(gemm), "flops": gemm.flops, "seconds": seconds,
                 "step_seconds": seconds * gemm.count})
  return {"gemms": rows, "floor_seconds": sum(r["step_seconds"] for r in rows),
          "flops": sum(r["flops"] for r in rows)}


def ratio_ceiling(peer_examples_per_second: float, batch_size: int,
                  floor_seconds: float) -> float:
  """The highest tfbert / peer examples/s ratio the floor allows: peer step / floor."""
  return batch_size / peer_examples_per_second / floor_seconds
