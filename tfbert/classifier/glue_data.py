"""GLUE-format task files -> `InputExample`s: the standard GLUE layouts and user TSV/CSV.

Each GLUE task is one row of `TASKS`: its label names (None for the STS-B regression),
the metrics GLUE reports for it, and where its fields are in the train/dev files and in
the (unlabelled) test files of the standard GLUE release (`glue_data/<TASK>/*.tsv`, as
google-research/bert's and Hugging Face's processors read them):

  task   header  text_a          text_b          label             labels
  cola   none    3 sentence      -               1                 0, 1
  sst-2  yes     0 sentence      -               1 label           0, 1
  mrpc   yes     3 #1 String     4 #2 String     0 Quality         0, 1
  qqp    yes     3 question1     4 question2     5 is_duplicate    0, 1
  mnli   yes     8 sentence1     9 sentence2     -1 gold_label     contradiction, entailment,
                                                                   neutral
  qnli   yes     1 question      2 sentence      3 label           entailment, not_entailment
  rte    yes     1 sentence1     2 sentence2     3 label           entailment, not_entailment
  wnli   yes     1 sentence1     2 sentence2     3 label           0, 1
  sts-b  yes     7 sentence1     8 sentence2     9 score           (a float in [0, 5])

MNLI is evaluated on dev_matched.tsv and dev_mismatched.tsv (GLUE's MNLI-m and MNLI-mm).
A column index < 0 counts from the end (MNLI's dev files have 16 columns, train 12).

How the files are read, and why:
* UTF-8 with an optional byte-order mark (MRPC has one; it is not part of the header).
* Tab-separated with quoting OFF (csv `QUOTE_NONE`, google-research/bert's `_read_tsv`):
  MRPC and SST-2 text contains unbalanced `"`, which a quoting reader would use to join
  lines. User CSV files (`CustomFormat`, delimiter ",") are read with standard quoting.
* A header line is checked: the columns read must carry the expected names, so that a file
  of another task or version fails at line 1 instead of training on the wrong column.
* Every row must have as many columns as the first line (a stray tab in a text shifts
  fields silently otherwise). Blank lines are skipped.
* A malformed row (column count, unknown label, a score that is not a number or, for
  STS-B, outside its documented [0, 5]) raises ValueError naming `file:line`, the column
  and the value; with `skip_malformed=True` it is
  reported in `GlueFile.skipped` instead, and reading goes on (QQP's train set has a few).
* A row whose text (text_a, or text_b of a pair task) yields no wordpiece (empty, white
  space, zero-width spaces; `text_normalization.is_blank`) is counted and
  warned about once per file (count, first file:line); training leaves it out (as the
  SQuAD reader leaves out a blank question), dev and test keep it (one output per row).
* A field of any length is read (a review of 20,000 words, cut to the sequence length
  later): Python's csv limit (131,072 characters) is lifted while a row is parsed.
"""

import contextlib
import csv
import dataclasses
import io
import math
import os
import threading
from typing import IO, ClassVar, Optional, Sequence, Union

from absl import logging

from tfbert.runtime import files
from tfbert.text import text_normalization, unicode_forms


@dataclasses.dataclass(frozen=True)
class InputExample:
  """One row of a task file.

  Attributes:
    guid: "<split>-<index>".
    index: GLUE's `index` for submission files: a test file's own `index` column (the
      first column, when its header names it so), else the 0-based data row of the file
      (header and blank lines not counted, malformed rows counted).
    line: 1-based line of the row in its file.
    text_a: the first (or only) text.
    text_b: the second text of a pair task, else None.
    label: the label name (classification), a float (regression) or None (test files).
  """
  guid: str
  index: int
  line: int
  text_a: str
  text_b: Optional[str] = None
  label: Optional[Union[str, float]] = None


@dataclasses.dataclass(frozen=True)
class Layout:
  """Where the fields of one kind of file are.

  Attributes:
    text_a, text_b, label: 0-based column indices (< 0 counts from the end); text_b None
      for single-text tasks, label None for unlabelled (test) files.
    has_header: whether line 1 is a header.
    names: header names expected at (text_a, text_b, label), checked when given.
    delimiter: "\\t" (GLUE) or "," (CSV).
    quoting: csv quoting with '"' (off for GLUE TSV; see the module docstring).
  """
  text_a: int
  text_b: Optional[int] = None
  label: Optional[int] = None
  has_header: bool = True
  names: Optional[tuple[Optional[str], ...]] = None
  delimiter: str = "\t"
  quoting: bool = False

  def unlabelled(self) -> "Layout":
    """The same layout with the label column not read."""
    names = self.names[:2] + (None,) if self.names else None
    return dataclasses.replace(self, label=None, names=names)


