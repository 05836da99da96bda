"""Reads SQuAD v1.1 and v2.0 files (the official nested JSON) into typed examples.

Layout (`[...]` lists, `?` optional):

  {"version"?: str, "data": [{"title"?: str, "paragraphs": [{"context": str,
   "qas": [{"id": str, "question": str, "answers": [{"text": str, "answer_start": int}],
            "is_impossible"?: bool, "plausible_answers"?: [...same as answers]}]}]}]}

The "version" field is read by `squad_version`, as the official files write it: "1.1"
(v1.1), "v2.0" (v2.0); "v1.1", "2.0" and other "1.x" / "2.x" strings, with or without the
"v", mean the same, and a file without one (the allennlp fixture) is v1.1, as the official
evaluate-v1.1.py assumes. Every structural problem raises ValueError naming the file and the
JSON field path, e.g. `data[3].paragraphs[0].qas[5].answers[0].answer_start`; so does a
file without questions (or, for training, without one whose answer is at its offset).

Questions to predict may come without answers (no "answers", or "answers": [] without
"is_impossible": true), as google-research/bert's run_squad predicts them: when no question
of a file has any, it is read with `SquadDataset.has_answers` False (predicted, not scored).
A file where some questions have answers and others not is refused, naming one of each:
which are to be scored cannot be told. Training questions always need their answers.

Training reads differ from google-research/bert `read_squad_examples` in two ways:
* The answer must sit exactly at `answer_start` (`context[start:start + len(text)] ==
  text`). Google only checks that the whitespace-joined words covering the span contain
  the text, so a wrong offset can silently move the label. Here such a question is
  reported (`SkippedExample`, logged), counted and skipped, never repaired.
* A question with several answers trains on the first one (Google raises); all answers are
  kept on the example, for evaluation.
"""

import dataclasses
import gzip
import json
import logging
import re
from typing import Any, Optional

from tfbert.runtime import files, json_values
from tfbert.text import text_normalization, unicode_forms

_REQUIRED = object()


@dataclasses.dataclass(frozen=True)
class SquadAnswer:
  """One gold (or v2.0 plausible) answer.

  Attributes:
    text: the answer as annotated.
    answer_start: character (Python `str` index) offset of `text` in the context.
  """
  text: str
  answer_start: int

  @property
  def answer_end(self) -> int:
    """Exclusive character end of the answer in the context."""
    return self.answer_start + len(self.text)


@dataclasses.dataclass(frozen=True)
class SquadExample:
  """One question about one paragraph.

  Attributes:
    qas_id: the question's "id" (the key of predictions.json).
    question_text: the question.
    context_text: the paragraph, exactly as in the file (offsets index into it).
    answers: gold answers; empty for a v2.0 unanswerable question.
    is_impossible: v2.0's flag; False in v1.1.
    plausible_answers: v2.0's distractor spans of an unanswerable question.
    title: the article's title ("" when absent).
  """
  qas_id: str
  question_text: str
  context_text: str
  answers: tuple[SquadAnswer, ...]
  is_impossible: bool = False
  plausible_answers: tuple[SquadAnswer, ...] = ()
  title: str = ""


@dataclasses.dataclass(frozen=True)
class SkippedExample:
  """A question left out (a blank question or context; in training, a misplaced answer),
  and why.

  Attributes:
    qas_id: the question's id.
    field_path: JSON path of the offending field, e.g. `data[0].paragraphs[1].qas[2]
      .answers[0]`.
    reason: what is wrong, quoting the text found at `answer_start`.
  """
  qas_id: str
  field_path: str
  reason: str


@dataclasses.dataclass
class SquadDataset:
  """A parsed SQuAD file.

  Attributes:
    path: the file read.
    version: "1.1" or "2.0", what its "version" says (`squad_version`).
    examples: the questions in file order, minus the skipped ones.
    skipped: questions whose question or context is blank, and training questions whose
      answer is not at `answer_start`.
    unanswerable: JSON path of the first `is_impossible: true` (a SQuAD 2.0 question),
      e.g. `data[0].paragraphs[2].qas[1].is_impossible`; None when every question has an
      answer. A "1.1" file may have one: its version then contradicts its content.
    has_answers: True when every question has answers (or `is_impossible: true`), so that
      predictions can be scored; False for a file to predict only, none of whose questions
      has any (never a training file).
  """
  path: str
  version: str
  examples: list[SquadExample]
  skipped: list[SkippedExample] = dataclasses.field(default_factory=list)
  unanswerable: Optional[str] = None
  has_answers: bool = True

  @property
  def is_v2(self) -> bool:
    """True when the file says SQuAD 2.0 (scored by the v2.0 script)."""
    return self.version == "2.0"


