"""`benchmark.run_in_subprocess`'s process forked from the test process's server
(tests/forked.py) instead of a fresh interpreter.

A benchmark's own process is what gives it its own peak RSS and a cold start; a test of the
benchmark machinery proves the code string runs in another process and returns its record
through "RESULT <json>", which a forked child proves as well, without its ~5 s of importing
TensorFlow (docs/testing.md, "A process without the import"). The child still gets the
benchmark's environment, argv and working directory; only the variables a fork cannot change
(read at import: `PYTHONPATH`, `TF_CPP_MIN_LOG_LEVEL`, ...) stay the server's, which already
imports tfbert_tools from this checkout.
"""

import types

from tests import forked
from tfbert_tools.benchmarks import benchmark


def _run(args, capture_output=False, text=False, timeout=None, env=None, cwd=None):
  """`subprocess.run` as `benchmark.run_in_subprocess` calls it, the child forked."""
  env = dict(env)
  for name, (server, _) in forked.unforkable_variables(env).items():
    if server is None:
      env.pop(name)
    else:
      env[name] = server
  return forked.run(args, env=env, cwd=cwd, timeout=timeout, capture_output=capture_output,
                    text=text)


def fork_benchmark_processes(monkeypatch) -> None:
  """Makes `benchmark.run_in_subprocess` (and every `*_in_subprocess` built on it) fork."""
  monkeypatch.setattr(benchmark, "subprocess", types.SimpleNamespace(run=_run))