@dataclasses.dataclass(frozen=True)
class Task:
  """A sentence(-pair) classification or regression task.

  Attributes:
    name: e.g. "mrpc".
    labels: label names, in class-id order; None for regression.
    metrics: names in `tfbert.classifier.glue_metrics.METRICS`, as GLUE reports the task.
    layout: train and dev files.
    test_layout: test files (no label).
    train_file, dev_files, test_files: file names in a GLUE task directory.
    score_range: a regression task's documented (lowest, highest) score, both included
      (STS-B's 0-5 similarity): a score outside it is a malformed row. None where no range
      is documented (a custom regression).
  """
  name: str
  labels: Optional[tuple[str, ...]]
  metrics: tuple[str, ...]
  layout: Layout
  test_layout: Layout
  train_file: str = "train.tsv"
  dev_files: tuple[str, ...] = ("dev.tsv",)
  test_files: tuple[str, ...] = ("test.tsv",)
  score_range: Optional[tuple[float, float]] = None

  @property
  def is_regression(self) -> bool:
    return self.labels is None

  @property
  def is_pair(self) -> bool:
    """True when examples have a text_b (packed `[CLS] a [SEP] b [SEP]`)."""
    return self.layout.text_b is not None

  @property
  def num_classes(self) -> int:
    """C of the classifier: the label count, 1 for regression."""
    return 1 if self.labels is None else len(self.labels)


def _pair_task(name, labels, metrics, columns, names, test_columns, **files) -> Task:
  a, b, label = columns
  return Task(name, labels, metrics, Layout(a, b, label, names=names),
              Layout(*test_columns, names=names[:2] + (None,)), **files)


BINARY = ("0", "1")
ENTAILMENT = ("entailment", "not_entailment")
TASKS = {task.name: task for task in (
    Task("cola", BINARY, ("matthews_corrcoef", "accuracy"),
         Layout(3, label=1, has_header=False), Layout(1, names=("sentence", None, None))),
    Task("sst-2", BINARY, ("accuracy",), Layout(0, label=1, names=("sentence", None, "label")),
         Layout(1, names=("sentence", None, None))),
    _pair_task("mrpc", BINARY, ("accuracy", "f1"), (3, 4, 0),
               ("#1 String", "#2 String", "Quality"), (3, 4)),
    _pair_task("qqp", BINARY, ("accuracy", "f1"), (3, 4, 5),
               ("question1", "question2", "is_duplicate"), (1, 2)),
    _pair_task("mnli", ("contradiction", "entailment", "neutral"), ("accuracy",), (8, 9, -1),
               ("sentence1", "sentence2", "gold_label"), (8, 9),
               dev_files=("dev_matched.tsv", "dev_mismatched.tsv"),
               test_files=("test_matched.tsv", "test_mismatched.tsv")),
    _pair_task("qnli", ENTAILMENT, ("accuracy",), (1, 2, 3),
               ("question", "sentence", "label"), (1, 2)),
    _pair_task("rte", ENTAILMENT, ("accuracy",), (1, 2, 3),
               ("sentence1", "sentence2", "label"), (1, 2)),
    _pair_task("wnli", BINARY, ("accuracy",), (1, 2, 3),
               ("sentence1", "sentence2", "label"), (1, 2)),
    _pair_task("sts-b", None, ("pearson", "spearman"), (7, 8, 9),
               ("sentence1", "sentence2", "score"), (7, 8), score_range=(0.0, 5.0)),
)}
CUSTOM_TASK = "custom"
FIELDS = ("text_a", "text_b", "label")


