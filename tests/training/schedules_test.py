"""Tests for tfbert.training.schedules: golden learning rates computed by hand for both modes.

Every golden value below is written with its arithmetic; none is computed by the code under
test. Shared setting unless stated: init lr 1e-3, W = 10 warmup steps, T = 100 total steps.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfbert.training.schedules import WarmupPolynomialDecay, learning_rate_at

BASE = dict(learning_rate=1e-3, warmup_steps=10, total_steps=100)
# power 2, end 1e-4: decay(s) = (1e-3 - 1e-4) * (1 - progress)**2 + 1e-4 = 9e-4 * (...)**2 + 1e-4.
POWER2 = dict(BASE, end_learning_rate=1e-4, power=2.0)

GOOGLE_LINEAR = [  # lr = 1e-3 * step / 10 while step < 10, else 1e-3 * (1 - min(step, 100) / 100).
    (0, 0.0),        # 1e-3 * 0 / 10
    (9, 9e-4),       # 1e-3 * 9 / 10, the last warmup step
    (10, 9e-4),      # 1e-3 * (1 - 10/100): the decay on the *global* step, not 1e-3
    (55, 4.5e-4),    # 1e-3 * (1 - 55/100)
    (100, 0.0),      # 1e-3 * (1 - 100/100)
    (150, 0.0),      # min(150, 100) = 100, so as at step 100
]
HF_LINEAR = [  # lr = 1e-3 * step / 10 while step < 10, else 1e-3 * (1 - (step - 10) / 90).
    (0, 0.0),        # 1e-3 * 0 / 10
    (9, 9e-4),       # 1e-3 * 9 / 10
    (10, 1e-3),      # 1e-3 * (1 - 0/90): the peak is reached exactly at step W
    (55, 5e-4),      # 1e-3 * (1 - 45/90)
    (100, 0.0),      # 1e-3 * (1 - 90/90)
    (150, 0.0),      # clamped to end_learning_rate = 0 after T
]
GOOGLE_POWER2 = [
    (0, 0.0),        # 1e-3 * 0 / 10
    (5, 5e-4),       # 1e-3 * 5 / 10 (warmup ignores power and end_learning_rate)
    (10, 8.29e-4),   # 9e-4 * (1 - 10/100)**2 + 1e-4 = 9e-4 * 0.81 + 1e-4 = 7.29e-4 + 1e-4
    (55, 2.8225e-4),  # 9e-4 * 0.45**2 + 1e-4 = 9e-4 * 0.2025 + 1e-4 = 1.8225e-4 + 1e-4
    (100, 1e-4),     # 9e-4 * 0 + 1e-4
    (150, 1e-4),     # as step 100
]
HF_POWER2 = [
    (0, 0.0),        # 1e-3 * 0 / 10
    (5, 5e-4),       # 1e-3 * 5 / 10
    (10, 1e-3),      # 9e-4 * (1 - 0/90)**2 + 1e-4
    (55, 3.25e-4),   # 9e-4 * (1 - 45/90)**2 + 1e-4 = 9e-4 * 0.25 + 1e-4 = 2.25e-4 + 1e-4
    (70, 2e-4),      # 9e-4 * (1 - 60/90)**2 + 1e-4 = 9e-4 / 9 + 1e-4
    (100, 1e-4),     # 9e-4 * 0 + 1e-4
    (150, 1e-4),     # clamped after T
]
CASES = [
    ("google", BASE, GOOGLE_LINEAR), ("decay_after_warmup", BASE, HF_LINEAR),
    ("google", POWER2, GOOGLE_POWER2), ("decay_after_warmup", POWER2, HF_POWER2),
]
CASE_IDS = ["google-linear", "hf-linear", "google-power2", "hf-power2"]
# The TF schedule returns float32: relative rounding error <= 2**-24 ~ 6e-8; 1e-6 is slack
# for the float64 -> float32 cast, far below the smallest golden difference (~1e-5 rel).
FLOAT32_RTOL = 1e-6


@pytest.mark.parametrize("mode,args,table", CASES, ids=CASE_IDS)
def test_python_function_matches_hand_computed_table(mode, args, table):
  for step, want in table:
    assert learning_rate_at(step, mode=mode, **args) == pytest.approx(want, rel=1e-12,
                                                                       abs=1e-15), step


@pytest.mark.parametrize("mode,args,table", CASES, ids=CASE_IDS)
def test_schedule_matches_table_eagerly_and_in_tf_function_with_int64_steps(mode, args, table):
  schedule = WarmupPolynomialDecay(mode=mode, **args)
  traced = tf.function(schedule)
  for step, want in table:
    for dtype in (tf.int64, tf.int32, tf.float32):
      got = traced(tf.constant(step, dtype))
      assert got.dtype == tf.float32
      assert float(got) == pytest.approx(want, rel=FLOAT32_RTOL, abs=1e-12), (step, dtype)
    assert float(schedule(step)) == pytest.approx(want, rel=FLOAT32_RTOL, abs=1e-12), step


def test_google_rate_drops_at_end_of_warmup_when_warmup_squared_exceeds_total():
  # W = 10, T = 40: step 9 -> 1e-3 * 9/10 = 9e-4; step 10 -> 1e-3 * (1 - 10/40) = 7.5e-4.
  args = dict(learning_rate=1e-3, warmup_steps=10, total_steps=40)
  assert learning_rate_at(9, **args) == pytest.approx(9e-4, rel=1e-12)
  assert learning_rate_at(10, **args) == pytest.approx(7.5e-4, rel=1e-12)
  # Hugging Face: step 10 -> 1e-3 * (1 - 0/30) = 1e-3, no drop.
  assert learning_rate_at(10, mode="decay_after_warmup", **args) == pytest.approx(1e-3)


def test_no_warmup_starts_at_the_initial_rate():
  # W = 0: step 0 -> 1e-3 * (1 - 0/100) in both modes; step 50 -> 1e-3 * (1 - 50/100).
  for mode in ("google", "decay_after_warmup"):
    args = dict(learning_rate=1e-3, warmup_steps=0, total_steps=100, mode=mode)
    assert learning_rate_at(0, **args) == pytest.approx(1e-3, rel=1e-12)
    assert learning_rate_at(50, **args) == pytest.approx(5e-4, rel=1e-12)


def test_warmup_equal_to_total_steps_ends_at_end_learning_rate():
  # W = T = 10, end 1e-5: step 5 -> 1e-3 * 5/10; step 10 -> nothing left to decay over: 1e-5.
  for mode in ("google", "decay_after_warmup"):
    args = dict(learning_rate=1e-3, warmup_steps=10, total_steps=10, end_learning_rate=1e-5,
                mode=mode)
    assert learning_rate_at(5, **args) == pytest.approx(5e-4, rel=1e-12)
    assert learning_rate_at(10, **args) == pytest.approx(1e-5, rel=1e-12)
    assert float(WarmupPolynomialDecay(**args)(10)) == pytest.approx(1e-5, rel=FLOAT32_RTOL)


@pytest.mark.parametrize("mode", ["google", "decay_after_warmup"])
def test_schedule_agrees_with_python_function_at_every_step(mode):
  args = dict(POWER2, mode=mode, total_steps=37, warmup_steps=7)
  steps = tf.range(0, 45, dtype=tf.int64)
  got = tf.function(lambda s: tf.map_fn(WarmupPolynomialDecay(**args), s,
                                        fn_output_signature=tf.float32))(steps)
  want = [learning_rate_at(int(s), **args) for s in steps]
  assert got.numpy().tolist() == pytest.approx(want, rel=FLOAT32_RTOL, abs=1e-12)


def test_schedule_reads_a_keras_step_variable():
  step = keras.Variable(55, dtype="int64")  # As `optimizer.iterations`.
  assert float(WarmupPolynomialDecay(**BASE)(step)) == pytest.approx(4.5e-4, rel=FLOAT32_RTOL)


def test_get_config_round_trips_through_keras_serialization():
  schedule = WarmupPolynomialDecay(mode="decay_after_warmup", **POWER2)
  config = schedule.get_config()
  assert config == dict(learning_rate=1e-3, warmup_steps=10, total_steps=100,
                        end_learning_rate=1e-4, power=2.0, mode="decay_after_warmup")
  assert WarmupPolynomialDecay.from_config(config).get_config() == config
  restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
  assert isinstance(restored, WarmupPolynomialDecay)
  assert restored.get_config() == config


@pytest.mark.parametrize("overrides,message", [
    (dict(warmup_steps=101), "exceeds total_steps"),
    (dict(warmup_steps=-1), "warmup_steps >= 0"),
    (dict(total_steps=0, warmup_steps=0), "total_steps > 0"),
    (dict(learning_rate=-1e-3), "Learning rates must be >= 0"),
    (dict(end_learning_rate=-1e-5), "Learning rates must be >= 0"),
    (dict(power=0.0), "power must be > 0"),
    (dict(mode="nvidia"), "Unknown mode"),
    (dict(warmup_steps=2.5), "integer number of steps"),
    # Issue 47: 2.0 was taken as 2 (a count computed as a fraction is the caller's bug).
    (dict(warmup_steps=2.0), r"^warmup_steps must be an integer number of steps \(an int\), "
     r"got 2.0 \(float\)$"),
    (dict(total_steps=np.float64(100)), r"^total_steps must be .*got np.float64\(100.0\)"),
    (dict(total_steps=True), r"^total_steps must be .*got True \(bool\)$"),
    # Sweep 34, B42, B44: NaN passed `< 0` (every weight NaN after a step); inf was returned.
    (dict(learning_rate=float("nan")), r"^learning_rate must be a finite number, got nan$"),
    (dict(learning_rate=float("inf")), r"^learning_rate must be a finite number, got inf$"),
    (dict(end_learning_rate=float("nan")), r"^end_learning_rate must be a finite number"),
])
def test_invalid_arguments_raise_clear_errors(overrides, message):
  args = dict(BASE, **overrides)
  with pytest.raises(ValueError, match=message):
    WarmupPolynomialDecay(**args)
  with pytest.raises(ValueError, match=message):
    learning_rate_at(0, **args)


def test_a_negative_step_is_refused():
  """Sweep 34, B46: step -5 (warmup 2) gave the rate -0.0025."""
  with pytest.raises(ValueError, match=r"^step must be >= 0 \(the updates already applied\), "
                                       r"got -5$"):
    learning_rate_at(-5, **dict(BASE, warmup_steps=2))
  assert learning_rate_at(0, **BASE) >= 0.0
