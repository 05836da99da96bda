"""What a model reads raw text with: its vocabulary, casing and sequence lengths.

`tfbert.load` attaches a `TextSettings` to every model it returns (`attach`); the raw-text
calls (`tfbert.inference.raw_text`) read it back (`settings_of`). A model built in Python
gets one with `attach_text(model, vocab_file, ...)`. The settings live on the model object
only: Keras does not save them, `tfbert.save` writes them as each format records them
(`vocab.txt`, `tokenizer_config.json`, `run_config.json`, `sentence_bert_config.json`).
"""

import dataclasses
import math
import numbers
from typing import Any, ClassVar, Mapping, Optional

import keras
import numpy as np

from tfbert.runtime import files, validation
from tfbert.squad import squad_features, squad_postprocess
from tfbert.text import casing, text_calls, tokenization

# Where the settings and the per-model raw-text modules are kept. Set with
# `object.__setattr__`: Keras tracks what is set on a model (and would wrap a dict).
_SETTINGS = "_tfbert_text_settings"
_MODULES = "_tfbert_text_modules"

# google-research/bert's run_classifier/run_squad defaults.
DEFAULT_MAX_SEQ_LENGTH = 128
DEFAULT_SQUAD_MAX_SEQ_LENGTH = 384

# The settings of each kind (`TextSettings`' fields; `type_problems`).
_LENGTHS = ("max_seq_length", "max_query_length", "doc_stride", "max_answer_length")
_SWITCHES = ("do_lower_case", "version_2_with_negative")


def _is_finite_number(value: Any) -> bool:
  """Whether `value` is a real number (NumPy's too) that is finite and no bool."""
  return (isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
          and math.isfinite(value))


def type_problems(values: Mapping[str, Any]) -> list[str]:
  """What is of the wrong type among `values`, settings by `TextSettings`' field names
  (others are ignored): a length that is no int (a float, a str, a bool), a switch that is
  no bool, a `null_score_diff_threshold` that is no finite number (a str, a bool, NaN, an
  infinity, which JSON records cannot hold), a `vocab_file` that is no str. Each message
  names the setting and its value; checked where a setting is given (`TextSettings`,
  `tfbert.load`'s keywords, the records it reads), so none is ever saved."""
  wrong = [f"{name} ({values[name]!r})" for name in _LENGTHS
           if name in values and not validation.is_int(values[name])]
  problems = [f"{', '.join(wrong)} must be int"] if wrong else []
  problems += [f"{name} must be True or False, got {values[name]!r}" for name in _SWITCHES
               if name in values and not isinstance(values[name], (bool, np.bool_))]
  if "is_pair" in values and not (values["is_pair"] is None
                                  or isinstance(values["is_pair"], (bool, np.bool_))):
    problems.append(f"is_pair must be True, False or None (unknown), got {values['is_pair']!r}")
  threshold = values.get("null_score_diff_threshold", 0.0)
  if not _is_finite_number(threshold):
    problems.append(f"null_score_diff_threshold must be a finite number (an int or float), "
                    f"got {threshold!r}")
  if "vocab_file" in values and not isinstance(values["vocab_file"], str):
    problems.append(f"vocab_file must be a str path, got {values['vocab_file']!r}")
  return problems


@dataclasses.dataclass(frozen=True)
class TextSettings:
  """How a model reads raw text.

  Attributes:
    vocab_file: its WordPiece vocabulary (local path or URL).
    do_lower_case: the vocabulary's casing.
    max_seq_length: S, [CLS] and [SEP]s included.
    max_query_length: a span labeler's question budget (wordpieces).
    doc_stride: a span labeler's window stride over a long context.
    max_answer_length: a span labeler's longest answer (wordpieces).
    version_2_with_negative: a span labeler may answer "" (SQuAD v2.0).
    null_score_diff_threshold: v2.0: "" when null score - best span score exceeds it.
    is_pair: a classifier's arity: True when it reads (text_a, text_b) pairs, False when
      single texts, None when unknown (a Hugging Face directory not written by
      `tfbert.save`, a Google checkpoint, a model built in Python): then a call reads what
      it is given, and an export needs `is_pair=` (`tfbert.save`). Known, the raw-text
      calls refuse the other.
  """
  OWN_TYPE_CHECKS: ClassVar[bool] = True  # `type_problems` (validation.field_types).

  vocab_file: str
  do_lower_case: bool
  max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH
  # A span labeler's: the names and defaults of run_squad's flags (its configs' fields).
  max_query_length: int = squad_features.FeatureConfig.max_query_length
  doc_stride: int = squad_features.FeatureConfig.doc_stride
  max_answer_length: int = squad_postprocess.PostprocessConfig.max_answer_length
  version_2_with_negative: bool = squad_postprocess.PostprocessConfig.version_2_with_negative
  null_score_diff_threshold: float = (
      squad_postprocess.PostprocessConfig.null_score_diff_threshold)
  is_pair: Optional[bool] = None

  def __post_init__(self):
    validation.validate(self)  # NumPy integers, bools and floats become plain ones there.

  def checks(self) -> list[validation.Check]:
    """The rules of usable settings (`tfbert.runtime.validation`)."""
    wrong = type_problems(dataclasses.asdict(self))
    if wrong:  # The rules below compare them.
      return [(False, problem) for problem in wrong]
    return [
        (self.max_seq_length >= 3, f"max_seq_length ({self.max_seq_length}) must be >= 3 "
                                   "([CLS], a token, [SEP])"),
        (min(self.max_query_length, self.doc_stride, self.max_answer_length) >= 1,
         f"max_query_length ({self.max_query_length}), doc_stride ({self.doc_stride}) and "
         f"max_answer_length ({self.max_answer_length}) must be >= 1"),
    ]