@dataclasses.dataclass(frozen=True)
class CustomFormat:
  """A user's TSV/CSV task: the columns and labels that `TASKS` holds for GLUE.

  Attributes:
    text_a_column, text_b_column, label_column: 0-based column indices (< 0 from the end);
      text_b_column None for single texts. Test files are read without the label column.
    has_header: whether line 1 is a header (skipped, not checked).
    delimiter: "\\t" or ",".
    quoting: csv quoting with '"'; None means on for "," and off for "\\t".
    labels: label names in class-id order (required unless `regression`).
    regression: a float target (one output, MSE loss, Pearson/Spearman).
  """
  text_a_column: int = 0
  text_b_column: Optional[int] = None
  label_column: int = 1
  has_header: bool = False
  delimiter: str = "\t"
  quoting: Optional[bool] = None
  labels: tuple[str, ...] = ()
  regression: bool = False

  # The flag of tools/run_classifier.py that sets each field: messages name what was typed.
  FLAGS: ClassVar[dict[str, str]] = {
      "text_a_column": "--custom_text_a_column", "text_b_column": "--custom_text_b_column",
      "label_column": "--custom_label_column", "has_header": "--custom_header",
      "delimiter": "--custom_delimiter", "labels": "--custom_labels",
      "regression": "--custom_regression"}
  # The fields that describe the file read, not the model (whose settings are the labels,
  # regression, and whether it reads pairs): `reads_file_otherwise`.
  FILE_LAYOUT: ClassVar[frozenset] = frozenset(
      {"text_a_column", "text_b_column", "label_column", "has_header", "delimiter", "quoting"})

  def reads_file_otherwise(self, name: str, recorded: object) -> bool:
    """Whether this format's field `name`, against a run's `recorded` value, only reads a
    file laid out otherwise (columns, header, delimiter) with the same model: an evaluation
    of the run's model may read its dev file so (`tfbert.tasks.fine_tuning.run_settings`).
    A text_b column given where the run read none, or none where it read one, is the
    model's (single texts or pairs)."""
    if name not in self.FILE_LAYOUT:
      return False
    if name == "text_b_column":
      return (self.text_b_column is None) == (recorded is None)
    return True

  def describe_part(self, name: str, value: object) -> str:
    """Field `name` at `value` as its flag spells it (`FLAGS`), e.g. "--custom_delimiter=tab"."""
    if name == "delimiter":
      value = {"\t": "tab", ",": "comma"}.get(value, repr(value))
    elif name == "quoting":
      value = {None: "the delimiter's", True: "on", False: "off"}[value]
    elif value is None:
      value = "unset"
    elif isinstance(value, bool):
      flag = self.FLAGS.get(name, name)
      return flag if value else f"--no{flag.lstrip('-')}"
    elif isinstance(value, (tuple, list)):
      value = ",".join(map(str, value))
    return f"{self.FLAGS.get(name, name)}={value}"


def custom_task(fmt: CustomFormat) -> Task:
  """The `Task` of a user format; metrics: accuracy (+ F1 and MCC of the binary case).

  F1 counts `labels[1]` as the positive class.

  The messages name the flags of `tools/run_classifier.py` that set `labels`
  (`--custom_labels`) and `regression` (`--custom_regression`).

  Raises:
    ValueError: for a bad delimiter, labels with regression, no labels for classification,
      fewer than 2 or repeated labels.
  """
  if fmt.delimiter not in ("\t", ","):
    raise ValueError(f"delimiter must be a tab or a comma, got {fmt.delimiter!r}")
  if fmt.regression and fmt.labels:
    raise ValueError("give --custom_labels (classification) or --custom_regression (a float "
                     "target), not both")
  if not fmt.regression:
    if not fmt.labels:
      raise ValueError("a custom classification task needs --custom_labels (its label names "
                       "in class-id order, e.g. --custom_labels=neg,pos), or "
                       "--custom_regression for a float target")
    # A repeat first: ('neg', 'pos', 'neg') has 2 distinct labels; the repeat is the fault.
    positions = {}
    for i, label in enumerate(fmt.labels):
      positions.setdefault(label, []).append(i)
    repeats = [f"{label!r} {len(at)} times (positions {', '.join(map(str, at[:-1]))} and "
               f"{at[-1]})".replace(" 2 times", " twice")
               for label, at in positions.items() if len(at) > 1]
    if repeats:
      raise ValueError(f"--custom_labels names {' and '.join(repeats)}: each label once, in "
                       "class-id order")
    if len(fmt.labels) < 2:
      raise ValueError(f"--custom_labels needs >= 2 distinct labels, got {list(fmt.labels)}")
  columns = {"--custom_text_a_column": fmt.text_a_column,
             "--custom_text_b_column": fmt.text_b_column,
             "--custom_label_column": fmt.label_column}
  given = [(flag, column) for flag, column in columns.items() if column is not None]
  for i, (flag, column) in enumerate(given):
    for other, same in given[i + 1:]:
      if same == column:  # The label as a text: the answer leaks into the input.
        raise ValueError(f"{flag} and {other} are both column {column!r}: each of the text "
                         "columns and the label column must be its own")
  quoting = fmt.delimiter == "," if fmt.quoting is None else fmt.quoting
  layout = Layout(fmt.text_a_column, fmt.text_b_column, fmt.label_column, fmt.has_header,
                  delimiter=fmt.delimiter, quoting=quoting)
  if fmt.regression:
    labels, metrics = None, ("pearson", "spearman")
  else:
    labels = tuple(fmt.labels)
    metrics = ("accuracy", "f1", "matthews_corrcoef") if len(labels) == 2 else ("accuracy",)
  ext = ".csv" if fmt.delimiter == "," else ".tsv"
  return Task(CUSTOM_TASK, labels, metrics, layout, layout.unlabelled(), f"train{ext}",
              (f"dev{ext}",), (f"test{ext}",))


