"""Tests for tools.benchmarks.benchmark_mfu: the FLOP count by hand, the matmul peak, MFU
arithmetic."""

import time

import pytest

from tfbert_tools.benchmarks import benchmark_mfu

TINY = dict(hidden_size=16, num_layers=1, intermediate_size=19, vocab_size=53, seq_length=11,
            max_predictions=3)


def test_pretraining_flops_match_a_hand_count():
  # H=16, L=1, I=19, V=53, S=11, P=3, per token and layer:
  #   projections 4H^2 = 1024, feed-forward 2HI = 608 -> 2 * 1632 = 3264 FLOPs
  #   attention 2 * 2 * S * H = 4 * 11 * 16 = 704                        -> 3968 per token
  #   encoder: L * S * 3968 = 43648
  # MLM, per position: 2H^2 = 512 + 2HV = 1696 -> 2208, x P = 3 -> 6624
  # NSP: 2H^2 = 512 + 2 * 2H = 64 -> 576
  # forward 43648 + 6624 + 576 = 50848; training x 3 = 152544
  assert benchmark_mfu.forward_flops_per_example("pretraining", **TINY) == 50848
  assert benchmark_mfu.training_flops_per_example("pretraining", **TINY) == 152544


def test_squad_flops_match_a_hand_count():
  # encoder 43648 (above) + span head 2 * 2H per token = 64 x S = 11 -> 704: 44352, x 3.
  assert benchmark_mfu.training_flops_per_example("squad", **TINY) == 133056


def test_flops_refuse_an_unknown_task():
  with pytest.raises(ValueError, match="task"):
    benchmark_mfu.forward_flops_per_example("glue", **TINY)


def test_each_policy_is_measured_against_its_matmul_dtype():
  assert benchmark_mfu.matmul_dtype("float32") == "float32"
  assert benchmark_mfu.matmul_dtype("mixed_bfloat16") == "bfloat16"
  with pytest.raises(ValueError, match="dtype policy"):
    benchmark_mfu.matmul_dtype("mixed_float16")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_matmul_peak_is_a_positive_rate(dtype):
  assert benchmark_mfu.measure_matmul_peak(dtype, size=128, warmup=1, repeats=3) > 0


def test_utilisation_is_achieved_over_peak():
  # 10 examples/s x 2e9 FLOPs = 20 GFLOP/s, a quarter of an 80 GFLOP/s peak.
  assert benchmark_mfu.utilisation(10.0, 2e9, 80.0) == pytest.approx((20.0, 0.25))


def test_fastest_call_is_the_minimum_after_warmup():
  # Two warm-up calls of 0.2 s are not timed; of 30, 10 and 50 ms the fastest is ~10 ms.
  sleeps = iter([0.2, 0.2, 0.03, 0.01, 0.05])
  seconds = benchmark_mfu.fastest_call(lambda: time.sleep(next(sleeps)) or 0.0, (),
                                       warmup=2, repeats=3)
  assert 0.01 <= seconds < 0.03
  assert next(sleeps, None) is None
