"""Warmup + polynomial-decay learning rates, as pure functions of the applied optimizer step.

"Linear warmup, then polynomial decay" has four incompatible definitions among the BERT
anchors. With initial rate `lr`, end rate `end`, `W` warmup steps, `T` total steps, power `p`
and `decay(s, L) = (L - end) * (1 - min(s, T) / T)**p + end` (`tf.train.polynomial_decay`
with `cycle=False`):

1. Google (google-research/bert `optimization.create_optimizer`): `decay(step, lr)` on the
   *global* step, overridden by `lr * step / W` while `step < W`. The warmup peaks near `lr`
   at step `W - 1`, then the rate *drops* to `decay(W, lr) = lr * (1 - W / T)` at step `W`.
2. Hugging Face (`transformers.get_polynomial_decay_schedule_with_warmup`, and
   `get_linear_schedule_with_warmup` for p = 1, end = 0): `lr * step / W` while `step < W`,
   then decay over the remaining `T - W` steps:
   `(lr - end) * (1 - (step - W) / (T - W))**p + end`, and `end` from step `T` on. Peaks at
   exactly `lr` at step `W`; continuous.
3. Model Garden (official/modeling/optimization/lr_schedule.py `LinearWarmup` around a
   `PolynomialDecay` on the global step): warms up linearly to the *already decayed* value
   `decay(W, lr)`, so it never reaches `lr`; continuous.
4. NVIDIA (DeepLearningExamples TensorFlow/LanguageModeling/BERT `optimization.py`): Google's
   formula with the decay's initial rate rescaled to `lr / (1 - W / T)` ("avoid step change
   in learning rate at end of warmup"), so the decay passes through `lr` at step `W`.

Implemented here: mode "google" (1) and mode "decay_after_warmup" (2). `step` is the number of
updates already applied (`optimizer.iterations`): the first update uses the rate at step 0,
which in both modes is 0 when `W > 0`, as in google-research/bert.

The formula is written once (`_formula`) over a tiny op table, so the pure-Python
`learning_rate_at` and the TensorFlow `WarmupPolynomialDecay` cannot drift apart. The TF
version computes in float64 and returns float32, so it differs from a float64 evaluation by
at most float32 rounding (google-research/bert itself computes in float32).
"""

from typing import Callable, NamedTuple

import keras
import tensorflow as tf

from tfbert.runtime import validation

MODES = ("google", "decay_after_warmup")


class _Ops(NamedTuple):
  """The three non-arithmetic operations `_formula` needs, for Python floats or tensors."""
  minimum: Callable
  maximum: Callable
  where: Callable


_PYTHON_OPS = _Ops(min, max, lambda cond, a, b: a if cond else b)
_TF_OPS = _Ops(tf.minimum, tf.maximum,
               lambda cond, a, b: tf.where(cond, tf.cast(a, tf.float64), tf.cast(b, tf.float64)))


def _formula(step, ops: _Ops, learning_rate: float, warmup_steps: int, total_steps: int,
             end_learning_rate: float, power: float, mode: str):
  """The learning rate at `step` (a float, or a float64 tensor with `_TF_OPS`)."""
  # Case 1: warmup, identical in both modes (google-research/bert: init_lr * step / W).
  warmup_lr = learning_rate * step / max(warmup_steps, 1)
  # Case 2: polynomial decay; `progress` in [0, 1] is how far along the decay we are.
  if mode == "google":
    progress = ops.minimum(step, float(total_steps)) / total_steps
  elif total_steps > warmup_steps:
    decay_steps = float(total_steps - warmup_steps)
    progress = ops.minimum(ops.maximum(step - warmup_steps, 0.0), decay_steps) / decay_steps
  else:  # decay_after_warmup with W == T: nothing left to decay over, so `end` after warmup.
    progress = 1.0
  decayed_lr = (learning_rate - end_learning_rate) * (1.0 - progress)**power + end_learning_rate
  # Case 3: which of the two applies (the comparison google-research/bert makes in int32).
  return ops.where(step < warmup_steps, warmup_lr, decayed_lr)


def _as_steps(name: str, value) -> int:
  """`value`, the step count `name`, as a plain int: an integer (`validation.is_int`: NumPy's
  too), never a float (2.0 neither: a count computed as a fraction is a caller's bug) nor a
  bool."""
  if not validation.is_int(value):
    raise ValueError(f"{name} must be an integer number of steps (an int), got {value!r} "
                     f"({type(value).__name__})")
  return int(value)


