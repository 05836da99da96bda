"""Tests for tfbert.tasks.precision: the check that this CPU computes BERT right in a
reduced-precision policy, and that a run refuses a policy that fails it."""

import re

import keras
import pytest
import tensorflow as tf

from tfbert.layers import heads
from tfbert.tasks import precision


@pytest.mark.parametrize("dtype", ["mixed_float16", "mixed_bfloat16"])
def test_this_cpu_passes_the_check_with_every_tensor_compared(dtype):
  errors = precision.check_policy(dtype)
  # Outputs (5) and a gradient for every trainable variable of the check model.
  assert len(errors) == 37 and sum(name.startswith("gradient") for name in errors) == 32
  assert max(errors.values()) <= precision.TOLERANCES[dtype]
  # Really reduced: every compared output moved by more than float32 rounding.
  assert min(errors[name] for name in ("mlm_logits", "nsp_logits", "start_logits")) > 1e-5


def test_float32_is_the_reference_and_an_unknown_policy_is_refused():
  assert precision.check_policy("float32") == {}
  with pytest.raises(ValueError, match="dtype must be one of"):
    precision.set_policy("float16")


def _wrong_in_float16(monkeypatch):
  """Makes the output projections wrong in float16 only, as the einsum was on AVX512_FP16."""
  right = heads._OutputProjection.call

  def call(self, x):
    logits = right(self, x)
    return logits + tf.cast(x.dtype == tf.float16, tf.float32) * tf.reduce_max(
        tf.abs(logits)) * tf.sin(logits * 7.0)
  monkeypatch.setattr(heads._OutputProjection, "call", call)


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_a_kernel_wrong_in_float16_only_is_refused_in_one_line(monkeypatch):
  _wrong_in_float16(monkeypatch)
  with pytest.raises(precision.PrecisionError) as raised:
    precision.check_policy.__wrapped__("mixed_float16")
  message = str(raised.value)
  assert "\n" not in message and "mixed_float16" in message
  assert "use mixed_bfloat16 or float32" in message
  # The worst tensor is named: one of the projection heads' outputs or weights.
  assert re.search(r"(nsp|start|end)_logits|(span|nsp)_head/output_", message), message
  precision.check_policy.__wrapped__("mixed_bfloat16")  # bfloat16 is still right.


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_a_non_finite_gradient_is_refused_too(monkeypatch):
  """NaN in one tensor among finite ones: the check must not pass over it."""
  right = heads.SpanHead.call

  def call(self, x):
    out = right(self, x)
    nan = tf.cast(x.dtype == tf.float16, tf.float32) * float("nan")
    return {**out, "end_logits": out["end_logits"] + nan}
  monkeypatch.setattr(heads.SpanHead, "call", call)
  with pytest.raises(precision.PrecisionError, match=r"end_logits is off float32 by nan"):
    precision.check_policy.__wrapped__("mixed_float16")


def test_set_policy_checks_before_it_sets(monkeypatch):
  _wrong_in_float16(monkeypatch)
  monkeypatch.setattr(precision, "check_policy", precision.check_policy.__wrapped__)
  with pytest.raises(precision.PrecisionError):
    precision.set_policy("mixed_float16")
  assert keras.mixed_precision.global_policy().name == "float32"
  precision.set_policy("mixed_bfloat16")
  assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"


def test_the_check_leaves_the_callers_random_streams_alone():
  import random
  random.seed(4)
  want = [random.random() for _ in range(3)]
  random.seed(4)
  precision.check_policy.__wrapped__("mixed_bfloat16")
  assert [random.random() for _ in range(3)] == want