def get_task(name: str, custom: Optional[CustomFormat] = None) -> Task:
  """`TASKS[name]` (case-insensitive), or the custom task of `custom` for "custom".

  Raises:
    ValueError: for an unknown name, or "custom" without a format.
  """
  if not name:
    raise ValueError(f"a task name is needed: one of {sorted(TASKS)} or {CUSTOM_TASK!r}")
  key = name.lower()
  if key == CUSTOM_TASK:
    if custom is None:
      raise ValueError("task 'custom' needs its columns and labels (--custom_labels or "
                       "--custom_regression, --custom_text_a_column, ...; a CustomFormat "
                       "in Python), or a run directory whose run_config.json records them")
    return custom_task(custom)
  if key not in TASKS:
    raise ValueError(f"unknown task {name!r}; expected one of {sorted(TASKS)} or "
                     f"{CUSTOM_TASK!r}")
  return TASKS[key]


@dataclasses.dataclass
class GlueFile:
  """A read task file.

  Attributes:
    path: the file.
    examples: its rows, in file order (minus skipped ones).
    skipped: "file:line: reason" of each malformed row left out (`skip_malformed`).
  """
  path: str
  examples: list[InputExample]
  skipped: list[str] = dataclasses.field(default_factory=list)


class MalformedRow(ValueError):
  """A row that does not fit its layout; the message starts with `file:line:`."""


@dataclasses.dataclass(frozen=True)
class RecordedHeader:
  """A custom format's `has_header` taken from a run's record, not given on this command line:
  a file the run did not train on may have no header, and its line 1 would be lost.

  Attributes:
    source: where the setting comes from, e.g. "c01/run_config.json".
    train_header: (path, fields) of the train file's line 1 when still readable, else None.
    other_flags: the run's other custom flags, e.g. "--custom_delimiter=comma
      --custom_labels=neg,pos": given with a header flag (the custom flags describe the
      task as a whole once one is given).
  """
  source: str
  train_header: Optional[tuple[str, tuple[str, ...]]] = None
  other_flags: str = ""


def first_row(path: str, task: Task) -> Optional[tuple[str, ...]]:
  """The fields of `path`'s first non-blank row read with `task.layout`, or None when the
  file cannot be read."""
  try:
    for _, row in _rows(path, task.layout):
      return tuple(row)
  except (OSError, ValueError):
    return None
  return None


