"""Tests for tfbert.runtime.json_values: results are JSON every parser reads."""

import json
import math

import pytest

from tfbert.runtime import json_values


def _strict(text):
  def refuse(token):
    raise ValueError(f"not JSON: {token}")
  return json.loads(text, parse_constant=refuse)


def test_non_finite_floats_become_null_at_any_depth():
  value = {"f1": math.nan, "rows": [1.5, -math.inf, (math.inf, 2)], "name": "x", "n": 3}
  text = json_values.dumps(value, sort_keys=True)
  assert _strict(text) == {"f1": None, "n": 3, "name": "x", "rows": [1.5, None, [None, 2]]}
  with pytest.raises(ValueError, match="not JSON: NaN"):  # What Python's json writes.
    _strict(json.dumps(value))


def test_number_reads_null_back_as_nan():
  assert math.isnan(json_values.number(None))
  assert json_values.number(2) == 2.0 and isinstance(json_values.number(2), float)
