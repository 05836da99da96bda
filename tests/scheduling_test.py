"""Tests for tests/scheduling.py: the longest test files first, dealt evenly to the workers."""

import json
import os

import pytest

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


def test_files_that_share_a_session_fixture_are_dealt_together_to_one_share():
  # c.py (29 s), e.py (1.5 s) and the light h.py share an export: one unit of 30.56 s.
  groups = {"c.py": "c.py", "e.py": "c.py", "h.py": "c.py"}
  order = scheduling.deal(NAMES, DURATIONS, workers=2, groups=groups)
  assert sorted(order) == sorted(NAMES)
  first, second = order[:len(NAMES) // 2], order[len(NAMES) // 2:]
  grouped = [n for n in order if n.split("::")[0] in groups]
  share = first if grouped[0] in first else second
  assert set(grouped) <= set(share), (first, second)  # Never split, light h.py included.
  at = order.index(grouped[0])
  assert order[at:at + len(grouped)] == grouped  # Together, the longest file first:
  assert _files(grouped) == ["c.py", "c.py", "e.py"] + ["h.py"] * 6
  seconds = [sum(DURATIONS.get(n, scheduling.UNKNOWN_SECONDS) for n in s)
             for s in (first, second)]
  assert abs(seconds[0] - seconds[1]) <= 15.0, (seconds, order)
  # Without the group, e.py goes to the other share than c.py's (to even the times out).
  plain = scheduling.deal(NAMES, DURATIONS, workers=2)
  assert ("c.py::t1" in plain[:len(NAMES) // 2]) != ("e.py::t1" in plain[:len(NAMES) // 2])


def test_groups_join_the_files_of_shared_fixtures_transitively():
  uses = {"a.py": {"x"}, "b.py": {"x", "y"}, "c.py": {"y"}, "d.py": {"z"}, "e.py": set()}
  assert scheduling.groups_of(uses) == {"a.py": "a.py", "b.py": "a.py", "c.py": "a.py",
                                        "d.py": "d.py"}


def test_the_session_fixtures_a_test_requests_are_found_in_pytests_collection(tmp_path,
                                                                              monkeypatch):
  """Through pytest's own collection (its fixture information is not public API): a session
  fixture of the folder requested by argument or through another fixture counts; an autouse
  one, a narrower scope, or one of pytest's own (tmp_path_factory) does not."""
  (tmp_path / "conftest.py").write_text(
      "import pytest\n"
      "@pytest.fixture(scope='session')\ndef built(tmp_path_factory): return 1\n"
      "@pytest.fixture(scope='session', autouse=True)\ndef everywhere(): return 2\n"
      "@pytest.fixture(scope='module')\ndef per_module(): return 3\n"
      "@pytest.fixture\ndef through(built): return built\n")
  (tmp_path / "a_test.py").write_text("def test_a(built): pass\n")
  (tmp_path / "b_test.py").write_text("def test_b(through): pass\n")
  (tmp_path / "c_test.py").write_text(
      "def test_c(per_module, tmp_path_factory): pass\ndef test_d(): pass\n")
  found = {}

  class Recorder:
    def pytest_collection_finish(self, session):
      for item in session.items:
        found[item.name] = scheduling.session_fixtures(item, root=str(tmp_path))

  monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # No xdist, no other plugin.
  assert pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider",
                      "--import-mode=importlib", "--rootdir", str(tmp_path), str(tmp_path)],
                     plugins=[Recorder()]) == 0
  assert found == {"test_a": {"conftest.py::built"}, "test_b": {"conftest.py::built"},
                   "test_c": set(), "test_d": set()}