def read_examples(task: Task, path: str, split: str, *, skip_malformed: bool = False,
                  limit: Optional[int] = None,
                  recorded_header: Optional[RecordedHeader] = None) -> GlueFile:
  """Reads a task file.

  Args:
    task: the `Task`.
    path: the TSV/CSV file.
    split: "train", "dev" (labelled, `task.layout`) or "test" (`task.test_layout`); also
      the guid prefix.
    skip_malformed: report malformed rows in `GlueFile.skipped` instead of raising.
    limit: read at most this many examples (a prefix of the file).
    recorded_header: for a custom task whose `has_header` came from a run's record (not
      this command line), on a file the run did not train on: line 1 is skipped when it
      reads as the train file's header (its text columns' names), refused when it does
      not (a headerless file would lose its first row), and skipped with a warning when
      the train file's header cannot be read to compare.

  Returns:
    GlueFile.

  Raises:
    FileNotFoundError: if `path` does not exist.
    ValueError: a bad header, a line 1 that is not the train file's header under a
      `recorded_header`, or (without `skip_malformed`) a malformed row, as "file:line: ...".
  """
  if split not in ("train", "dev", "test"):
    raise ValueError(f"split must be train, dev or test, got {split!r}")
  layout = task.test_layout if split == "test" else task.layout
  result = GlueFile(path, [])
  rows = _rows(path, layout)
  width = None
  index = 0
  blank = []  # 1-based lines of rows with a blank text
  ids = None  # {a test file's own index: its line}, when its header names an index column.
  for line, row in rows:
    if width is None:
      width = len(row)
      if task.name == CUSTOM_TASK:  # (GLUE's layouts are fixed; a wrong file fails its header.)
        _check_distinct_columns(layout, width, f"{path}:{line}")
      if layout.has_header:
        _check_header(task, path, line, row, layout, split)
        if task.name == CUSTOM_TASK:
          _report_custom_header(task, path, line, row, layout, recorded_header)
        if split == "test" and row and row[0].strip().lower() == "index":
          ids = {}
        continue
    if limit is not None and len(result.examples) >= limit:
      break
    try:
      example = _example(task, layout, row, width, split, index, line, path)
      if ids is not None:  # Its predictions go under the file's own ids (sweep 27, A122).
        example = _own_index(example, row[0], ids, f"{path}:{line}")
      if _blank_text(example):
        blank.append(line)
        if split == "train":
          index += 1
          continue
      result.examples.append(example)
    except MalformedRow as e:
      if (not result.examples and not result.skipped and task.name == CUSTOM_TASK
          and not layout.has_header and _holds_a_label(task, layout, row) is False):
        # The first row, whose label cell is no label: a header read as an example.
        e = MalformedRow(f"{e}; line {line} looks like a header: pass --custom_header")
      if not skip_malformed:
        raise e from None
      result.skipped.append(str(e))
    index += 1
  _report_blank(task, path, split, blank)
  return result


def _own_index(example: InputExample, cell: str, seen: dict[int, int],
               where: str) -> InputExample:
  """`example` with the index its test file gives it (the `index` column's `cell`), checked
  to be a whole number not given before (`seen`: index -> line)."""
  try:
    value = int(cell.strip())
  except ValueError:
    raise MalformedRow(f"{where}: index {cell!r} is not a whole number (the test file's "
                       "index column numbers its predictions)") from None
  if value in seen:
    raise MalformedRow(f"{where}: index {value} is given again (first at line "
                       f"{seen[value]}): each prediction needs an index of its own")
  seen[value] = example.line
  return dataclasses.replace(example, guid=f"test-{value}", index=value)


def _blank_text(example: InputExample) -> bool:
  """Whether `example`'s text_a, or the text_b of a pair, yields no wordpiece: empty, white
  space, or only characters BERT's cleaning deletes (`text_normalization.is_blank`; a row
  of zero-width spaces went uncounted, sweep 33, A25)."""
  return text_normalization.is_blank(example.text_a) or (
      example.text_b is not None and text_normalization.is_blank(example.text_b))


def _report_blank(task: Task, path: str, split: str, lines: Sequence[int]) -> None:
  """Warns once for the rows of `path` with a blank text (`lines`, 1-based; `_blank_text`).

  A blank text is almost always a data error (a lost column, a bad export). Training
  leaves such rows out, as the SQuAD reader leaves out a blank question or context: the
  model would learn the label from [CLS] [SEP] alone. Dev and test rows are kept, so that
  a metric covers the whole file and a predictions file keeps one row per input row.
  """
  if not lines:
    return
  what = "text_a or text_b" if task.is_pair else "text"
  logging.warning(
      "%s: %d row(s) with a blank %s (first at %s:%d) %s; fix or remove them", path,
      len(lines), what, path, lines[0],
      "left out of training" if split == "train"
      else "kept (predicted from an empty text, so each row keeps its output)")


def _holds_a_label(task: Task, layout: Layout, row: Sequence[str]) -> Optional[bool]:
  """Whether `row`'s label cell is a label of `task` (one of its labels, as written or with
  white space around it or in another Unicode normalization, or a finite number for a
  regression); None without a label cell (a test layout, a short row)."""
  if layout.label is None or not -len(row) <= layout.label < len(row):
    return None
  cell = row[layout.label]
  if not task.is_regression:  # Spelt with white space or in NFD, it is still no header.
    return (cell in task.labels or cell.strip() in task.labels
            or unicode_forms.other_form_of(cell, task.labels) is not None)
  try:
    return math.isfinite(float(cell))
  except ValueError:
    return False


