"""A minimal custom training loop for optimizer tests: one `strategy.run` per micro-batch.

Each replica gets an equal slice of the micro-batch and minimizes its per-example mean loss
divided by the number of replicas, so the SUM all-reduce gives the micro-batch mean, as in
Keras' `fit`. The reference for "one big batch" is `reference_train`: one device, plain
inner optimizer, gradients clipped by `tf.clip_by_global_norm` if asked, which is the
textbook semantics that accumulation and data parallelism must reproduce.
"""

import functools
from typing import Callable, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf


@functools.lru_cache(maxsize=None)
def mirrored_strategy() -> tf.distribute.MirroredStrategy:
  """The session's one MirroredStrategy over the 2 logical CPUs (conftest.py).

  One instance per process: separate MirroredStrategy objects allocate collective instance
  keys independently, and their collectives then collide ("Shape mismatch in the collective
  instance 100") when both run in one process.
  """
  from tfbert.training.distribution import create_strategy
  return create_strategy("mirrored", 2)


def split_for_replicas(strategy, arrays):
  """Distributes equal contiguous slices of each array to the replicas."""
  def slice_for(ctx):
    n = ctx.num_replicas_in_sync
    return tuple(tf.constant(np.array_split(a, n)[ctx.replica_id_in_sync_group]) for a in arrays)
  return strategy.experimental_distribute_values_from_function(slice_for)


def make_step(strategy, model, optimizer, loss_fn, scale_loss: bool = False):
  """Returns a tf.function running one micro-step on per-replica inputs."""
  @tf.function
  def step(inputs):
    def replica_fn(*arrays):
      with tf.GradientTape() as tape:
        loss = loss_fn(model, *arrays) / strategy.num_replicas_in_sync
        scaled = optimizer.scale_loss(loss) if scale_loss else loss
      grads = tape.gradient(scaled, model.trainable_variables)
      optimizer.apply(grads, model.trainable_variables)
      return loss
    return strategy.run(replica_fn, args=inputs)
  return step


def accumulate_train(strategy, model_fn: Callable, optimizer, loss_fn,
                     windows: Sequence[Sequence[np.ndarray]], steps: int,
                     scale_loss: bool = False, poison: Optional[Callable] = None):
  """Trains with `steps` micro-batches per window under `strategy`; returns the model.

  Args:
    windows: one tuple of arrays per applied step (the big batch); each is cut into `steps`
      equal micro-batches in order.
    poison: optional `(window, micro, arrays) -> arrays` to corrupt a micro-batch.
  """
  with strategy.scope():
    model = model_fn()
    optimizer.build(model.trainable_variables)
  step = make_step(strategy, model, optimizer, loss_fn, scale_loss)
  for w, arrays in enumerate(windows):
    for m in range(steps):
      micro = tuple(np.array_split(a, steps)[m] for a in arrays)
      if poison is not None:
        micro = poison(w, m, micro)
      step(split_for_replicas(strategy, micro))
  return model


def reference_train(model_fn: Callable, optimizer, loss_fn, windows, clip_norm=None):
  """One device, one plain optimizer step per big batch, optional global-norm clipping."""
  model = model_fn()
  for arrays in windows:
    with tf.GradientTape() as tape:
      loss = loss_fn(model, *(tf.constant(a) for a in arrays))
    grads = tape.gradient(loss, model.trainable_variables)
    grads = [tf.convert_to_tensor(g) for g in grads]
    if clip_norm is not None:
      grads, _ = tf.clip_by_global_norm(grads, clip_norm)
    optimizer.apply(grads, model.trainable_variables)
  return model


def max_weight_diff(a: keras.Model, b: keras.Model) -> float:
  return max(float(np.max(np.abs(x.numpy() - y.numpy())))
             for x, y in zip(a.trainable_variables, b.trainable_variables))
