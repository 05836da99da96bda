"""Tests for tools.benchmarks.benchmark_kernels: each pair computes the same function; timing
runs."""

import numpy as np
import pytest
import tensorflow as tf

from tfbert_tools.benchmarks import benchmark_kernels

# Odd, small shapes.
CASES = benchmark_kernels.default_cases(rows=251, hidden=13, intermediate=37, masked=9,
                                        vocab=101)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kernel_and_reference_compute_the_same_values_and_gradients(case):
  inputs = case.make_inputs()
  got, want = case.kernel(*inputs), case.reference(*inputs)
  assert len(got) == len(want)
  for g, w in zip(got, want):
    g, w = (np.asarray(tf.cast(t, tf.float64)) for t in (g, w))
    assert g.shape == w.shape
    scale = max(1.0, float(np.max(np.abs(w))))
    # Relative to the largest value. float32: other op orders and XLA's tanh, a few ulps
    # (measured <= 1.6e-6). bfloat16: the reference rounds to bfloat16 after every op
    # (2^-8 relative each) and tfbert once; gradients pass several such roundings (measured
    # <= 1.6e-2).
    low = "bfloat16" in case.name
    np.testing.assert_allclose(g, w, atol=(3e-2 if low else 5e-6) * scale, err_msg=case.name)


@pytest.mark.slow
def test_measure_alternates_and_reports_a_speedup():
  result = benchmark_kernels.measure(CASES[0], repeats=1, calls=1)
  assert result.kernel_ms > 0 and result.reference_ms > 0
  assert result.speedup == pytest.approx(result.reference_ms / result.kernel_ms)
  table = benchmark_kernels.format_results([result])
  assert CASES[0].name in table and table.count("\n") == 2
