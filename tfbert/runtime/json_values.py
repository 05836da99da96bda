"""JSON that every parser reads, and JSON read strictly.

Written: a score that is not a number is written as `null`.

Python's `json` writes `float("nan")` as the bare token `NaN` (and infinities as
`Infinity`), which is not JSON (RFC 8259): `jq`, JavaScript's `JSON.parse`, Go's
`encoding/json` and most dashboards refuse the whole file. A score can be NaN for honest
reasons (the Spearman correlation of constant predictions, the loss of a diverged run), so
every file and line of results tfbert writes goes through `dumps`: a non-finite float
becomes `null`, and `allow_nan=False` turns any value that slipped past into an error
instead of an unreadable file. `number` reads such a value back as a float (`null` ->
NaN) where a reader computes with it.

Read: Python's `json` keeps the last of two equal keys of an object without a word (a
bert_config.json giving hidden_size twice builds the model of the second; RFC 8259 leaves
the meaning open). Every JSON file tfbert reads as configuration or data (bert_config.json,
a Hugging Face or sentence-transformers directory's JSON, run_config.json, SQuAD,
embedding JSONL, ...) goes through `read` or `loads`, which refuse such a key naming the
file and the key.
"""

import json
import math
import sys
from typing import Any, Optional

from tfbert.runtime import files


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


def _shown(value: Any) -> str:
  text = json.dumps(value, ensure_ascii=False, default=str)
  return text if len(text) <= 40 else text[:37] + "..."


class _KeyTwice(ValueError):
  """A key given twice in one object (`_unique_keys`); its message names the source."""


class UnreadableJSON(json.JSONDecodeError):
  """JSON the parser cannot read though no character is wrong (nested too deeply, a number
  of too many digits): a `json.JSONDecodeError`, so every reader that names its file for
  text that is not JSON names it for these too, without a line and column (none is known).
  """

  def __init__(self, message: str, text: str):
    super().__init__(message, text, 0)
    self.args = (message,)


def _unique_keys(pairs: list, source: str) -> dict:
  """A JSON object's pairs as a dict; a key given twice is refused, naming `source`."""
  found = {}
  for key, value in pairs:
    if key in found:
      raise _KeyTwice(f"{source}: key {key!r} appears twice in one JSON object "
                      f"({_shown(found[key])}, then {_shown(value)}); which one is meant "
                      "cannot be told: keep one")
    found[key] = value
  return found


def loads(text: str, source: str) -> Any:
  """`json.loads(text)`, refusing a key given twice in one object.

  Every failure of the parser is a ValueError: text the parser cannot read though it is
  well formed (arrays or objects nested deeper than Python's recursion limit, an integer of
  more digits than Python converts) raises `UnreadableJSON`, as text that is not JSON
  raises `json.JSONDecodeError`, never a RecursionError or a bare ValueError.

  Args:
    text: the JSON text.
    source: what the text is, for the messages: a file, or `file:line` for a JSONL line.

  Raises:
    ValueError: naming `source` and the key, for a key given twice.
    json.JSONDecodeError: (a ValueError) for text that is not JSON, or that the parser
      cannot read (`UnreadableJSON`).
  """
  try:
    return json.loads(text, object_pairs_hook=lambda pairs: _unique_keys(pairs, source))
  except (json.JSONDecodeError, _KeyTwice):
    raise
  except RecursionError:
    raise UnreadableJSON(f"arrays or objects nested too deeply (more than about "
                         f"{sys.getrecursionlimit()} levels, Python's limit)", text) from None
  except ValueError as error:
    if "integer string conversion" in str(error):
      raise UnreadableJSON(f"an integer of more than {sys.get_int_max_str_digits()} digits "
                           "(Python's limit)", text) from None
    raise UnreadableJSON(f"a value Python cannot read ({error})", text) from None


def read(path: str) -> Any:
  """The JSON value of the UTF-8 file `path`, strict as `loads` (a byte-order mark dropped:
  `tfbert.runtime.files.read_text`).

  Raises:
    FileNotFoundError: naming `path`.
    ValueError: naming `path`: bytes that are not UTF-8, text that is not JSON (with its line
      and column) or a key given twice in one object.
  """
  text = files.read_text(path)
  try:
    return loads(text, path)
  except json.JSONDecodeError as error:
    what = "cannot be read as JSON" if isinstance(error, UnreadableJSON) else "not valid JSON"
    raise ValueError(f"{path}: {what} ({error})") from None
