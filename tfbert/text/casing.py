"""The casing of a checkpoint, so that no tool tokenizes it with the wrong one.

A cased checkpoint read with an uncased tokenizer (or the reverse) trains and predicts
without any error: most word pieces still exist, they are just the wrong ones, and
published SQuAD F1 scores have dropped from ~88 to below 80 (or to single digits) this way.
So every tool that tokenizes asks `resolve_do_lower_case` before any work. It gathers
what the checkpoint says about its casing (`checkpoint_casing`), in this order:

1. `tokenizer_config.json`'s `do_lower_case` in the checkpoint's directory (a Hugging Face
   directory, or any tfbert export: `tfbert.checkpoints.huggingface.write_tokenizer_files`);
2. a tfbert run directory's `run_config.json` (`do_lower_case`), beside the `.keras` file
   or one level up for `<run>/best/model.keras`;
3. the vocabulary itself (`vocab_casing`): a vocabulary with any word piece holding an
   upper-case letter is cased, since an uncased tokenizer can never produce that piece; one
   with lower-case letters only is uncased; one without cased letters (e.g. only CJK
   characters) says nothing.

A `--do_lower_case` that contradicts any of them fails before any work, naming both
sources; so do sources that contradict each other. `--allow_casing_mismatch` lets the flag
win on purpose (logged). The messages name the settings as the caller spells them (`Terms`:
the tools' flags, or `tfbert.load`'s keyword arguments `do_lower_case=False`,
`allow_casing_mismatch=True`). Not given, the flag follows the checkpoint; with no evidence at
all it is google-research/bert's default, True.
"""

import dataclasses
import os
from typing import Iterable, Optional, Sequence

from absl import logging

from tfbert.runtime import files, json_values, validation
from tfbert.text import tokenization

TOKENIZER_CONFIG = "tokenizer_config.json"
RUN_CONFIG = "run_config.json"
VOCAB = "vocab.txt"
DEFAULT_DO_LOWER_CASE = True  # google-research/bert's flag default.


@dataclasses.dataclass(frozen=True)
class Casing:
  """One piece of evidence about a checkpoint's casing.

  Attributes:
    do_lower_case: what the source says.
    source: the file and what in it says so, for messages.
  """
  do_lower_case: bool
  source: str


class CasingMismatchError(ValueError):
  """A `do_lower_case` that contradicts the checkpoint (or sources that disagree)."""


def vocab_casing(vocab_file: str) -> Optional[Casing]:
  """The casing a WordPiece vocabulary's content implies, or None if it implies none.

  Bracketed special tokens ([CLS], [unused0], ...) do not count.

  Raises:
    FileNotFoundError, ValueError: see `tokenization.load_vocab` (a missing file, one that
      is not UTF-8, ...).
  """
  upper, lower, example = 0, 0, None
  for token in tokenization.load_vocab(vocab_file):
    if token.startswith("[") and token.endswith("]"):
      continue
    if token != token.lower():
      upper += 1
      example = example or token
    elif token != token.upper():
      lower += 1
  if upper:
    return Casing(False, f"{vocab_file} (vocabulary content: {upper} word pieces with "
                         f"upper-case letters, e.g. {example!r}, so it is cased)")
  if lower:
    return Casing(True, f"{vocab_file} (vocabulary content: lower-case letters only, "
                        f"{lower} word pieces, so it is uncased)")
  return None


def _vocab_beside(checkpoint: str) -> list[str]:
  """The first vocabulary of `checkpoint_directories` (as a list; none: empty); a symbolic
  link to nothing before it is refused, named."""
  for directory in checkpoint_directories(checkpoint):
    vocab = os.path.join(directory, VOCAB)
    files.check_not_dangling(vocab, "vocabulary")
    if files.isfile(vocab):
      return [vocab]
  return []


