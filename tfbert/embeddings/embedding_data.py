"""Sentence-embedding training and evaluation data: pairs, triplets and scored pairs.

Files are TSV (tab-separated, a header row naming the columns, or none: columns by 0-based
index) or JSONL (one JSON object per line, columns by key); `.jsonl` / `.json` names mean
JSONL, anything else TSV. Which columns hold what is given by `Columns`, as the tool's flags
give it. Every error names the file and line (and the column).

* pairs (anchor, positive) and triplets (anchor, positive, hard negative) train the
  in-batch-negatives loss;
* scored pairs (two texts and a similarity score) train CoSENT / cosine MSE and evaluate
  (Spearman and Pearson of cosine similarity); STS-B is read from its GLUE files.

Paths may be local or any `tf.io.gfile` URL (`tfbert.runtime.files`).
"""

import dataclasses
import json
import math
from typing import Optional, Sequence, Union

from absl import logging

from tfbert.classifier import glue_data
from tfbert.runtime import files, json_values
from tfbert.text import text_normalization

Column = Union[str, int]


@dataclasses.dataclass(frozen=True)
class Columns:
  """Where each field is: a header name (TSV) or key (JSONL), or a 0-based TSV index.

  Attributes:
    anchor: the first text (a query, or the first sentence of a pair).
    positive: the second text (its positive, or the second sentence).
    negative: a hard negative's text (triplets), or None.
    score: the pair's gold similarity (scored pairs), or None.
  """
  anchor: Column = "anchor"
  positive: Column = "positive"
  negative: Optional[Column] = None
  score: Optional[Column] = None


@dataclasses.dataclass(frozen=True)
class TextExample:
  """One training or evaluation example.

  Attributes:
    texts: (anchor, positive) or (anchor, positive, negative).
    score: the gold similarity of a scored pair, else None.
    line: the 1-based line in its file (for messages).
  """
  texts: tuple[str, ...]
  score: Optional[float]
  line: int


def column(value: Optional[Column]) -> Optional[Column]:
  """A column as a flag gives it: digits are a 0-based TSV index (a file whose columns are
  all given by index has no header row), anything else a header name or JSONL key."""
  if isinstance(value, str) and value.isdigit():
    return int(value)
  return value


def _read_lines(path: str, what: str) -> list[str]:
  """`files.read_lines`; a missing `what` (e.g. "qrels file") named as such, a symbolic
  link to nothing as one (`files.missing_file_message`)."""
  try:
    return files.read_lines(path)
  except FileNotFoundError:
    raise FileNotFoundError(files.missing_file_message(path, what)) from None


def _is_jsonl(path: str) -> bool:
  return path.endswith((".jsonl", ".json"))


def _choose(missing: list[str], available: Sequence[str], flags: dict[str, str],
            note: str) -> str:
  """The end of a message on missing fields: the flags that pick them (`flags`: field ->
  flag), set to a key or column of the file's own name where one is the field's, and
  `note` (what the file must hold)."""
  if not flags:
    return ""
  named = [f"--{flags[name]}={name}" if name in available else f"--{flags[name]}"
           for name in missing if name in flags]
  return (f": pick them with {', '.join(named)}" if named else "") + (f"; {note}" if note
                                                                    else "")


def _reads_as_data(cells: Sequence[str], fields: dict[str, Column],
                   absent: Sequence[str]) -> bool:
  """Whether a first TSV line that holds none of the named `fields` reads as a data row
  (a cell with a space, an empty one, or a number) rather than a header of other names."""
  if len(absent) < sum(isinstance(key, str) for key in fields.values()):
    return False  # Some name is there: a header with a misspelt column.
  def is_number(cell):
    try:
      float(cell)
    except ValueError:
      return False
    return True
  return any(not cell.strip() or " " in cell.strip() or is_number(cell) for cell in cells)


def _by_index(fields: dict[str, Column], width: int, flags: dict[str, str]) -> str:
  """The flags (or fields) that pick `fields` of a `width`-column headerless file by index,
  in order (anchor=0, positive=1, ...), and a score's column in [] when one is left."""
  names = list(fields)
  shown = [f"--{flags[name]}={i}" if name in flags else f"{name}={i}"
           for i, name in enumerate(names)]
  if "score" not in fields and width > len(names):
    shown.append(f"[--{flags['score']}={len(names)}]" if "score" in flags
                 else f"[score={len(names)}]")
  return " ".join(shown)


