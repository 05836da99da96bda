"""Tests for tests/scheduling.py: the longest tests first, dealt evenly to the workers."""

import json

from tests import scheduling

DURATIONS = {"a": 60.0, "b": 50.0, "c": 20.0, "d": 9.0, "e": 3.0, "f": 1.5}


def _shares(order, workers):
  """The contiguous shares worksteal sends first (xdist: the rest split evenly, rounding
  down for the earlier workers)."""
  shares, start = [], 0
  for i in range(workers):
    size = (len(order) - start) // (workers - i)
    shares.append(order[start:start + size])
    start += size
  return shares


def test_each_workers_contiguous_share_starts_with_its_longest_and_the_time_is_even():
  names = sorted(DURATIONS) + ["g", "h", "i", "j", "k"]  # 5 tests without a duration.
  order = scheduling.deal(names, DURATIONS, workers=2)
  assert sorted(order) == sorted(names)  # Every test, once.
  first, second = _shares(order, 2)
  assert (len(first), len(second)) == (5, 6)
  assert first[0] == "a" and second[0] == "b"  # The two longest start the two workers.
  for share in (first, second):
    seconds = [DURATIONS.get(n, scheduling.UNKNOWN_SECONDS) for n in share]
    assert seconds == sorted(seconds, reverse=True)
  totals = [sum(DURATIONS.get(n, 1.0) for n in share) for share in (first, second)]
  # 148.5 s in all: dealt 74 / 74.5; the file order, split 5 / 6 by count, gives 142 / 6.5.
  assert abs(totals[0] - totals[1]) <= 3.0, totals


def test_one_worker_runs_longest_first_and_the_order_does_not_depend_on_the_input_order():
  names = list(DURATIONS)
  assert scheduling.deal(names, DURATIONS, 1) == ["a", "b", "c", "d", "e", "f"]
  assert scheduling.deal(names[::-1], DURATIONS, 3) == scheduling.deal(names, DURATIONS, 3)


def test_durations_are_read_from_the_file_and_a_missing_file_is_none(tmp_path):
  path = tmp_path / "durations.json"
  path.write_text(json.dumps({"x": 2.5}))
  assert scheduling.read_durations(str(path)) == {"x": 2.5}
  assert scheduling.read_durations(str(tmp_path / "absent.json")) == {}


def test_the_committed_durations_name_tests_that_exist():
  import os  # pylint: disable=import-outside-toplevel
  durations = scheduling.read_durations()
  assert len(durations) > 50
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  files = {nodeid.split("::")[0] for nodeid in durations}
  missing = sorted(f for f in files if not os.path.isfile(os.path.join(root, f)))
  assert not missing, missing
