"""Tests for tfbert.training.distribution."""

import pytest

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
