"""Tests for tfbert.training.workers: a localhost cluster of processes, each told its place."""

import json
import socket
import sys

import pytest

from tfbert.training import workers


def test_tf_config_names_the_localhost_cluster():
  config = json.loads(workers.tf_config([1111, 2222], 1))
  assert config == {"cluster": {"worker": ["127.0.0.1:1111", "127.0.0.1:2222"]},
                    "task": {"type": "worker", "index": 1}}


def test_free_ports_are_distinct_and_bindable():
  ports = workers.free_ports(3)
  assert len(set(ports)) == 3
  for port in ports:
    with socket.socket() as s:
      s.bind(("127.0.0.1", port))


def test_each_worker_gets_its_own_index_and_the_same_cluster(tmp_path):
  script = "import os, json; c = json.loads(os.environ['TF_CONFIG']); " \
           "print(c['task']['index'], ','.join(c['cluster']['worker']), os.environ['EXTRA'])"
  results = workers.launch_workers([sys.executable, "-c", script], num_workers=3,
                                   timeout=60, cwd=str(tmp_path), env={"EXTRA": "x"})
  lines = [r.stdout.split() for r in results]
  assert [r.returncode for r in results] == [0, 0, 0]
  assert [line[0] for line in lines] == ["0", "1", "2"]
  assert len({line[1] for line in lines}) == 1 and lines[0][1].count("127.0.0.1:") == 3
  assert {line[2] for line in lines} == {"x"}


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_a_worker_that_hangs_is_killed_at_the_timeout():
  with pytest.raises(Exception) as raised:
    workers.launch_workers([sys.executable, "-c", "import time; time.sleep(60)"],
                           num_workers=2, timeout=1)
  assert "timed out" in str(raised.value).lower()