def _report_custom_header(task: Task, path: str, line: int, row: Sequence[str],
                          layout: Layout, recorded: Optional[RecordedHeader] = None) -> None:
  """Logs the line a custom file's --custom_header skips, and warns when its label cell
  holds a label: a headerless file then loses its first example without a word.

  With the setting from a run's record (`recorded`), a line 1 that is not the train file's
  header (its text columns' names differ) is refused, naming both lines and the flags that
  read the file either way; without the train header to compare, the skip is a warning.

  Raises:
    ValueError: `recorded` has the train header and line 1 does not match it.
  """
  shown = _shown(layout, row)
  if recorded is not None:
    others = f" {recorded.other_flags}" if recorded.other_flags else ""
    way_out = (f"pass --nocustom_header{others} to read line 1 as data, or --custom_header"
               f"{others} to skip it as a header")
    if recorded.train_header is None:
      logging.warning(
          "%s:%d skipped as a header by --custom_header of the run's record (%s), not "
          "given here, and the run's train file is not at hand to compare: %r; if the file "
          "has no header, %s", path, line, recorded.source, shown, way_out)
      return
    train_path, header = recorded.train_header
    columns = [c for c in (layout.text_a, layout.text_b) if c is not None]
    if [_cell(row, c) for c in columns] != [_cell(header, c) for c in columns]:
      raise ValueError(
          f"{path}:{line}: would be skipped as a header by --custom_header of the run's "
          f"record ({recorded.source}), not given here, but it is not the train file's "
          f"header ({train_path}:1: {_shown(layout, header)!r}): {shown!r}; {way_out}")
    logging.info("%s:%d skipped as a header (--custom_header of %s; the train file's "
                 "header): %r", path, line, recorded.source, shown)
    return
  logging.info("%s:%d skipped as a header (--custom_header): %r", path, line, shown)
  if _holds_a_label(task, layout, row):
    logging.warning(
        "%s:%d skipped as a header (--custom_header), but its label column %d holds %r, "
        "%s: leave --custom_header out if the file has no header", path, line, layout.label,
        row[layout.label], "a number" if task.is_regression else "one of the labels")


def _shown(layout: Layout, row: Sequence[str]) -> str:
  """A row as one line of at most 80 characters."""
  shown = layout.delimiter.join(row)
  return shown if len(shown) <= 80 else shown[:77] + "..."


def _cell(row: Sequence[str], column: int) -> Optional[str]:
  """`row[column]` (< 0 from the end), None outside the row."""
  return row[column] if -len(row) <= column < len(row) else None


class _GFileReader(io.RawIOBase):
  """A `tf.io.gfile.GFile` opened "rb" as the raw stream `io.TextIOWrapper` decodes."""

  def __init__(self, f):
    super().__init__()
    self._f = f

  def readable(self) -> bool:
    return True

  def readinto(self, buffer) -> int:
    data = self._f.read(len(buffer))
    buffer[:len(data)] = data
    return len(data)

  def close(self) -> None:
    if not self.closed:
      self._f.close()
    super().close()


def _open_text(path: str) -> IO[str]:
  """`path` as UTF-8 text, a byte-order mark dropped and line ends kept as read (the csv
  module's `newline=""`), streamed from a local file or a URL (`tfbert.runtime.files`)."""
  if not files.is_url(path):
    return open(path, encoding="utf-8-sig", newline="")
  return io.TextIOWrapper(io.BufferedReader(_GFileReader(files.open_file(path, "rb"))),
                          encoding="utf-8-sig", newline="")


# csv's field limit is one per process: raised while any reader here parses a row (counted
# across threads), and put back as found after the last one, so no other reader changes.
_FIELD_LIMIT = 2**31 - 1  # A C long everywhere.
_field_limit_lock = threading.Lock()
_field_limit_users = [0, None]  # [parses under way, the limit found by the first]


@contextlib.contextmanager
def _fields_of_any_size():
  """Python's csv field limit (131,072 characters by default) lifted for the block."""
  with _field_limit_lock:
    if _field_limit_users[0] == 0:
      _field_limit_users[1] = csv.field_size_limit(_FIELD_LIMIT)
    _field_limit_users[0] += 1
  try:
    yield
  finally:
    with _field_limit_lock:
      _field_limit_users[0] -= 1
      if _field_limit_users[0] == 0:
        csv.field_size_limit(_field_limit_users[1])


