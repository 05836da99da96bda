"""Tests for tools.benchmarks.benchmark_floor: the step's GEMMs by hand and by TensorFlow's
gradients."""

import dataclasses

import pytest
import tensorflow as tf

from tfbert.layers import matmul
from tfbert_tools.benchmarks import benchmark, benchmark_floor, benchmark_mfu

# benchmark_mfu_test's hand-counted shapes: H=16, L=1, I=19, V=53, S=11, P=3, and 2 heads.
TINY = benchmark.StepCase(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=19,
                          vocab_size=53, seq_length=11, max_predictions=3, batch_size=1)


def _sizes(case):
  return dict(hidden_size=case.hidden_size, num_layers=case.num_layers,
              intermediate_size=case.intermediate_size, vocab_size=case.vocab_size,
              seq_length=case.seq_length, max_predictions=case.max_predictions)


def _flops(case):
  return sum(g.flops for g in benchmark_floor.step_gemms(case))


def test_pretraining_gemms_match_a_hand_count():
  # The last layer's queries run over F = 1 + P = 4 rows, keys and values over S = 11:
  #   key/value 11 * 2 * 16 * 32 = 11264; query 4 * 2 * 16 * 16 = 2048
  #   scores and context 2 * (2 * F * D * S * N) = 2 * 1408 = 2816
  #   attention output 4 * 2 * 256 = 2048; feed-forward 2 * (4 * 2 * 16 * 19) = 4864
  #   MLM transform 3 * 2 * 256 = 1536; logits 3 * 2 * 16 * 53 = 5088
  #   pooler 2 * 256 = 512; NSP classifier 2 * 16 * 2 = 64
  # forward 30240; x 3 (forward, input and weight gradients) = 90720.
  assert _flops(TINY) == 90720


def test_pretraining_gemms_are_the_mfu_count_less_the_unqueried_rows():
  # Odd sizes, 3 layers: the first two full, the last one with S - F rows of queries,
  # projections, feed-forward and scores fewer than benchmark_mfu counts.
  case = dataclasses.replace(TINY, num_layers=3, num_heads=3, hidden_size=15,
                             intermediate_size=23, seq_length=13, max_predictions=4,
                             batch_size=5, vocab_size=37)
  h, i, s, f = 15, 23, 13, 1 + 4
  unqueried = 3 * (s - f) * (4 * h * h + 4 * h * i + 4 * s * h)
  expected = 5 * (benchmark_mfu.training_flops_per_example("pretraining", **_sizes(case))
                  - unqueried)
  assert _flops(case) == expected


def test_squad_gemms_are_the_mfu_count():
  case = dataclasses.replace(TINY, task="squad", num_layers=2, num_heads=3, hidden_size=15,
                             seq_length=13, batch_size=3)
  assert _flops(case) == 3 * benchmark_mfu.training_flops_per_example("squad", **_sizes(case))


def test_layers_of_one_shape_are_merged():
  case = dataclasses.replace(TINY, num_layers=4)
  ffn = [g for g in benchmark_floor.step_gemms(case) if g.name == "feed-forward in: forward"]
  assert [(g.m, g.count) for g in ffn] == [(11, 3), (4, 1)]


def _matmul_layouts(forward, *operands):
  """(transpose_a, transpose_b) of every MatMul in the graph of forward and its gradients."""
  @tf.function
  def forward_and_backward(*args):
    with tf.GradientTape() as tape:
      tape.watch(args)
      y = forward(*args)
      loss = tf.reduce_sum(y * y)
    return tape.gradient(loss, args)

  graph = forward_and_backward.get_concrete_function(*operands).graph
  return sorted((op.get_attr("transpose_a"), op.get_attr("transpose_b"))
                for op in graph.get_operations() if op.type == "MatMul")


def _layouts(gemms):
  return sorted((g.transpose_a, g.transpose_b) for g in gemms)


