"""Runs a command as a localhost MultiWorkerMirroredStrategy cluster of processes.

Used by the alignment harness (2 worker processes vs 1 process) and the multi-worker tests.
This module does not import TensorFlow, so a launcher stays light.
"""

import json
import os
import socket
import subprocess
import time
from typing import Callable, Optional


def free_ports(count: int) -> list[int]:
  """Ports on 127.0.0.1 that were free a moment ago."""
  sockets = [socket.socket() for _ in range(count)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def tf_config(ports: list[int], index: int) -> str:
  """TF_CONFIG for worker `index` of a localhost cluster on `ports`."""
  return json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                     "task": {"type": "worker", "index": index}})


# What starts a worker process: `subprocess.Popen`, or anything with its interface (`args`,
# `env`, `cwd`, `stdout`, `stderr`, `text`; `communicate`, `poll`, `kill`, `wait`). The
# test suite forks its workers from a process that has imported TensorFlow once
# (tests/forked.py).
POPEN: Callable[..., subprocess.Popen] = subprocess.Popen


def launch_workers(command: list[str], num_workers: int = 2, timeout: float = 300.0,
                   cwd: str = ".", env: Optional[dict] = None,
                   popen: Optional[Callable[..., subprocess.Popen]] = None
                   ) -> list[subprocess.CompletedProcess]:
  """Runs `command` as `num_workers` workers on localhost (TF_CONFIG set for each).

  Args:
    command: the worker's command line (the same for every worker).
    num_workers: processes to start.
    timeout: seconds to wait for all of them; leftovers are then killed.
    cwd: working directory of the workers.
    env: their environment (default: this process's), TF_CONFIG added.
    popen: what starts each process (default `POPEN`, which is `subprocess.Popen`).

  Returns:
    One `CompletedProcess` per worker, stdout and stderr merged into `stdout`.

  A worker blocked on its peer ignores SIGTERM (docs/pitfalls.md), so leftovers get SIGKILL.
  """
  ports = free_ports(num_workers)
  procs = []
  try:
    for index in range(num_workers):
      worker_env = dict(os.environ if env is None else env, TF_CONFIG=tf_config(ports, index))
      procs.append((popen or POPEN)(command, env=worker_env, cwd=cwd, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True))
    deadline = time.monotonic() + timeout
    results = []
    for proc in procs:
      out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
      results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out))
    return results
  finally:
    for proc in procs:
      if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)