def attach(model: keras.Model, settings: TextSettings) -> keras.Model:
  """Gives `model` its text settings (replacing any, and the modules built from them);
  returns `model`.

  Raises:
    ValueError: S beyond the model's `max_position_embeddings`; a vocabulary of more
      entries than the model's `vocab_size` (its ids past the embedding table failed at the
      first text holding one, in a graph error naming neither: sweep 19, N1); `is_pair`
      for a model that is no classifier. FileNotFoundError: a missing vocabulary.
  """
  limit = model.config.max_position_embeddings
  if settings.max_seq_length > limit:
    raise ValueError(f"max_seq_length {settings.max_seq_length} exceeds the model's "
                     f"max_position_embeddings {limit}")
  if not files.isfile(settings.vocab_file):
    raise FileNotFoundError(files.missing_file_message(settings.vocab_file, "vocabulary"))
  tokenization.check_vocab_fits(tokenization.vocab_entries(settings.vocab_file),
                                model.config.vocab_size, f"the vocabulary {settings.vocab_file}",
                                "the model's config")
  from tfbert.inference import raw_text  # pylint: disable=import-outside-toplevel
  if settings.is_pair is not None and not isinstance(model, raw_text.BertClassifier):
    raise ValueError(f"is_pair ({settings.is_pair}) is a classifier's setting; got a "
                     f"{type(model).__name__}")
  if isinstance(model, raw_text.BertSpanLabeler):  # Windows that fit, now, not at answer().
    squad_features.FeatureConfig(settings.max_seq_length, settings.doc_stride,
                                 settings.max_query_length)
  # (It imports this module; imported, it serves the model's text calls: `text_calls`.)
  object.__setattr__(model, _SETTINGS, settings)
  object.__setattr__(model, _MODULES, {})
  return model


def attach_text(model: keras.Model, vocab_file: str, do_lower_case: Optional[bool] = None,
                max_seq_length: Optional[int] = None, allow_casing_mismatch: bool = False,
                **settings: Any) -> keras.Model:
  """`attach` from its parts. Returns `model`.

  Args:
    model: a tfbert model.
    vocab_file: its WordPiece vocabulary.
    do_lower_case: the casing; None: the vocabulary's (`tfbert.text.casing`: cased entries
      mean cased). A given one that the vocabulary contradicts is refused, as `tfbert.load`
      refuses it (an uncased vocabulary read cased turned "HELLO" into [UNK]: sweep 31,
      B71), unless `allow_casing_mismatch`.
    max_seq_length: S; None: `DEFAULT_MAX_SEQ_LENGTH`, or the model's
      `max_position_embeddings` when fewer (as `tfbert.load`; sweep 31, B70).
    allow_casing_mismatch: tokenize with the given `do_lower_case` whatever the vocabulary
      says (logged).
    **settings: a span labeler's windows, a classifier's `is_pair` (`TextSettings`).
  """
  vocab_file = files.as_path(vocab_file, "vocab_file")
  do_lower_case = validation.plain_bool("do_lower_case", do_lower_case, optional=True)
  do_lower_case = casing.vocabulary_casing(do_lower_case, vocab_file, "attach_text",
                                           allow_casing_mismatch)
  if max_seq_length is None:
    max_seq_length = min(DEFAULT_MAX_SEQ_LENGTH, model.config.max_position_embeddings)
  from tfbert.inference import raw_text  # pylint: disable=import-outside-toplevel
  if isinstance(model, raw_text.BertSpanLabeler) and "max_query_length" not in settings:
    # As `tfbert.load` chooses it (sweep 33, B48: 64 left no context in S 48).
    settings["max_query_length"] = fitting_query_length(max_seq_length)
  return attach(model, TextSettings(vocab_file, do_lower_case, max_seq_length, **settings))


def fitting_query_length(max_seq_length) -> int:
  """A span labeler's default question budget for windows of `max_seq_length`:
  google-research/bert's 64, which leaves no context in S <= 67, so at most half then."""
  if not isinstance(max_seq_length, int) or isinstance(max_seq_length, bool):
    return squad_features.FeatureConfig.max_query_length  # `TextSettings` names the type.
  return min(squad_features.FeatureConfig.max_query_length, max(1, (max_seq_length - 3) // 2))


def has_settings(model: keras.Model) -> bool:
  """Whether `attach` gave `model` settings."""
  return getattr(model, _SETTINGS, None) is not None


def settings_of(model: keras.Model) -> TextSettings:
  """The settings `attach` gave `model`.

  Raises:
    ValueError: naming the model, when it has none, and how to give it some.
  """
  settings = getattr(model, _SETTINGS, None)
  if settings is None:
    raise ValueError(text_calls.NO_TEXT_SETTINGS.format(kind=type(model).__name__))
  return settings


def cached(model: keras.Model, key: Any, build):
  """`build()`, made once per model and key while its settings stay (the raw-text modules:
  each traces its function once)."""
  settings_of(model)  # Names the problem first.
  modules = getattr(model, _MODULES)
  if key not in modules:
    modules[key] = build()
  return modules[key]