def squad_version(version: Optional[str], source: str = "dataset") -> str:
  """The SQuAD version a file's "version" field names: "1.1" or "2.0".

  Args:
    version: the field as written ("1.1", "v1.1", "2.0", "v2.0", ...), None when absent.
    source: the file, for the error message.

  Raises:
    ValueError: naming `source` for anything but an optional "v" and "1.x" or "2.x".
  """
  match = re.fullmatch(r"[vV]?([12])\.[0-9]+", "1.1" if version is None else version)
  if not match:
    raise ValueError(f"{source}: version: expected '1.x' or '2.x', got {version!r} (the "
                     "official files write '1.1' and 'v2.0')")
  return "2.0" if match.group(1) == "2" else "1.1"


def load_json(path: str) -> Any:
  """Reads a JSON file, gzip-compressed or not, with errors that name the file.

  Raises:
    FileNotFoundError: if `path` does not exist.
    ValueError: if it is not (gzip-compressed) UTF-8 JSON.
  """
  try:
    with files.open_file(path, "rb") as f:
      data = f.read()
    if data[:2] == b"\x1f\x8b":  # The gzip magic number.
      data = gzip.decompress(data)
    # Bad bytes named at path:line; a key given twice (a predictions file answering one
    # question twice would be scored on one) named with the file.
    return json_values.loads(files.decode_utf8(data, path), path)
  except FileNotFoundError:
    raise FileNotFoundError(files.missing_file_message(path, "SQuAD JSON file")) from None
  except (gzip.BadGzipFile, EOFError, UnicodeDecodeError, json.JSONDecodeError) as e:
    raise ValueError(f"{path} is not valid (gzip-compressed) UTF-8 JSON: {e}") from None


def read_squad_file(path: str, is_training: bool) -> SquadDataset:
  """Reads and checks a SQuAD v1.1 / v2.0 file.

  Args:
    path: the dataset JSON, optionally gzip-compressed.
    is_training: if True, questions whose (first) answer is not at `answer_start` are
      skipped and reported in `SquadDataset.skipped` (as a blank question or context is,
      training or not).

  Returns:
    SquadDataset.

  Raises:
    FileNotFoundError, ValueError: see `load_json` and `parse_squad`.
  """
  return parse_squad(load_json(path), path, is_training)


def parse_squad(data: Any, source: str, is_training: bool) -> SquadDataset:
  """Turns the official JSON layout into a SquadDataset (see `read_squad_file`).

  Raises:
    ValueError: naming `source` and the JSON field path of a missing or mistyped field,
      an unknown version, a duplicate question id, an answerable training question without
      answers, questions to predict of which some have answers and some not, or no
      questions at all (training: none whose answer is at its offset).
  """
  top = _Fields(data, "", source)
  dataset = SquadDataset(source, squad_version(top.get("version", str, None), source), [])
  seen = {}
  first = {}  # Has answers (or is_impossible) -> (JSON path, id) of the first such question.
  for article in top.items("data"):
    title = article.get("title", str, "")
    for paragraph in article.items("paragraphs"):
      context = paragraph.get("context", str)
      for qa in paragraph.items("qas"):
        example = _example(qa, title, context)
        if example.qas_id in seen:
          raise ValueError(f"{source}: {qa.path}.id: {example.qas_id!r} is also the id of "
                           f"{seen[example.qas_id]}")
        seen[example.qas_id] = qa.path
        labelled = bool(example.answers) or example.is_impossible
        if (is_training and not labelled) or (labelled and "answers" not in qa.value):
          raise _no_answers(qa)
        first.setdefault(labelled, (qa.path, example.qas_id))
        if example.is_impossible and not dataset.unanswerable:
          dataset.unanswerable = f"{qa.path}.is_impossible"
        skip = _blank(example, qa.path, paragraph.path) or (
            _misaligned(example, qa.path) if is_training else None)
        if skip:
          logging.warning("Skipping %s question %s (%s): %s",
                          "training" if is_training else "the", skip.qas_id,
                          skip.field_path, skip.reason)
          dataset.skipped.append(skip)
        else:
          dataset.examples.append(example)
  if is_training or dataset.skipped:
    logging.info("%s: %d %squestions, %d skipped (blank question or context%s)", source,
                 len(dataset.examples), "training " if is_training else "",
                 len(dataset.skipped), ", answer not at answer_start" if is_training else "")
  _check_not_empty(dataset, len(top.value["data"]))
  _check_labels(dataset, first)
  return dataset


def _no_answers(qa: "_Fields") -> ValueError:
  """The error of a question that needs answers (training, or a scored file) and has none."""
  if "answers" not in qa.value:
    return ValueError(f"{qa.source}: {qa.path}.answers is missing")
  return ValueError(f"{qa.source}: {qa.path}.answers: empty, but the question is not marked "
                    "is_impossible")


def _check_labels(dataset: SquadDataset, first: dict) -> None:
  """Sets `dataset.has_answers` from `first` (`parse_squad`); refuses a file of questions
  of which some have answers and some not (which are to be scored cannot be told)."""
  if True in first and False in first:
    (without, without_id), (with_, with_id) = first[False], first[True]
    raise ValueError(
        f"{dataset.path}: {without}: question {without_id!r} has no answers, but {with_}: "
        f"question {with_id!r} has: give every question its answers (\"answers\": [] with "
        "\"is_impossible\": true for a SQuAD 2.0 unanswerable one) to score the predictions, "
        "or none to predict only")
  dataset.has_answers = False not in first
  if not dataset.has_answers:
    logging.info("%s: no question has answers: its %d questions can be predicted, not "
                 "scored", dataset.path, len(dataset.examples))


