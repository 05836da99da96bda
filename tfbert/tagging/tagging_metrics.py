"""Entity-level scores of a tagging, as conlleval and seqeval define them.

An entity is a maximal chunk of tags (sentence, first word, last word, type): `B-X` begins
one, `I-X` continues an X entity, and an `I-X` that does not continue an X entity begins a
new one (conlleval's lenient chunking, seqeval's default mode). The chunks come from
seqeval (`seqeval.metrics.sequence_labeling.get_entities`, the well-kept implementation
the Hugging Face examples use); precision, recall and F1 are micro-averaged over exact
(span, type) matches, and per type. Token accuracy is seqeval's `accuracy_score`.

`read_predictions` joins a system output to its gold file by line position (the layout of
the WNUT 2017 submissions: `word tag` lines, TAB or space separated, CRLF allowed, the
final empty line possibly missing), counting neither file's `-DOCSTART-` lines nor the
blank line after each (document separators: `tools/run_ner.py` leaves them out); it
refuses a file where more than a quarter of the tokens are not the gold file's words
(predictions of another text), and warns of predicted entity types the gold never has
(predictions of another tag set).
"""

import bisect
import collections
import os
import unicodedata
from typing import Collection, Optional, Sequence

from absl import logging
from seqeval.metrics import accuracy_score
from seqeval.metrics.sequence_labeling import get_entities

from tfbert.runtime import files
from tfbert.tagging.conll import DOCSTART, Sentence, check_tag, document_lines, fields_of


def entities(tags: Sequence[Sequence[str]]) -> set[tuple[int, str, int, int]]:
  """{(sentence, type, first word, last word)} of each sentence's tags (seqeval's chunks)."""
  return {(index, kind, start, end) for index, sentence in enumerate(tags)
          for kind, start, end in get_entities(list(sentence))}


def _prf(gold: int, predicted: int, correct: int) -> dict[str, float]:
  """Percent precision/recall/F1 from counts (0 where undefined, as conlleval prints)."""
  precision = 100.0 * correct / predicted if predicted else 0.0
  recall = 100.0 * correct / gold if gold else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return {"gold": gold, "pred": predicted, "correct": correct, "precision": precision,
          "recall": recall, "f1": f1}


def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict:
  """Entity-level micro scores, per type, and token accuracy (percent).

  Args:
    gold, predicted: the tags of each sentence, as many sentences and words in each.

  Returns:
    {"precision", "recall", "f1": percent; "gold", "pred", "correct": entity counts;
    "accuracy": percent of words tagged right; "per_type": {type: the same five}}.

  Raises:
    ValueError: sentence or word counts differ.
  """
  if len(gold) != len(predicted):
    raise ValueError(f"{len(gold)} gold sentences, {len(predicted)} predicted")
  for index, (g, p) in enumerate(zip(gold, predicted)):
    if len(g) != len(p):
      raise ValueError(f"sentence {index}: {len(g)} gold tags, {len(p)} predicted")
  gold_entities, predicted_entities = entities(gold), entities(predicted)
  correct = gold_entities & predicted_entities
  by_type = collections.defaultdict(lambda: [0, 0, 0])
  for column, found in enumerate((gold_entities, predicted_entities, correct)):
    for entity in found:
      by_type[entity[1]][column] += 1
  words = sum(len(g) for g in gold)
  return {**_prf(len(gold_entities), len(predicted_entities), len(correct)),
          "accuracy": 100.0 * accuracy_score([list(g) for g in gold], [list(p) for p in predicted])
          if words else 0.0,
          "per_type": {kind: _prf(*counts) for kind, counts in sorted(by_type.items())}}


# The largest share of a predictions file's tokens that may differ from the gold tokens on
# their lines (see `read_predictions`).
MAX_CHANGED_TOKENS = 0.25


def _normalized(token: str) -> str:
  """The form tokens are compared in: NFKC, case-folded."""
  return unicodedata.normalize("NFKC", token).casefold()