def _rows(path: str, columns: Columns, flags: Optional[dict[str, str]] = None,
          note: str = ""):
  """(line, {field: raw value}) of every data row; raises naming file:line (and the `flags`
  that pick a missing field, and `note`: `read_examples`)."""
  flags = flags or {}
  fields = {name: getattr(columns, name) for name in ("anchor", "positive", "negative", "score")
            if getattr(columns, name) is not None}
  lines = _read_lines(path, "data file")
  if _is_jsonl(path):
    for number, text in enumerate(lines, 1):
      if not text.strip():
        continue
      try:
        row = json_values.loads(text, f"{path}:{number}")  # A key given twice named.
      except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{number}: not a JSON object ({error})") from None
      if not isinstance(row, dict):
        raise ValueError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
      # An index given for JSONL names the key of that spelling ("0").
      keys = {name: str(key) for name, key in fields.items()}
      absent = [name for name, key in keys.items() if key not in row]
      if absent:
        raise ValueError(f"{path}:{number}: missing "
                         f"{', '.join(f'{name} ({keys[name]!r})' for name in absent)}; keys: "
                         f"{', '.join(sorted(row))}{_choose(absent, list(row), flags, note)}")
      yield number, {name: row[key] for name, key in keys.items()}
    return
  by_name = any(isinstance(key, str) for key in fields.values())
  header: list[str] = []
  for number, text in enumerate(lines, 1):
    if not text.strip():
      continue
    cells = text.split("\t")
    if by_name and not header:
      header = cells
      absent = [name for name, key in fields.items()
                if isinstance(key, str) and key not in header]
      if absent:
        separated = (" (one column: a comma-separated file? give a TSV, tab-separated, or "
                     "JSONL)" if len(header) == 1 and "," in header[0] else "")
        unknown = [f"{name} ({fields[name]!r})" for name in absent]
        if not separated and _reads_as_data(header, fields, absent):
          raise ValueError(
              f"{path}:{number}: the file seems to have no header: line {number} has no "
              f"column {', '.join(unknown)} and reads as data "
              f"({', '.join(map(repr, header))}); the columns of a headerless file are "
              f"picked by 0-based index: {_by_index(fields, len(header), flags)}"
              + (f"; {note}" if note else ""))
        raise ValueError(f"{path}:{number}: the header has no column {', '.join(unknown)}; "
                         f"columns: {', '.join(map(repr, header))}{separated}"
                         f"{_choose(absent, header, flags, note)}")
      continue
    if header and len(cells) != len(header):  # A tab inside a text shifts every column.
      raise ValueError(f"{path}:{number}: {len(cells)} columns, but the header has "
                       f"{len(header)} ({', '.join(header)}): a text holding a tab?")
    values = {}
    for name, key in fields.items():
      index = header.index(key) if isinstance(key, str) else key
      if index >= len(cells):
        raise ValueError(f"{path}:{number}: {len(cells)} columns, but {name} is column "
                         f"{index} (0-based){_choose([name], (), flags, note)}")
      values[name] = cells[index]
    yield number, values


def unread_roles(path: str, columns: Columns) -> list[str]:
  """The fields "score" and "negative" that `path` holds by that name (a TSV header's
  column, the first JSONL row's key) but `columns` does not read: a file of scored pairs
  trained as plain pairs, its scores unread, without a word (sweep 27, A129). A headerless
  TSV (columns by index) names none."""
  unread = [name for name in ("score", "negative") if getattr(columns, name) is None]
  if not unread:
    return []
  first = ""
  with files.open_file(path, "rb") as f:  # Up to its first non-blank line only: the
    for raw in f:                         # reader has read (and checked) the whole file.
      text = files.decode_utf8(raw, path).replace("\r\n", "\n").replace("\r", "\n")
      first = next((line for line in text.split("\n") if line.strip()), "")
      if first:
        break
  if _is_jsonl(path):
    try:
      row = json.loads(first)
    except ValueError:
      return []  # The reader names it.
    names = set(row) if isinstance(row, dict) else set()
  else:
    names = set(first.split("\t"))
  return [name for name in unread if name in names]