def _json_casing(path: str, what: str) -> Optional[Casing]:
  """`do_lower_case` of the JSON file at `path`, if it is there and says so; a symbolic link
  to nothing is refused, named (its record, unread, could decide the casing)."""
  files.check_not_dangling(path, "casing record")
  if not files.isfile(path):
    return None
  values = json_values.read(path)  # Bad JSON, or a key given twice, named.
  if not isinstance(values, dict):
    raise ValueError(f"{path}: not a JSON object: {type(values).__name__}")
  value = values.get("do_lower_case")
  if value is not None and not isinstance(value, bool):
    raise ValueError(f"{path}: do_lower_case must be true or false, got {value!r}")
  if os.path.basename(path) == TOKENIZER_CONFIG:
    check_basic_tokenization(path, values, value)
    check_special_tokens(path, values)
  if value is None:
    return None
  return Casing(value, f"{path} ({what} do_lower_case: {str(value).lower()})")


def check_basic_tokenization(path: str, values: dict, do_lower_case: Optional[bool]) -> None:
  """Refuses a Hugging Face `tokenizer_config.json` whose basic tokenization differs from
  google-research/bert's, which tfbert's tokenizer follows (`tfbert.text.tokenization`):
  accents stripped exactly when lower-casing (`strip_accents` null, or equal to
  `do_lower_case`), every CJK character a word of its own (`tokenize_chinese_chars`), the
  basic split done (`do_basic_tokenize`). Such a model's texts would be split otherwise
  than it was trained on, without a word (sweep 27, B122: `café` became `cafe`, where its
  tokenizer gives `[UNK]`).

  Raises:
    ValueError: naming the file and each setting tfbert does not follow.
  """
  strip = values.get("strip_accents")
  lower = True if do_lower_case is None else do_lower_case  # BertTokenizer's default.
  problems = ([f"strip_accents {str(strip).lower()} with do_lower_case {str(lower).lower()}"]
              if strip is not None and strip != lower else [])
  problems += [f"{name} false" for name in ("tokenize_chinese_chars", "do_basic_tokenize")
               if values.get(name) is False]
  if problems:
    raise ValueError(
        f"{path}: {', '.join(problems)}: tfbert tokenizes as google-research/bert does "
        "(accents stripped exactly when lower-casing, each CJK character a word, the basic "
        "split always), so this model's texts would be split otherwise than it was trained "
        "on; use the model with the tokenizer it names")


# google-research/bert's special tokens, which tfbert packs with (`tfbert.text.tokenization`).
SPECIAL_TOKENS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                  "cls_token": "[CLS]", "mask_token": "[MASK]"}
SPECIAL_TOKENS_FILE = "special_tokens_map.json"


def check_special_tokens(path: str, values: dict) -> None:
  """Refuses a Hugging Face tokenizer file (`tokenizer_config.json`,
  `special_tokens_map.json`) naming other special tokens than BERT's: tfbert packs every
  text with [CLS] and [SEP] and masks with [MASK], so a model trained with "[unused1]" as
  its classification token was read with another one, without a word (sweep 34, B36). A
  token is a str or transformers' `{"content": ...}`.

  Raises:
    ValueError: naming the file and each token that differs.
  """
  problems = []
  for key, bert in SPECIAL_TOKENS.items():
    token = values.get(key)
    if isinstance(token, dict):
      token = token.get("content")
    if token is not None and token != bert:
      problems.append(f"{key} {token!r} (BERT's: {bert!r})")
  if problems:
    raise ValueError(f"{path}: {', '.join(problems)}: tfbert packs and masks texts with "
                     "google-research/bert's special tokens, and this model's tokenizer uses "
                     "others; use the model with the tokenizer it names")


def special_tokens_file_check(directory: str) -> None:
  """`check_special_tokens` of `directory`'s `special_tokens_map.json`, when there is one
  (a file that is no JSON object is named; one without special tokens passes)."""
  path = os.path.join(directory, SPECIAL_TOKENS_FILE)
  if not files.isfile(path):
    return
  values = json_values.read(path)
  if not isinstance(values, dict):
    raise ValueError(f"{path}: not a JSON object: {type(values).__name__}")
  check_special_tokens(path, values)