def _rows(path: str, layout: Layout):
  """(1-based line where the row starts, fields) of every non-blank row."""
  quoting = dict(quotechar='"') if layout.quoting else dict(quoting=csv.QUOTE_NONE)
  try:
    f = _open_text(path)
  except FileNotFoundError:
    raise FileNotFoundError(files.missing_file_message(path, "task file")) from None
  with f:
    reader = csv.reader(f, delimiter=layout.delimiter, **quoting)
    start = 1
    try:
      while True:
        with _fields_of_any_size():  # Not across the yield: the caller's code runs there.
          row = next(reader, None)
        if row is None:
          break
        if row:
          yield start, row
        start = reader.line_num + 1
    except UnicodeDecodeError:  # Met in a buffered chunk: find the byte's own line.
      files.decode_utf8(files.read_bytes(path), path)
      raise
    except csv.Error as e:
      raise MalformedRow(f"{path}:{start}: cannot be read: {e}") from None


def _check_distinct_columns(layout: Layout, width: int, where: str) -> None:
  """Raises ValueError when two columns of a custom task's layout, resolved against the
  file's `width` (a negative one counts from the end), are the same column: a text read
  from the label column trains on the answer. Named as the flags (`--custom_*_column`).
  Columns outside the row are left to the row's own "column ... is missing" message."""
  given = [(field, column) for field, column in
           zip(FIELDS, (layout.text_a, layout.text_b, layout.label))
           if column is not None and -width <= column < width]
  for i, (field, column) in enumerate(given):
    for other, other_column in given[i + 1:]:
      if column % width == other_column % width:
        raise ValueError(
            f"{where}: --custom_{field}_column ({column}) and --custom_{other}_column "
            f"({other_column}) are both column "
            f"{column % width} of its {_columns(width)}: each of the text columns and the "
            "label column must be its own; pass columns that differ")


def _check_header(task: Task, path: str, line: int, row: Sequence[str], layout: Layout,
                  split: str) -> None:
  """Raises ValueError, naming `path:line`, the column, what it holds and the layout expected,
  for a header whose columns read do not carry the task's names."""
  columns = (layout.text_a, layout.text_b, layout.label)
  for field, column, name in zip(FIELDS, columns, layout.names or (None,) * 3):
    if column is None or name is None:
      continue
    if -len(row) <= column < len(row):
      if row[column] == name:
        continue
      problem = f"header column {column} ({field}) should be {name!r}, found {row[column]!r}"
    else:
      problem = (f"{_columns(len(row))}, no column {column} ({field}) for the header name "
                 f"{name!r}{_delimiter_hint(task, row, layout)}")
    raise ValueError(f"{path}:{line}: {problem}; {expected_layout(task, split)}")


def _columns(count: int) -> str:
  return f"{count} column" + ("" if count == 1 else "s")


def expected_layout(task: Task, split: str) -> str:
  """The layout of a `task` file of `split` ("train", "dev", "test"), for messages, e.g. "a
  sst-2 test (predict) file is GLUE's test.tsv layout: a header '<1 column><TAB>sentence',
  then one row per example with the same columns"."""
  layout = task.test_layout if split == "test" else task.layout
  kind = "test (predict)" if split == "test" else split
  sep = "<TAB>" if layout.delimiter == "\t" else layout.delimiter
  places = (layout.text_a, layout.text_b, layout.label)
  named = {c: n for c, n in zip(places, layout.names or (None,) * 3) if c is not None and n}
  if layout.has_header and named:
    cells, gap = [], 0
    for column in range(max([c for c in named if c >= 0] + [-1]) + 1):
      if column not in named:
        gap += 1
        continue
      cells += [f"<{_columns(gap)}>"] * bool(gap) + [named[column]]
      gap = 0
    cells += [f"...{sep}{n}" for c, n in named.items() if c < 0]
    rows = f"a header '{sep.join(cells)}', then one row per example with the same columns"
  else:
    fields = ", ".join(f"{field} in column {c}" for field, c in zip(FIELDS, places)
                       if c is not None)
    rows = (f"{'a header line, then' if layout.has_header else 'no header,'} one "
            f"{_DELIMITERS[layout.delimiter]}-separated row per example, {fields}")
  if task.name == CUSTOM_TASK:
    return f"this custom {kind} file is read as {rows}"
  name = {"train": task.train_file, "dev": task.dev_files[0], "test": task.test_files[0]}[split]
  return f"a {task.name} {kind} file is GLUE's {name} layout: {rows}"