def read_examples(path: str, columns: Columns = Columns(), limit: Optional[int] = None,
                  flags: Optional[dict[str, str]] = None, note: str = ""
                  ) -> list[TextExample]:
  """Reads pairs, triplets or scored pairs (as `columns` says) from a TSV or JSONL file.

  Args:
    path: the file (local or a URL).
    columns: where the texts (and score) are.
    limit: read at most this many examples.
    flags: the flag (without "--") that picks each field ("anchor": "dev_anchor_column"),
      named in the message on a missing one.
    note: what the file must hold, ending that message (a dev file's scores).

  Returns:
    The examples, in file order.

  Raises:
    FileNotFoundError: naming the file.
    ValueError: naming file:line for a missing column, an empty text, or a score that is
      not a finite number; or a file without any example.
  """
  examples = []
  for number, row in _rows(path, columns, flags, note):
    texts = []
    for name in ("anchor", "positive", "negative"):
      if name in row:
        value = row[name]
        # Blank: also a text of zero-width spaces, which yields no wordpiece (sweep 33, A25).
        if not isinstance(value, str) or text_normalization.is_blank(value):
          raise ValueError(f"{path}:{number}: {name} is empty or not text ({value!r})")
        texts.append(value)
    score = None
    if "score" in row:
      try:
        score = float(row["score"])
      except (TypeError, ValueError):
        score = float("nan")
      if not math.isfinite(score):
        raise ValueError(f"{path}:{number}: score {row['score']!r} is not a finite number")
    examples.append(TextExample(tuple(texts), score, number))
    if limit is not None and len(examples) >= limit:
      break
  if not examples:
    raise ValueError(f"{path}: no example in the file")
  return examples


def stsb_examples(path: str, limit: Optional[int] = None) -> list[TextExample]:
  """STS-B's GLUE file (`train.tsv` / `dev.tsv`) as scored pairs (scores 0-5)."""
  read = glue_data.read_examples(glue_data.TASKS["sts-b"], path, "dev", limit=limit)
  return [TextExample((e.text_a, e.text_b), float(e.label), e.line) for e in read.examples]


@dataclasses.dataclass(frozen=True)
class RetrievalSet:
  """A retrieval evaluation set: queries, a corpus and the relevant documents of each query.

  Attributes:
    query_ids, queries: the queries' ids and texts, in file order.
    corpus_ids, corpus: the documents' ids and texts, in file order.
    qrels: {query id: ids of its relevant documents}.
  """
  query_ids: list[str]
  queries: list[str]
  corpus_ids: list[str]
  corpus: list[str]
  qrels: dict[str, set[str]]


# Column names of a retrieval file's header row (BEIR's, MTEB's, pandas' exports): a first
# line made only of these is a header, not a query, document or relevance judgement.
RETRIEVAL_HEADER_NAMES = frozenset({
    "qid", "query-id", "query_id", "queryid", "_id", "id", "did", "doc-id", "doc_id", "docid",
    "corpus-id", "corpus_id", "corpusid", "pid", "text", "title", "query", "score",
    "relevance", "label"})


def _numbered_rows(path: str, what: str):
  """(line number, line, cells, whether it is the file's first line) of the non-empty lines
  of a retrieval file, its header row (the first line, when every cell is a
  `RETRIEVAL_HEADER_NAMES` name) skipped and logged."""
  first = True
  for number, line in enumerate(_read_lines(path, what), 1):
    if not line.strip():
      continue
    cells = line.split("\t")
    named = [cell.strip().lower() in RETRIEVAL_HEADER_NAMES for cell in cells]
    if first and all(named):
      logging.info(f"{path}:{number}: header row ({', '.join(map(repr, cells))}) skipped")
      first = False
      continue
    if first and named[0]:
      # `doc_id<TAB>passage` was read as a document, and ranked (sweep 30, A11, A12). (A
      # first id that is a column name; a text may be one: `q1<TAB>text` is a query.)
      known = ", ".join(repr(cell) for cell, name in zip(cells, named) if name)
      other = ", ".join(repr(cell) for cell, name in zip(cells, named) if not name)
      names = ", ".join(sorted(RETRIEVAL_HEADER_NAMES))
      raise ValueError(
          f"{path}:{number}: a header row? {known} is a column name, {other} is none tfbert "
          f"knows ({names}); a first row of column names only is skipped: rename its "
          "columns (e.g. _id, text) or remove it")
    yield number, line, cells, first
    first = False