def vocabulary_casing(do_lower_case: Optional[bool], vocab_file: str, function: str,
                      allow_mismatch: bool = False) -> bool:
  """The casing to tokenize `vocab_file` with, for the Python function `function` that
  takes `do_lower_case` and `allow_casing_mismatch` keywords: the given one if the
  vocabulary agrees (or `allow_mismatch`), the vocabulary's when None
  (`resolve_do_lower_case`; cased entries mean cased).

  Raises:
    FileNotFoundError: `vocab_file` does not exist.
    CasingMismatchError: a given `do_lower_case` the vocabulary contradicts, naming the
      keyword arguments of `function` that fix it.
  """
  if not files.isfile(vocab_file):
    raise FileNotFoundError(files.missing_file_message(vocab_file, "vocabulary"))
  return resolve_do_lower_case(do_lower_case, checkpoint_casing(None, vocab_file),
                               allow_mismatch=allow_mismatch,
                               terms=keywords(function, allow_mismatch=True))


def checkpoint_directories(path: str) -> list[str]:
  """Where a checkpoint's casing records may sit: a directory as is; a file's (or a
  checkpoint prefix's) directory, and for `<run>/best/model.keras` the run directory."""
  # A checkpoint prefix is never the directory, even where a filesystem says so (`ram://`
  # calls any prefix of a file name a directory: `bert_model.ckpt` of `bert_model.ckpt.index`).
  if files.isdir(path) and not files.isfile(path + ".index"):
    return [path]
  directory = files.parent(path)
  places = [directory]
  if os.path.basename(directory) == "best":
    places.append(os.path.dirname(directory))
  return places


def checkpoint_casing(checkpoint: Optional[str] = None,
                      vocab_file: Optional[str] = None) -> list[Casing]:
  """Every piece of evidence about the casing of `checkpoint` and `vocab_file`.

  Args:
    checkpoint: a Hugging Face directory, a Google checkpoint prefix or a `.keras` file.
    vocab_file: the vocabulary the tool will tokenize with.

  Returns:
    The evidence in the module docstring's order (possibly empty).
  """
  evidence = []
  for directory in checkpoint_directories(checkpoint) if checkpoint else []:
    special_tokens_file_check(directory)
    for name, what in ((TOKENIZER_CONFIG, "tokenizer config"), (RUN_CONFIG, "tfbert run,")):
      found = _json_casing(os.path.join(directory, name), what)
      if found:
        evidence.append(found)
  vocabs = [vocab_file] if vocab_file else []
  if checkpoint and not vocabs:
    vocabs = _vocab_beside(checkpoint)
  for vocab in vocabs:
    found = vocab_casing(vocab)
    if found:
      evidence.append(found)
  return evidence


@dataclasses.dataclass(frozen=True)
class Terms:
  """How a caller of `resolve_do_lower_case` spells its two settings, so that a message
  tells each caller what to pass in its own words: a tool's flags (`FLAGS`) or a Python
  function's keyword arguments (`keywords`).

  Attributes:
    do_lower_case: the casing setting ("--do_lower_case", "do_lower_case").
    allow_mismatch: the override ("--allow_casing_mismatch", "allow_casing_mismatch"), or
      None when the caller has none.
    keyword: values spelled as Python's (`True`, `allow_casing_mismatch=True`), else as
      flags' (`true`, `--allow_casing_mismatch`).
    where: what the names are, appended to a message (" (keyword arguments of f)").
  """
  do_lower_case: str = "--do_lower_case"
  allow_mismatch: Optional[str] = "--allow_casing_mismatch"
  keyword: bool = False
  where: str = ""

  def value(self, do_lower_case: bool) -> str:
    """`do_lower_case` as this caller writes it ("True" or "true")."""
    return str(do_lower_case) if self.keyword else str(do_lower_case).lower()

  def setting(self, do_lower_case: bool) -> str:
    """E.g. "--do_lower_case=true", "do_lower_case=True"."""
    return f"{self.do_lower_case}={self.value(do_lower_case)}"

  def allowing(self) -> str:
    """The override set, e.g. "--allow_casing_mismatch", "allow_casing_mismatch=True"; for
    a caller without one, the argument of `resolve_do_lower_case`: "allow_mismatch=True"."""
    if self.allow_mismatch is None:
      return "allow_mismatch=True"
    return f"{self.allow_mismatch}=True" if self.keyword else self.allow_mismatch

  def choosing(self) -> str:
    """How to choose a casing on purpose, e.g. "--do_lower_case and
    --allow_casing_mismatch"."""
    choose = f"{self.do_lower_case}=True or False" if self.keyword else self.do_lower_case
    return choose + (f" and {self.allowing()}" if self.allow_mismatch else "")


