"""Tests for tests/scheduling.py: the longest test files first, dealt evenly to the workers."""

import json
import os

from tests import scheduling

DURATIONS = {"a.py::t1": 60.0, "a.py::t2": 1.0, "b.py::t1": 50.0, "c.py::t1": 20.0,
             "c.py::t2": 9.0, "d.py::t1": 3.0, "e.py::t1": 1.5}
# 3 tests without a duration (1 s each), and 10 light tests of 0.01 s.
LIGHT = {f"h.py::t{i}": 0.01 for i in range(6)} | {f"i.py::t{i}": 0.01 for i in range(4)}
DURATIONS |= LIGHT
NAMES = sorted(DURATIONS) + ["f.py::t1", "f.py::t2", "g.py::t1"]


def _files(order):
  return [nodeid.split("::")[0] for nodeid in order]


def test_a_file_stays_together_in_its_order_and_the_longest_files_come_first():
  order = scheduling.deal(list(reversed(NAMES)), DURATIONS, workers=1)
  assert sorted(order) == sorted(NAMES)
  assert _files(order) == ["a.py", "a.py", "b.py", "c.py", "c.py", "d.py", "f.py", "f.py",
                           "e.py", "g.py"] + ["h.py"] * 6 + ["i.py"] * 4
  assert order[:2] == ["a.py::t2", "a.py::t1"]  # The file's own order (reversed here).


def test_the_shares_have_about_equal_time_and_each_starts_with_its_longest_file():
  order = scheduling.deal(NAMES, DURATIONS, workers=2)
  assert sorted(order) == sorted(NAMES)  # Every test, once.
  first = order[:len(NAMES) // 2]  # What worksteal sends the first worker.
  second = order[len(NAMES) // 2:]
  seconds = [sum(DURATIONS.get(n, scheduling.UNKNOWN_SECONDS) for n in share)
             for share in (first, second)]
  # 147.6 s in all, a.py (61 s) and b.py (50 s) in different shares: 68.5 / 79.1 here
  # (files are not split); the file order split 10 / 10 by count gives 147.5 / 2.1.
  assert abs(seconds[0] - seconds[1]) <= 15.0, (seconds, order)
  assert {first[0].split("::")[0], second[0].split("::")[0]} == {"a.py", "b.py"}


def test_the_order_does_not_depend_on_the_input_order_of_the_files():
  by_file = sorted(NAMES, key=lambda n: n.split("::")[0], reverse=True)
  assert scheduling.deal(by_file, DURATIONS, 3) == scheduling.deal(NAMES, DURATIONS, 3)


def test_durations_are_read_from_the_file_and_a_missing_file_is_none(tmp_path):
  path = tmp_path / "durations.json"
  path.write_text(json.dumps({"x": 2.5}))
  assert scheduling.read_durations(str(path)) == {"x": 2.5}
  assert scheduling.read_durations(str(tmp_path / "absent.json")) == {}


def test_the_committed_durations_name_test_files_that_exist():
  durations = scheduling.read_durations()
  assert len(durations) > 50
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  files = {nodeid.split("::")[0] for nodeid in durations}
  missing = sorted(f for f in files if not os.path.isfile(os.path.join(root, f)))
  assert not missing, missing