def _id_texts(path: str, what: str) -> tuple[list[str], list[str]]:
  """(ids, texts) of an `id<TAB>text` file (`what`: "queries file"; a header row skipped);
  errors name file:line."""
  ids, texts, seen = [], [], {}
  for number, line, cells, _ in _numbered_rows(path, what):
    if len(cells) != 2 or not cells[0].strip() or text_normalization.is_blank(cells[1]):
      raise ValueError(f"{path}:{number}: expected id<TAB>text, got {line[:80]!r}")
    if cells[0] in seen:
      raise ValueError(f"{path}:{number}: id {cells[0]!r} is also on line {seen[cells[0]]}")
    seen[cells[0]] = number
    ids.append(cells[0])
    texts.append(cells[1])
  if not ids:
    raise ValueError(f"{path}: no line in the file")
  return ids, texts


def _relevance_grade(path: str, number: int, cells: list[str]) -> int:
  """The relevance grade of a qrels row: its third cell as an integer, or 1 without one."""
  if len(cells) == 2:
    return 1
  try:
    return int(cells[2].strip())
  except ValueError:
    raise ValueError(f"{path}:{number}: score {cells[2]!r} is not an integer relevance grade "
                     "(BEIR qrels: query-id<TAB>corpus-id<TAB>score, 0 = not relevant)") from None


def read_retrieval_set(queries_file: str, corpus_file: str, qrels_file: str) -> RetrievalSet:
  """Reads `id<TAB>text` queries and corpus files and a `query_id<TAB>doc_id` qrels file.

  Each may start with a header row naming its columns (BEIR / MTEB exports: `query-id`,
  `corpus-id`, `_id`, `text`, ...; `RETRIEVAL_HEADER_NAMES`): it is skipped, and logged.
  A qrels line may carry a third column, the relevance grade of BEIR's
  `query-id<TAB>corpus-id<TAB>score` files: an integer, where 0 or less means judged not
  relevant (the line is left out) and above 0 relevant. The metrics use binary relevance,
  so grades above 1 count as 1, which is logged once.

  Raises:
    FileNotFoundError: naming the file.
    ValueError: naming file:line for a malformed line, a repeated id, or a qrels line whose
      query or document is not in its file.
  """
  query_ids, queries = _id_texts(queries_file, "queries file")
  corpus_ids, corpus = _id_texts(corpus_file, "corpus file")
  known_queries, known_docs = set(query_ids), set(corpus_ids)
  qrels: dict[str, set[str]] = {}
  judged_not_relevant, graded = 0, False
  judged: dict[tuple[str, str], tuple[int, bool]] = {}  # (query, doc) -> (line, relevant)
  for number, line, cells, first in _numbered_rows(qrels_file, "qrels file"):
    # A first line of other column names is not a header we know: say it may be one.
    header = (" (a header row? only one of column names such as qid, query-id, did, "
              "corpus-id is skipped: rename its columns or remove it)" if first else "")
    if len(cells) not in (2, 3):
      raise ValueError(f"{qrels_file}:{number}: expected query_id<TAB>doc_id or "
                       f"query_id<TAB>doc_id<TAB>score, got {line[:80]!r}")
    grade = _relevance_grade(qrels_file, number, cells)
    if cells[0] not in known_queries:
      raise ValueError(f"{qrels_file}:{number}: query {cells[0]!r} is not in "
                       f"{queries_file}{header}")
    if cells[1] not in known_docs:
      raise ValueError(f"{qrels_file}:{number}: document {cells[1]!r} is not in "
                       f"{corpus_file}{header}")
    pair = (cells[0], cells[1])
    if pair in judged and judged[pair][1] != (grade > 0):
      # Both lines were read: the pair counted relevant while the log said it was left out
      # (sweep 30, A29; BEIR's loader keeps the last).
      raise ValueError(f"{qrels_file}:{number}: query {cells[0]!r} and document {cells[1]!r} "
                       f"are judged {'relevant' if grade > 0 else 'not relevant'} here and "
                       f"{'relevant' if judged[pair][1] else 'not relevant'} on line "
                       f"{judged[pair][0]}: keep one judgement")
    judged.setdefault(pair, (number, grade > 0))
    if grade <= 0:
      judged_not_relevant += 1
      continue
    graded = graded or grade > 1
    qrels.setdefault(cells[0], set()).add(cells[1])
  if judged_not_relevant:
    logging.info(f"{qrels_file}: {judged_not_relevant} line(s) with score 0 or less: judged "
                 "not relevant, left out")
  if graded:
    logging.warning(f"{qrels_file}: relevance grades above 1 are read as relevant (1): "
                    "MRR@10 and nDCG@10 here use binary relevance")
  if not qrels:
    raise ValueError(f"{qrels_file}: no relevant document listed")
  return RetrievalSet(query_ids, queries, corpus_ids, corpus, qrels)