def _gold_document_lines(gold_path: str) -> tuple[set[int], int]:
  """(`document_lines`, the count of -DOCSTART- lines) of the gold file at `gold_path`;
  none when it is no local file."""
  if not os.path.isfile(gold_path):
    return set(), 0
  with files.open_file(gold_path, "rb") as f:
    lines = files.decode_utf8(f.read(), gold_path).split("\n")
  return document_lines(lines), _docstarts(lines)


def _docstarts(lines: Sequence[str]) -> int:
  """How many -DOCSTART- lines `lines` hold."""
  return sum(1 for line in lines if fields_of(line)[:1] == [DOCSTART])


def read_predictions(path: str, gold: Sequence[Sentence], gold_path: str = "gold", *,
                     max_changed_tokens: float = MAX_CHANGED_TOKENS,
                     gold_document_lines: Optional[Collection[int]] = None
                     ) -> list[list[str]]:
  """The tag of each gold word from a system output, joined by line position.

  Line i of `path` predicts the word on line i of the gold file: its first field is the
  token, its last the tag (`conll.fields_of`: split at tabs where the line holds one, else at
  spaces). Every other line must be empty.
  Lines are counted without either file's `-DOCSTART-` lines and the blank line after each
  (`conll.document_lines`): document separators, which `read_conll` skips too, so a system
  output that leaves them out (`tools/run_ner.py`'s) or keeps them is joined alike.

  The tokens are compared with the gold words (after NFKC and case folding), but a few may
  differ: a system may have normalized its text (the WNUT 2017 submission of MIC-CIS spells
  `gt` as `get`, `Defence` as `Defense`, and URLs as `url`: 1,283 of 23,394 tokens, 5.5%,
  and its official score uses the gold words). Predictions of another text differ on almost
  every line (the WNUT 2017 test words agree with the dev or train words on the same lines
  for under 1% of them). So a file is refused when more than `max_changed_tokens` (a
  quarter) of its tokens differ, naming the first that does; below that, the differing
  tokens are taken as the system's normalization and scored with the gold words, with a
  warning naming the first (both files' lines and words) and the count.

  Args:
    path: the system output.
    gold: the gold file's sentences (`conll.read_conll`).
    gold_path: the gold file, named in messages.
    max_changed_tokens: the largest share of tokens that may differ from the gold words.
    gold_document_lines: the gold file's `conll.document_lines`; None reads them from
      `gold_path` when it is a local file.

  Raises:
    ValueError: `path:line` of a missing or malformed prediction, of a prediction where
      the gold file has none, or of the first changed token of a file with too many.
  """
  with files.open_file(path, "rb") as f:
    lines = files.decode_utf8(f.read(), path).split("\n")
  if gold_document_lines is None:
    gold_document_lines, gold_docstarts = _gold_document_lines(gold_path)
  else:  # Given in memory: each run of skipped lines that starts after a word is one.
    gold_docstarts = sum(1 for n in gold_document_lines if n - 1 not in gold_document_lines)
  gold_skipped = sorted(gold_document_lines)
  skipped = document_lines(lines)
  # Line numbers of the predictions, by position without the document separators.
  numbers = [number for number in range(1, len(lines) + 1) if number not in skipped]

  def position(gold_line: int) -> int:  # 1-based, without the gold's separators.
    return gold_line - bisect.bisect_left(gold_skipped, gold_line)

  docstarts = _docstarts(lines)
  hint = (f" (-DOCSTART- lines and the blank line after each are skipped in both files: "
          f"{gold_path} has {gold_docstarts}, {path} {docstarts}; check that each document's "
          "sentences line up)") if docstarts or gold_docstarts else ""
  # What the gold file has at each position: (sentence, word, gold line) of its words.
  wanted = {position(gold_line): (k, word, gold_line) for k, sentence in enumerate(gold)
            for word, gold_line in zip(sentence.words, sentence.lines)}
  # The last line of the file (a final newline ends a line, it does not begin one).
  end = len(lines) - 1 if lines[-1] == "" else len(lines)
  last_gold = max(sentence.lines[-1] for sentence in gold) if gold else 0
  predicted, changed = [[] for _ in gold], []
  # One pass in line order, so that the first misaligned line is the one named.
  for index in range(1, max(len(numbers), max(wanted, default=0)) + 1):
    number = numbers[index - 1] if index <= len(numbers) else end + index - len(numbers)
    line = lines[number - 1] if number <= end else ""
    if index not in wanted:
      if line.strip():
        raise ValueError(f"{path}:{number}: a prediction where {gold_path} has no word: "
                         f"{line.strip()!r}{hint}")
      continue
    k, word, gold_line = wanted[index]
    if number > end:
      raise ValueError(f"{path} ends at line {end}, {gold_path} goes on to line {last_gold} "
                       f"(its line {gold_line}, {word!r}, is in sentence {k + 1} of {len(gold)}): "
                       f"incomplete predictions; predict the whole of {gold_path}{hint}")
    if not line.strip():
      raise ValueError(f"{path}:{number}: a blank line (sentence break) where {gold_path}:"
                       f"{gold_line} has the word {word!r}: line i of {path} must predict the "
                       f"word on line i of {gold_path}{hint}")
    fields = fields_of(line)
    if len(fields) < 2:
      raise ValueError(f"{path}:{number}: need a token and a tag for {gold_path}:{gold_line} "
                       f"({word!r}), got {' '.join(fields)!r}{hint}")
    problem = check_tag(fields[-1])
    if problem:  # Named as the predictions' (not the gold file's columns).
      first = ("; its first field is the tag "
               f"{fields[0]!r}: the file is laid out tag first" if not check_tag(fields[0])
               else "")
      raise ValueError(
          f"{path}:{number}: predictions file: its last field, {problem} (a predictions file "
          f"holds the word, then the predicted tag last; evaluate_ner's --token_column and "
          f"--tag_column describe the gold file {gold_path} only){first}: write each line "
          f"as word<TAB>tag{hint}")
    if _normalized(fields[0]) != _normalized(word):
      changed.append((number, fields[0], word, gold_line))
    predicted[k].append(fields[-1])
  words = sum(len(sentence.words) for sentence in gold)
  if changed:
    number, token, word, gold_line = changed[0]
    first = (f"{path}:{number}: token {token!r} is not the gold file's {word!r} "
             f"({gold_path}:{gold_line}); {len(changed)} of {words} tokens differ from "
             f"{gold_path}'s")
    if len(changed) > max_changed_tokens * words:
      raise ValueError(
          f"{first} (at most {max_changed_tokens:.0%} may, as a system's normalization of its "
          f"text): are these predictions of another file?{hint}")
    # Never silent: a file of the same shape predicting another text scores all the same.
    logging.warning("%s", f"{first} (a system's normalization of its text? up to "
                    f"{max_changed_tokens:.0%} may differ): scored with the gold words; if "
                    f"these are predictions of another file, predict {gold_path} itself")
  _warn_unknown_types(path, [s.tags for s in gold], predicted, gold_path)
  return predicted


def _warn_unknown_types(path: str, gold: Sequence[Sequence[str]],
                        predicted: Sequence[Sequence[str]], gold_path: str) -> None:
  """Warns when `path` predicts an entity type that never occurs in the gold file, naming
  those types and the gold's types never predicted: another tag set (PER against person)
  scored F1 0.0 without a word (sweep 33, A98). Scored all the same: a system may predict a
  type the gold lacks."""
  gold_types = {kind for _, kind, _, _ in entities(gold)}
  predicted_types = {kind for _, kind, _, _ in entities(predicted)}
  unknown = sorted(predicted_types - gold_types)
  if not unknown:
    return
  unpredicted = sorted(gold_types - predicted_types)
  logging.warning("%s", f"{path}: predicts entity type(s) {', '.join(unknown)}, which "
                  f"{gold_path} never has; {gold_path}'s type(s) never predicted: "
                  f"{', '.join(unpredicted) or 'none'} (its types: "
                  f"{', '.join(sorted(gold_types)) or 'none'}): an entity of a type the gold "
                  "lacks never matches; predictions of another tag set?")