# The delimiters a user's file may hold instead of the one it is read with, as
# `tools/run_classifier.py`'s --custom_delimiter names them (None: one it does not read).
_DELIMITERS = {"\t": "tab", ",": "comma", ";": None}
_PLURALS = {"\t": "tabs", ",": "commas", ";": "semicolons"}


def _delimiter_hint(task: Task, row: Sequence[str], layout: Layout) -> str:
  """For a row of too few columns that holds another common delimiter (tab, comma,
  semicolon): "; the line holds tabs: ..." saying how to read it; else ""."""
  text = layout.delimiter.join(row)
  other = next((d for d in _DELIMITERS  # One that would give the line more columns.
                if d != layout.delimiter and len(text.split(d)) > len(row)), None)
  if other is None:
    return ""
  if task.name != CUSTOM_TASK:
    how = f"{task.name} files are tab-separated (GLUE's layout): save it so" + (
        ", or read it with --task_name=custom and --custom_delimiter=comma" * (other == ","))
  elif _DELIMITERS[other] is None:
    how = "--custom_delimiter reads tab or comma: save the file with one of those"
  else:
    how = (f"it is read with --custom_delimiter={_DELIMITERS[layout.delimiter]}: pass "
           f"--custom_delimiter={_DELIMITERS[other]}?")
  return f"; the line holds {_PLURALS[other]}: {how}"


def _example(task: Task, layout: Layout, row: Sequence[str], width: int, split: str,
             index: int, line: int, path: str) -> InputExample:
  """The InputExample of one row; raises MalformedRow naming file:line and the column."""
  where = f"{path}:{line}"
  if len(row) != width:
    raise MalformedRow(f"{where}: {len(row)} columns, expected {width} (as the first line)")

  def field(name, column):
    if column is None:
      return None
    if not -len(row) <= column < len(row):
      raise MalformedRow(f"{where}: column {column} ({name}) is missing ({_columns(len(row))})"
                         f"{_delimiter_hint(task, row, layout)}")
    return row[column]

  label = field("label", layout.label)
  if label is not None and task.is_regression:
    try:
      value = float(label)
    except ValueError:
      value = math.nan
    if not math.isfinite(value):  # "NaN", "inf": a loss of NaN at the first step.
      raise MalformedRow(f"{where}: column {layout.label} (label) is {label!r}, not a "
                         "finite number")
    _check_score(task, value, label, f"{where}: column {layout.label} (label)")
    label = value
  elif label is not None and label not in task.labels:
    spaced = ("; labels are matched as written, and this one has white space around "
              f"{label.strip()!r}" if label.strip() in task.labels else "")
    other = unicode_forms.other_form_of(label, task.labels)
    if other is not None:  # "négatif" in NFD against the NFC label (sweep 29, A52).
      spaced = unicode_forms.hint(f"it is {other!r} written with")
    raise MalformedRow(f"{where}: column {layout.label} (label) is {label!r}, not one of "
                       f"{', '.join(task.labels)}{spaced}")
  return InputExample(f"{split}-{index}", index, line, field("text_a", layout.text_a),
                      field("text_b", layout.text_b), label)


def _check_score(task: Task, value: float, text: str, where: str) -> None:
  """Raises MalformedRow, naming `where`, for a score outside the task's documented range."""
  if task.score_range is None:
    return
  low, high = task.score_range
  if not low <= value <= high:
    raise MalformedRow(f"{where} is {text!r}, outside {task.name}'s score range "
                       f"[{low:g}, {high:g}]: not a file of this task, or a score on "
                       "another scale?")


def task_files(task: Task, data_dir: Optional[str], split: str,
               override: Optional[str] = None) -> list[str]:
  """Paths of a split's files: `override` if given, else the task's names in `data_dir`.

  Raises:
    ValueError: with neither `override` nor `data_dir`.
  """
  if override:
    return [override]
  if not data_dir:
    raise ValueError(f"the {split} file needs data_dir or an explicit {split}_file")
  names = {"train": (task.train_file,), "dev": task.dev_files, "test": task.test_files}[split]
  return [os.path.join(data_dir, name) for name in names]


def split_name(path: str) -> str:
  """A file's results key: its name without extension ("dev", "dev_matched")."""
  return os.path.splitext(os.path.basename(path))[0]
