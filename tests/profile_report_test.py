"""Tests for tests/profiling.py's records and tests/profile_report.py's tables."""

import json

from tests import profile_report


def _write(folder, worker, rows):
  with open(folder / f"{worker}.jsonl", "w", encoding="utf-8") as f:
    for nodeid, phase, wall, cpu, child in rows:
      f.write(json.dumps({"nodeid": nodeid, "phase": phase, "worker": worker, "wall": wall,
                          "cpu": cpu, "child_cpu": child}) + "\n")


def test_phases_add_up_per_test_and_each_test_gets_its_cost_kind(tmp_path):
  _write(tmp_path, "gw0", [
      ("tests/a/x_run_test.py::test_resume", "setup", 2.0, 1.0, 0.0),
      ("tests/a/x_run_test.py::test_resume", "call", 8.0, 7.5, 0.0),
      ("tests/a/x_run_test.py::test_resume", "teardown", 0.1, 0.1, 0.0),
      ("tests/b/y_test.py::test_tool", "call", 6.0, 0.2, 5.0)])
  _write(tmp_path, "gw1", [("tests/b/y_test.py::test_pure", "call", 0.01, 0.01, 0.0),
                           ("tests/b/onnx_test.py::test_convert", "call", 3.0, 2.9, 0.0)])
  tests = profile_report.read_profile(str(tmp_path))
  resume = tests["tests/a/x_run_test.py::test_resume"]
  assert resume == {"wall": 10.1, "cpu": 8.6, "child_cpu": 0.0, "setup": 2.0}
  kinds = {n: profile_report.cost_kind(n, t) for n, t in tests.items()}
  assert kinds["tests/a/x_run_test.py::test_resume"].startswith("training steps")
  assert kinds["tests/b/y_test.py::test_tool"].startswith("subprocess")
  assert kinds["tests/b/y_test.py::test_pure"].startswith("under 0.5 s")
  assert kinds["tests/b/onnx_test.py::test_convert"].startswith("export / conversion")
  text = profile_report.report(tests, top=2)
  assert text.startswith("4 tests, 19 s of worker time")
  assert "| tests/a/x_run_test.py | 1 | 10 | 2 | 0 |" in text
  assert profile_report.durations(tests) == {
      "tests/a/x_run_test.py::test_resume": 10.1, "tests/b/y_test.py::test_tool": 6.0,
      "tests/b/onnx_test.py::test_convert": 3.0}