def _validated(learning_rate, warmup_steps, total_steps, end_learning_rate, power,
               mode) -> dict:
  """Checks the schedule arguments and returns them normalized, as keyword arguments.

  Raises:
    ValueError: On a negative rate or step count, `total_steps <= 0`,
      `warmup_steps > total_steps`, `power <= 0` or an unknown `mode`.
  """
  warmup_steps = _as_steps("warmup_steps", warmup_steps)
  total_steps = _as_steps("total_steps", total_steps)
  if mode not in MODES:
    raise ValueError(f"Unknown mode {mode!r}; expected one of {MODES}")
  for name, rate in (("learning_rate", learning_rate), ("end_learning_rate", end_learning_rate),
                     ("power", power)):
    # NaN passed `< 0` and trained every weight to NaN (sweep 34, B42, B44).
    if not validation.finite_number(rate):
      raise ValueError(f"{name} must be a finite number, got {rate!r}")
  if learning_rate < 0 or end_learning_rate < 0:
    raise ValueError(f"Learning rates must be >= 0, got learning_rate={learning_rate}, "
                     f"end_learning_rate={end_learning_rate}")
  if warmup_steps < 0 or total_steps <= 0:
    raise ValueError(f"Need warmup_steps >= 0 and total_steps > 0, got "
                     f"warmup_steps={warmup_steps}, total_steps={total_steps}")
  if warmup_steps > total_steps:
    raise ValueError(f"warmup_steps={warmup_steps} exceeds total_steps={total_steps}")
  if power <= 0:
    raise ValueError(f"power must be > 0, got {power}")
  return dict(learning_rate=float(learning_rate), warmup_steps=warmup_steps,
              total_steps=total_steps, end_learning_rate=float(end_learning_rate),
              power=float(power), mode=mode)


def learning_rate_at(step: int, learning_rate: float, warmup_steps: int, total_steps: int,
                     end_learning_rate: float = 0.0, power: float = 1.0,
                     mode: str = "google") -> float:
  """The learning rate after `step` applied updates, in pure Python (float64).

  Args: as `WarmupPolynomialDecay`, plus `step`, the number of updates already applied.

  Returns:
    The learning rate as a Python float.

  Raises:
    ValueError: On invalid schedule arguments (see `WarmupPolynomialDecay`).
  """
  args = _validated(learning_rate, warmup_steps, total_steps, end_learning_rate, power, mode)
  if _as_steps("step", step) < 0:  # -5 gave a negative rate (sweep 34, B46).
    raise ValueError(f"step must be >= 0 (the updates already applied), got {step!r}")
  return float(_formula(float(step), _PYTHON_OPS, **args))


@keras.saving.register_keras_serializable(package="tfbert")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
  """Linear warmup then polynomial decay; see the module docstring for the two modes.

  Args:
    learning_rate: Peak (initial) learning rate, >= 0.
    warmup_steps: Number of warmup steps W, 0 <= W <= total_steps.
    total_steps: Number of training steps T > 0; the rate is `end_learning_rate` from T on.
    end_learning_rate: Rate at the end of the decay, >= 0.
    power: Exponent of the polynomial decay, > 0 (1.0 is linear).
    mode: "google" (google-research/bert) or "decay_after_warmup" (Hugging Face).

  Raises:
    ValueError: On a negative rate or step count, `total_steps <= 0`,
      `warmup_steps > total_steps`, `power <= 0` or an unknown `mode`.
  """

  def __init__(self, learning_rate: float, warmup_steps: int, total_steps: int,
               end_learning_rate: float = 0.0, power: float = 1.0, mode: str = "google"):
    super().__init__()
    args = _validated(learning_rate, warmup_steps, total_steps, end_learning_rate, power, mode)
    self.learning_rate = args["learning_rate"]
    self.warmup_steps = args["warmup_steps"]
    self.total_steps = args["total_steps"]
    self.end_learning_rate = args["end_learning_rate"]
    self.power = args["power"]
    self.mode = args["mode"]

  def __call__(self, step):
    """Args: step: int or float scalar Tensor (or Variable), the applied steps.

    Returns: float32 scalar Tensor.
    """
    with tf.name_scope("warmup_polynomial_decay"):
      step = tf.cast(tf.convert_to_tensor(step), tf.float64)
      return tf.cast(_formula(step, _TF_OPS, **self.get_config()), tf.float32)

  def get_config(self) -> dict:
    return dict(learning_rate=self.learning_rate, warmup_steps=self.warmup_steps,
                total_steps=self.total_steps, end_learning_rate=self.end_learning_rate,
                power=self.power, mode=self.mode)
