"""Runs one MultiWorkerMirroredStrategy worker for tests; launched as a subprocess.

  python -m tests.multi_worker OUTPUT.npz STEPS OPTIMIZER

TF_CONFIG (set by the launching test) names the cluster and this worker's index. The worker
trains the accumulation test's model on its slice of every micro-batch and writes its final
weights and counters to OUTPUT.npz.
"""

import json
import os
import socket
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def free_ports(count: int) -> list[int]:
  """Ports on 127.0.0.1 that were free a moment ago."""
  sockets = [socket.socket() for _ in range(count)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def launch_workers(args: list[str], num_workers: int = 2, timeout: float = 300.0,
                   cwd: str = ".") -> list[subprocess.CompletedProcess]:
  """Starts `num_workers` workers on localhost, waits at most `timeout` s, kills leftovers.

  A worker blocked on its peer ignores SIGTERM (PITFALLS.md), so leftovers get SIGKILL by PID.
  """
  ports = free_ports(num_workers)
  cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
  procs = []
  try:
    for index in range(num_workers):
      env = dict(os.environ, TF_CONFIG=json.dumps(
          {"cluster": cluster, "task": {"type": "worker", "index": index}}))
      procs.append(subprocess.Popen([sys.executable, "-m", "tests.multi_worker", *args,
                                     str(index)], env=env, cwd=cwd, stdout=subprocess.PIPE,
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


def main(output: str, steps: str, optimizer_name: str, index: str) -> None:
  import numpy as np
  import tensorflow as tf

  from tests import accumulation_test, training_loop
  from tfbert.accumulation import with_gradient_accumulation

  strategy = tf.distribute.MultiWorkerMirroredStrategy()
  make = {"sgd": accumulation_test.sgd, "adamw": accumulation_test.adamw_with_schedule}
  with strategy.scope():
    optimizer = with_gradient_accumulation(make[optimizer_name](), int(steps))
  model = training_loop.accumulate_train(strategy, accumulation_test.model_fn, optimizer,
                                         accumulation_test.loss_fn,
                                         accumulation_test.windows(3), int(steps))
  np.savez(f"{output}.{index}.npz", *[v.numpy() for v in model.trainable_variables],
           iterations=optimizer.iterations.numpy(), micro_step=optimizer.micro_step.numpy())


if __name__ == "__main__":
  main(*sys.argv[1:])
