"""What SQuAD and classifier fine-tuning share: reproducible epochs and the `fit` loop.

`fit_steps` runs Keras `fit` for a number of *applied* steps of `k` micro-batches each on an
endless dataset from `epoch_shuffled`, whose order is a pure function of the seed and the
epoch. That makes k micro-batches of b examples see exactly the examples of one batch of
k*b, so accumulation is an exact replacement for the big batch (tests/fine_tuning_test.py
and the k=1 vs k=4 tests of squad_run_test.py and classifier_run_test.py).

Why not `shuffle(reshuffle_each_iteration=True).repeat()`: every new iterator over such a
dataset draws a new order, and Keras' `fit`, when the model was built in a distribution
strategy's scope, makes one iterator to build the model from a first batch before making the
one it trains on. The training order then depended on the batch size, so a 4 x 8 run
trained on other examples in other windows than the 32 run it was compared with.
"""

import math
import time
from typing import Sequence

import keras
import tensorflow as tf


def epoch_shuffled(dataset: tf.data.Dataset, size: int, seed: int) -> tf.data.Dataset:
  """`dataset` repeated forever, each epoch a permutation fixed by (`seed`, epoch).

  Every iterator over the result yields the same sequence, whatever was created or consumed
  before it (unlike a stateful shuffle). An epoch is held in memory as one batch, as a full
  shuffle buffer would hold it.

  Args:
    dataset: A finite dataset of `size` elements (any structure of tensors).
    size: Its number of elements (> 0).
    seed: The shuffling seed.

  Returns:
    An endless tf.data.Dataset with the elements of `dataset`.
  """
  if size < 1:
    raise ValueError(f"cannot shuffle an empty dataset (size {size})")
  whole = dataset.batch(size).take(1).cache()  # One element: every example.

  def epoch(index):
    def permute(*batch):
      count = tf.shape(tf.nest.flatten(batch)[0])[0]
      keys = tf.random.stateless_uniform([count], seed=tf.stack(
          [tf.constant(seed, tf.int64), index]))
      order = tf.argsort(keys)
      permuted = tf.nest.map_structure(lambda t: tf.gather(t, order), batch)
      return permuted if len(batch) > 1 else permuted[0]
    return whole.map(permute).unbatch()

  return tf.data.Dataset.counter().flat_map(epoch)


class TrainingMonitor(keras.callbacks.Callback):
  """Stops after `steps` applied steps, fails fast on a non-finite loss, times the run.

  Args:
    steps: applied (optimizer) steps to run.
    batch_size: examples per applied step.
    check_finite: raise FloatingPointError on a non-finite loss (off for mixed_float16,
      whose loss scaling skips overflowing steps by design).
  """

  def __init__(self, steps: int, batch_size: int, check_finite: bool = True):
    super().__init__()
    self.steps, self.batch_size, self.check_finite = steps, batch_size, check_finite
    self.micro_steps, self.first_step_end, self.end, self.last_logs = 0, None, None, {}

  def on_train_batch_end(self, batch, logs=None):
    self.micro_steps += 1
    self.last_logs = dict(logs or {})
    loss = self.last_logs.get("loss")
    if self.check_finite and loss is not None and not math.isfinite(loss):
      raise FloatingPointError(f"non-finite loss ({loss}) at micro-step {self.micro_steps} "
                               f"(applied step {self._applied() + 1} of {self.steps})")
    applied = self._applied()
    if applied >= 1 and self.first_step_end is None:
      self.first_step_end = (time.perf_counter(), applied)
    if applied >= self.steps:
      self.end = (time.perf_counter(), applied)
      self.model.stop_training = True

  def _applied(self) -> int:
    return int(self.model.optimizer.iterations.numpy())

  def summary(self) -> dict[str, float]:
    """Last logs, applied steps and examples/s after the first (tracing) step."""
    result = {k: float(v) for k, v in self.last_logs.items()}
    result["steps"] = self._applied()
    if hasattr(self.model.optimizer, "dynamic_scale"):
      result["loss_scale"] = float(self.model.optimizer.dynamic_scale.numpy())
    if self.first_step_end and self.end and self.end[1] > self.first_step_end[1]:
      seconds = self.end[0] - self.first_step_end[0]
      result["examples_per_second"] = (
          (self.end[1] - self.first_step_end[1]) * self.batch_size / seconds)
    print("trained " + " ".join(f"{k}={v:.4g}" for k, v in result.items()), flush=True)
    return result


def fit_steps(model: keras.Model, dataset: tf.data.Dataset, *, steps: int,
              accumulation_steps: int, num_examples: int, batch_size: int,
              check_finite: bool = True, verbose: int = 1,
              callbacks: Sequence[keras.callbacks.Callback] = ()) -> dict[str, float]:
  """Runs the compiled `model` for `steps` applied steps; returns `TrainingMonitor.summary`.

  Args:
    model: A model compiled with a `tfbert.optimization` stack.
    dataset: Endless micro-batches of `batch_size // accumulation_steps` examples.
    steps: Applied (optimizer) steps.
    accumulation_steps: Micro-batches per applied step (k).
    num_examples: Examples per epoch (for Keras' epoch length and progress bar).
    batch_size: Examples per applied step (all micro-batches and replicas).
    check_finite: See `TrainingMonitor`.
    verbose: Keras' progress bar setting.
    callbacks: More callbacks (TensorBoard, ...).
  """
  k = accumulation_steps
  # Keras epochs of whole windows, about one pass over the data; the iterator (and so the
  # data order) carries across Keras epochs.
  per_epoch = max(k, num_examples // (batch_size // k) // k * k)
  monitor = TrainingMonitor(steps, batch_size, check_finite=check_finite)
  model.fit(dataset, epochs=math.ceil(steps * k / per_epoch), steps_per_epoch=per_epoch,
            shuffle=False, verbose=verbose, callbacks=[monitor, *callbacks])
  return monitor.summary()
