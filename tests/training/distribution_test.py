"""Tests for tfbert.training.distribution."""

import re

import numpy as np
import pytest
import tensorflow as tf

from tfbert.training import distribution


def test_strategies_over_the_sessions_logical_cpus():
  # conftest.py configured 2 logical CPUs; asking for the same count again is a no-op.
  distribution.configure_cpu_devices(2)
  mirrored = distribution.create_strategy("mirrored", 2)
  assert mirrored.num_replicas_in_sync == 2
  assert distribution.worker_info(mirrored) == (1, 0, True)
  one = distribution.create_strategy("one_device")
  assert one.num_replicas_in_sync == 1 and distribution.worker_info(one) == (1, 0, True)


def test_clear_errors():
  with pytest.raises(RuntimeError, match="already initialized with 2 logical CPU devices; 3"):
    distribution.configure_cpu_devices(3)
  with pytest.raises(ValueError, match="3 devices asked for, 2 available"):
    distribution.create_strategy("mirrored", 3)
  with pytest.raises(ValueError, match="must be one of"):
    distribution.create_strategy("tpu")


def test_multi_worker_needs_tf_config(monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  with pytest.raises(ValueError, match="TF_CONFIG"):
    distribution.create_strategy("multi_worker")


def _replica_batches(batches, strategy, count):
  """The first `count` per-replica values of `batches`, as lists of numpy arrays, read in a
  tf.function as the training loop reads them."""

  @tf.function
  def read(iterator):
    return [strategy.experimental_local_results(next(iterator)) for _ in range(count)]

  return [[t.numpy().tolist() for t in value] for value in read(batches)]


def _dataset():
  return tf.data.Dataset.range(1000).shuffle(50, seed=7).batch(3).prefetch(2)


def test_local_batches_deal_a_workers_batches_as_a_distributed_dataset_does():
  strategy = distribution.create_strategy("mirrored", 2)
  ours = _replica_batches(distribution.LocalBatches(strategy, _dataset()), strategy, 4)
  theirs = _replica_batches(
      iter(strategy.distribute_datasets_from_function(lambda context: _dataset())), strategy, 4)
  assert ours == theirs
  flat = [x for value in ours for batch in value for x in batch]
  assert len(set(flat)) == len(flat) == 4 * 2 * 3  # Every replica its own examples.


def test_local_batches_resume_from_a_checkpoint_at_the_same_position(tmp_path):
  strategy = distribution.create_strategy("mirrored", 2)
  batches = distribution.LocalBatches(strategy, _dataset())
  _replica_batches(batches, strategy, 3)
  path = tf.train.Checkpoint(data_position=batches.iterator).save(str(tmp_path / "ckpt"))
  expected = _replica_batches(batches, strategy, 2)
  resumed = distribution.LocalBatches(strategy, _dataset())
  tf.train.Checkpoint(data_position=resumed.iterator).restore(path).assert_consumed()
  assert _replica_batches(resumed, strategy, 2) == expected
  fresh = distribution.LocalBatches(strategy, _dataset())
  assert _replica_batches(fresh, strategy, 2) != expected  # The position, not the start.


@pytest.mark.parametrize("name", distribution.STRATEGIES)
@pytest.mark.parametrize("num_devices", [0, -2, 1.0, "2", True, None])
def test_num_devices_below_one_or_not_an_int_is_refused_for_every_strategy(
    name, num_devices, monkeypatch):
  # Sweep 34, B107-B109: ("mirrored", 0) and ("mirrored", -2) gave 1 replica silently, and
  # ("one_device", 0) raised an IndexError.
  monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["localhost:1"]}, '
                     '"task": {"type": "worker", "index": 0}}')
  with pytest.raises(ValueError, match=f"^num_devices must be an int >= 1, got "
                                       f"{re.escape(repr(num_devices))}$"):
    distribution.create_strategy(name, num_devices)


def test_a_numpy_int_num_devices_is_an_int():
  assert distribution.create_strategy("mirrored", np.int64(2)).num_replicas_in_sync == 2