def _check_not_empty(dataset: SquadDataset, num_articles: int) -> None:
  """Raises ValueError when nothing is left to train on, predict or score."""
  if dataset.skipped and not dataset.examples:
    first = dataset.skipped[0]
    raise ValueError(f"{dataset.path}: none of its {len(dataset.skipped)} questions can be "
                     f"used (first: {first.field_path}: {first.reason}): fix them")
  if not dataset.examples:
    raise ValueError(f"{dataset.path}: data: no questions (in {num_articles} articles)")


def _example(qa: "_Fields", title: str, context: str) -> SquadExample:
  """One SquadExample from a checked `qas[i]` entry; "answers" may be missing or empty
  (`parse_squad` decides whether the question needs them)."""
  answers = tuple(_answer(a) for a in qa.items("answers", required=False))
  is_impossible = qa.get("is_impossible", bool, False)
  if is_impossible and answers:
    raise ValueError(f"{qa.source}: {qa.path}.answers: is_impossible is true but "
                     f"{len(answers)} answer(s) are given")
  plausible = tuple(_answer(a) for a in qa.items("plausible_answers", required=False))
  return SquadExample(qas_id=qa.get("id", str), question_text=qa.get("question", str),
                      context_text=context, answers=answers, is_impossible=is_impossible,
                      plausible_answers=plausible, title=title)


def _answer(fields: "_Fields") -> SquadAnswer:
  start = fields.get("answer_start", int)
  if start < 0:
    raise ValueError(f"{fields.source}: {fields.path}.answer_start: negative ({start})")
  return SquadAnswer(text=fields.get("text", str), answer_start=start)


def _blank(example: SquadExample, qa_path: str, paragraph_path: str
           ) -> Optional[SkippedExample]:
  """A SkippedExample if the question or its context yields no wordpiece (nothing to ask,
  or nothing to answer from): empty, white space, or only characters BERT's cleaning
  deletes such as zero-width spaces (`text_normalization.is_blank`; sweep 33, A25), else
  None."""
  for text, path, what in ((example.question_text, f"{qa_path}.question", "question"),
                           (example.context_text, f"{paragraph_path}.context", "context")):
    if text_normalization.is_blank(text):
      return SkippedExample(example.qas_id, path, f"the {what} is blank ({text!r})")
  return None


def _misaligned(example: SquadExample, qa_path: str) -> Optional[SkippedExample]:
  """A SkippedExample if the training answer is not exactly at its offset, else None."""
  if example.is_impossible:
    return None
  answer = example.answers[0]
  found = example.context_text[answer.answer_start:answer.answer_end]
  if answer.text and found == answer.text:
    return None
  reason = (f"answer text {answer.text!r} is not at answer_start {answer.answer_start}; "
            f"the context has {found!r} there")
  if (answer.text and answer.text not in example.context_text
      and unicode_forms.nfc(answer.text) in unicode_forms.nfc(example.context_text)):
    # An NFD answer in an NFC context, or the reverse (sweep 29, A58).
    reason += unicode_forms.hint("the context holds it in")
  return SkippedExample(example.qas_id, f"{qa_path}.answers[0]", reason)


class _Fields:
  """A JSON object with its field path, whose accessors check types."""

  def __init__(self, value: Any, path: str, source: str):
    if not isinstance(value, dict):
      raise ValueError(f"{source}: {path or '(top level)'}: expected a JSON object, "
                       f"got {_describe(value)}")
    self.value, self.path, self.source = value, path, source

  def _sub(self, key: str) -> str:
    return f"{self.path}.{key}" if self.path else key

  def get(self, key: str, kind: type, default: Any = _REQUIRED) -> Any:
    """`value[key]`, checked to be exactly of `kind` (a bool is not an int)."""
    if key not in self.value:
      if default is _REQUIRED:
        raise ValueError(f"{self.source}: {self._sub(key)} is missing")
      return default
    found = self.value[key]
    if not isinstance(found, kind) or (kind is int and isinstance(found, bool)):
      raise ValueError(f"{self.source}: {self._sub(key)}: expected {kind.__name__}, got "
                       f"{_describe(found)}")
    return found

  def items(self, key: str, required: bool = True) -> list["_Fields"]:
    """The objects of the list `value[key]`, each with its own path."""
    found = self.get(key, list, _REQUIRED if required else [])
    return [_Fields(item, f"{self._sub(key)}[{i}]", self.source)
            for i, item in enumerate(found)]


def _describe(value: Any) -> str:
  text = json.dumps(value, ensure_ascii=False)
  return f"{type(value).__name__} {text[:40] + '...' if len(text) > 40 else text}"