def test_dense_layouts_are_tensorflows_gradient_layouts():
  x, w = tf.ones([5, 3]), tf.ones([3, 7])
  assert _layouts(benchmark_floor._trained("dense", 5, 3, 7)) == _matmul_layouts(
      tf.matmul, x, w)


@pytest.mark.parametrize("rows, columns", [(3, 7), (7, 3)])
def test_encoder_projection_layouts_are_tfbert_matmul_gradient_layouts(rows, columns):
  x, w = tf.ones([5, rows]), tf.ones([rows, columns])
  transposed = matmul.transposes_kernel(rows, columns, tf.float32)
  assert transposed == (rows <= columns)
  assert _layouts(benchmark_floor._trained("dense", 5, rows, columns, transposed_kernel=(
      transposed))) == _matmul_layouts(matmul.matmul, x, w)


@pytest.mark.parametrize("dtype_policy, transposed", [("float32", True),
                                                      ("mixed_bfloat16", False)])
def test_step_gemms_follow_the_encoder_matmul_per_dtype(dtype_policy, transposed):
  # TINY: H 16 <= I 19, so feed-forward in narrows (transposed in float32), out does not.
  case = dataclasses.replace(TINY, dtype_policy=dtype_policy)
  gradients = {g.name: g.transpose_b for g in benchmark_floor.step_gemms(case)
               if g.name.endswith("input gradient")}
  for name in ("key/value", "query", "attention output", "feed-forward in"):
    assert gradients[f"{name}: input gradient"] is not transposed, name
  assert gradients["feed-forward out: input gradient"]
  assert gradients["MLM transform: input gradient"]  # A Keras Dense: TensorFlow's gradient.


def test_mlm_logits_layouts_are_tensorflows_gradient_layouts():
  x, table = tf.ones([5, 3]), tf.ones([7, 3])
  logits = [g for g in benchmark_floor.step_gemms(TINY) if g.name.startswith("MLM logits")]
  assert _layouts(logits) == _matmul_layouts(
      lambda a, b: tf.matmul(a, b, transpose_b=True), x, table)


# ~0.8 GFLOP each. At 0.1 GFLOP an AMX core (Intel Xeon, family 6 model 207) ran a bfloat16
# product in 0.06-0.6 ms, no longer clearly above the ~0.1 ms call overhead time_gemm
# subtracts: CI once timed it at 0. At 0.8 GFLOP the same core takes 1.8-2.1 ms; a CPU
# without bfloat16 units takes longer still.
@pytest.mark.parametrize("gemm", [
    benchmark_floor.Gemm("plain", 768, 513, 1023),
    benchmark_floor.Gemm("both transposed", 768, 513, 1023, transpose_a=True, transpose_b=True),
    benchmark_floor.Gemm("batched", 768, 513, 341, transpose_b=True, batch=3),
])
def test_time_gemm_runs_every_layout(gemm):
  assert benchmark_floor.time_gemm(gemm, "bfloat16") > 0


def test_floor_is_the_sum_of_the_timed_gemms_times_their_counts():
  floor = benchmark_floor.measure_floor(dataclasses.replace(TINY, num_layers=2), repeats=3)
  rows = floor["gemms"]
  # Products of a few thousand FLOPs may time at 0 once the call overhead is subtracted.
  assert all(r["step_seconds"] == r["seconds"] * r["count"] >= 0 for r in rows)
  assert floor["floor_seconds"] == pytest.approx(sum(r["step_seconds"] for r in rows),
                                                 rel=1e-12)
  assert floor["flops"] == _flops(dataclasses.replace(TINY, num_layers=2))


def test_ratio_ceiling_is_the_peer_step_over_the_floor():
  # 10 examples/s at batch 32 is a 3.2 s step; over a 1.6 s floor: 2.0.
  assert benchmark_floor.ratio_ceiling(10.0, 32, 1.6) == pytest.approx(2.0)
