"""A pytest plugin that records where the suite's time goes, for docs/testing.md.

Enabled by `TFBERT_TEST_PROFILE=DIR` (off otherwise: it costs nothing then). Every phase of
every test (setup, call, teardown) appends one JSON line to `DIR/<worker>.jsonl`:

  {"nodeid": ..., "phase": "setup"|"call"|"teardown", "start": epoch s, "wall": s,
   "cpu": s, "child_cpu": s, "rss_mb": MB, "stall": {...}, "machine": {...}}

`cpu` is this process's CPU time in the phase (tracing, training steps, conversions run
in-process) and `child_cpu` the CPU time of the child processes it waited for (a tool or
worker started as a subprocess, or forked by `tests.forked`, which counts its own); `start`
lines the two workers' phases up in time, to see what the other worker ran while a test
waited; `rss_mb` is the worker's resident memory after the phase (a long-lived worker
grows: see docs/testing.md); `stall` is the machine's pressure-stall time in the phase
(Linux PSI, /proc/pressure: seconds in which some task waited for a core, for memory
reclaim or for the disk), to tell a test that waited for another worker's processes from
one that waited for the disk; `machine` is what the machine's cores did in the phase
(/proc/stat, summed over cores: `idle`, `iowait`, and `steal`, the time a virtual machine's
hypervisor ran something else), to tell a test whose process sat idle while cores were free
from one whose cores were taken away. Summarize with `python -m tests.profile_report DIR`.
"""

import json
import os
import resource
import time

import pytest

from tests import forked

_ENV = "TFBERT_TEST_PROFILE"


def _clock():
  own = resource.getrusage(resource.RUSAGE_SELF)
  child = resource.getrusage(resource.RUSAGE_CHILDREN)
  return (time.perf_counter(), own.ru_utime + own.ru_stime,
          child.ru_utime + child.ru_stime + forked.child_cpu())


_PRESSURES = ("cpu", "memory", "io")


def _stalls() -> dict:
  """{resource: seconds some task stalled on it since boot} (empty without /proc/pressure)."""
  found = {}
  for name in _PRESSURES:
    try:
      with open(f"/proc/pressure/{name}", encoding="utf-8") as f:
        some = f.readline()  # "some avg10=... total=<microseconds>"
      found[name] = int(some.rsplit("total=", 1)[1]) / 1e6
    except (OSError, IndexError, ValueError):
      pass
  return found


_CPU_STATES = {"idle": 3, "iowait": 4, "steal": 7}  # Fields of /proc/stat's "cpu" line.


def _machine() -> dict:
  """{state: seconds all cores spent in it since boot} (empty without /proc/stat)."""
  try:
    with open("/proc/stat", encoding="utf-8") as f:
      ticks = f.readline().split()[1:]
    hertz = os.sysconf("SC_CLK_TCK")
    return {name: int(ticks[i]) / hertz for name, i in _CPU_STATES.items()}
  except (OSError, IndexError, ValueError):
    return {}


def _rss_mb() -> int:
  """This process's resident memory, MB (0 where /proc is not there)."""
  try:
    with open("/proc/self/status", encoding="utf-8") as f:
      return int(f.read().split("VmRSS:")[1].split()[0]) // 1024
  except (OSError, IndexError, ValueError):
    return 0


def _record(item, phase):
  folder = os.environ.get(_ENV)
  if not folder:
    yield
    return
  began, start, stalls, states = time.time(), _clock(), _stalls(), _machine()
  yield
  end, stalled, spent = _clock(), _stalls(), _machine()
  worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
  os.makedirs(folder, exist_ok=True)
  line = {"nodeid": item.nodeid, "phase": phase, "worker": worker, "start": round(began, 3),
          "wall": round(end[0] - start[0], 4), "cpu": round(end[1] - start[1], 4),
          "child_cpu": round(end[2] - start[2], 4), "rss_mb": _rss_mb(),
          "stall": {name: round(stalled[name] - stalls[name], 3)
                    for name in stalled if name in stalls},
          "machine": {name: round(spent[name] - states[name], 2)
                      for name in spent if name in states}}
  with open(os.path.join(folder, f"{worker}.jsonl"), "a", encoding="utf-8") as f:
    f.write(json.dumps(line) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
  yield from _record(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
  yield from _record(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
  yield from _record(item, "teardown")
