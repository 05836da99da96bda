"""JSON that every parser reads: a score that is not a number is written as `null`.

Python's `json` writes `float("nan")` as the bare token `NaN` (and infinities as
`Infinity`), which is not JSON (RFC 8259): `jq`, JavaScript's `JSON.parse`, Go's
`encoding/json` and most dashboards refuse the whole file. A score can be NaN for honest
reasons (the Spearman correlation of constant predictions, the loss of a diverged run), so
every file and line of results tfbert writes goes through `dumps`: a non-finite float
becomes `null`, and `allow_nan=False` turns any value that slipped past into an error
instead of an unreadable file. `number` reads such a value back as a float (`null` ->
NaN) where a reader computes with it.
"""

import json
import math
from typing import Any, Optional


def finite(value: Any) -> Any:
  """`value` with every non-finite float (NaN, +-inf) replaced by None, in dicts, lists and
  tuples at any depth (tuples become lists, as JSON has them)."""
  if isinstance(value, float):
    return value if math.isfinite(value) else None
  if isinstance(value, dict):
    return {key: finite(item) for key, item in value.items()}
  if isinstance(value, (list, tuple)):
    return [finite(item) for item in value]
  return value


def dumps(value: Any, **kwargs) -> str:
  """`json.dumps` of `finite(value)`, refusing any NaN left (`allow_nan=False`)."""
  return json.dumps(finite(value), allow_nan=False, **kwargs)


def number(value: Optional[float]) -> float:
  """A score read back from JSON as a float: `null` (a NaN or infinity written) -> NaN."""
  return float("nan") if value is None else float(value)