FLAGS = Terms()  # The tools' (tfbert_flags.casing_flags).


def keywords(function: str, allow_mismatch: bool = True) -> Terms:
  """The `Terms` of a Python function taking `do_lower_case` (and `allow_casing_mismatch`
  when `allow_mismatch`) as keyword arguments."""
  return Terms("do_lower_case", "allow_casing_mismatch" if allow_mismatch else None,
               keyword=True, where=f" (keyword arguments of {function})")


def resolve_do_lower_case(do_lower_case: Optional[bool], evidence: Sequence[Casing], *,
                          allow_mismatch: bool = False, terms: Terms = FLAGS) -> bool:
  """The casing to tokenize with: the setting's if consistent, else the checkpoint's.

  Args:
    do_lower_case: what the user asked for; None: follow the checkpoint.
    evidence: `checkpoint_casing`'s.
    allow_mismatch: let a given `do_lower_case` override contradicting evidence.
    terms: how the caller spells the two settings in messages (`FLAGS`, `keywords`).

  Returns:
    do_lower_case.

  Raises:
    ValueError: `do_lower_case` not True, False or None, or `allow_mismatch` not a bool
      (`tfbert.runtime.validation.plain_bool`), named in the caller's terms.
    CasingMismatchError: naming both sources, when a given `do_lower_case` contradicts
      the evidence, or the evidence contradicts itself (unless `allow_mismatch` and
      `do_lower_case` is given); saying what to pass, in the caller's terms.
  """
  do_lower_case = validation.plain_bool(terms.do_lower_case, do_lower_case, optional=True)
  allow_mismatch = validation.plain_bool(terms.allow_mismatch or "allow_mismatch",
                                         allow_mismatch)
  given = None if do_lower_case is None else Casing(do_lower_case, terms.setting(do_lower_case))
  sources = ([given] if given else []) + list(evidence)
  for other in sources[1:]:
    if other.do_lower_case != sources[0].do_lower_case:
      if allow_mismatch and given is not None:
        logging.warning("casing mismatch allowed (%s): tokenizing with %s although %s says "
                        "do_lower_case=%s%s", terms.allowing(), given.source, other.source,
                        str(other.do_lower_case).lower(), terms.where)
        return given.do_lower_case
      if given is sources[0]:
        fix = (f"pass {terms.setting(other.do_lower_case)} (or leave it out to follow the "
               "checkpoint)")
        fix += f", or {terms.allowing()} if this is intended" if terms.allow_mismatch else ""
      else:
        fix = f"fix the checkpoint's records, or choose with {terms.choosing()}"
      raise CasingMismatchError(
          f"casing mismatch: {sources[0].source} says do_lower_case="
          f"{str(sources[0].do_lower_case).lower()}, but {other.source} says "
          f"do_lower_case={str(other.do_lower_case).lower()}; a wrong casing loses accuracy "
          f"silently. {fix[0].upper()}{fix[1:]}{terms.where}")
  if sources:
    return sources[0].do_lower_case
  logging.info("no casing known for the checkpoint: do_lower_case=%s (the default)",
               DEFAULT_DO_LOWER_CASE)
  return DEFAULT_DO_LOWER_CASE


def describe(evidence: Iterable[Casing]) -> str:
  """The evidence as one line, for logs."""
  return "; ".join(e.source for e in evidence) or "no evidence"
