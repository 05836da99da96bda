"""Tests for tfbert.runtime.cpu: the CPU's name, its kernel-relevant flags and oneDNN."""

import os
import platform
import re
import subprocess
import sys

import pytest

from tfbert.runtime import cpu

needs_linux = pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"),
                                 reason="reads /proc/cpuinfo, which only Linux has")


@needs_linux
def test_name_and_flags_are_the_first_processors():
  text = open("/proc/cpuinfo", encoding="utf-8").read()
  assert cpu.cpu_name() == re.search(r"^model name\s*:\s*(.*)$", text, re.M).group(1).strip()
  flags = set(re.search(r"^flags\s*:\s*(.*)$", text, re.M).group(1).split())
  assert cpu.isa_flags() == tuple(f for f in cpu.RELEVANT_FLAGS if f in flags)


@pytest.mark.slow
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="oneDNN's CPU kernels are switched by TF_ENABLE_ONEDNN_OPTS on x86")
@pytest.mark.parametrize("setting, state", [("0", "oneDNN off"), ("1", "oneDNN on")])
def test_describe_says_whether_onednn_runs(setting, state):
  run = subprocess.run(
      [sys.executable, "-c", "from tfbert.runtime import cpu; print(cpu.describe())"],
      capture_output=True, text=True, timeout=120, check=True,
      env={**os.environ, "TF_ENABLE_ONEDNN_OPTS": setting, "TF_CPP_MIN_LOG_LEVEL": "2"})
  line = run.stdout.strip().splitlines()[-1]
  assert line.startswith(cpu.cpu_name() + " (") and line.endswith(f"; {state})"), line
