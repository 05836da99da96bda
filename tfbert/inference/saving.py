"""`tfbert.save`: a model with text settings written as the user wants it.

* "keras" (a path ending in `.keras`): the `.keras` file + `vocab.txt` and the tokenizer's
  JSON files beside it (a classifier's: `text_settings.json`, whether it reads text pairs,
  when known); read by `tfbert.load` and `--init_tfbert`;
* "hf": a Hugging Face directory (architecture, labels as `id2label`, tokenizer files; a
  classifier's arity, when known, under `config.json`'s "tfbert" key, which transformers
  keeps and ignores); read by transformers' `AutoModelFor...` and `tfbert.load`;
* "sentence-transformers": a sentence-transformers directory (a `BertSentenceEncoder`); read
  by `SentenceTransformer(path)` and `tfbert.load`;
* "google": a google-research/bert checkpoint prefix + `bert_config.json`, `vocab.txt`;
* "export": the task's SavedModel export with its raw-text signature (TF Serving,
  `tfbert.load`).

A Google checkpoint has no place for labels: a classifier's go into `labels.txt` beside
it, which `tfbert.load` reads back. The sequence length is recorded as the tokenizer's
`model_max_length` (`tokenizer_config.json`), which `tfbert.load` reads back.

The vocabulary, casing, S and (span labeler) windows are the model's text settings
(`tfbert.inference.text_settings`); each writer is the one the tools use, so every output is
complete or absent (`tfbert.runtime.atomic`) and an export replaces only an export.
"""

import os
from typing import Optional

import keras

from tfbert.checkpoints import convert
from tfbert.classifier import classifier_export
from tfbert.embeddings import embedding_export, sentence_transformers
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.inference import text_settings
from tfbert.models import BertClassifier, BertPretrainer, BertSpanLabeler, BertTokenClassifier
from tfbert.pretraining import pretraining_export
from tfbert.runtime import atomic, files, run_directory
from tfbert.serving import export
from tfbert.squad import squad_export
from tfbert.tagging import tagging_export

FORMATS = ("keras", "hf", "sentence-transformers", "google", "export")
# Beside a classifier's `.keras` file: its `is_pair` (`_record_text_settings`).
TEXT_SETTINGS_FILE = "text_settings.json"


def save(model: keras.Model, path: str, format: Optional[str] = None, *,  # noqa: A002
         is_pair: Optional[bool] = None, export_dtype: str = "model") -> str:
  """Writes `model` to `path` in `format` (default: "keras" for a `.keras` path); returns
  `path`.

  Args:
    model: a tfbert model with text settings (`tfbert.load`, `attach_text`).
    path: the file, directory or checkpoint prefix to write (local or a URL).
    format: one of `FORMATS`.
    is_pair: a classifier's arity: True when it reads (text_a, text_b) pairs, False when
      single texts (default: the model's `TextSettings.is_pair`, which it must agree with
      when known). "keras" and "hf" record it when known; "export" needs it known (its
      `classify_text` takes one or the other): a classifier of unknown arity (a Hugging
      Face directory from elsewhere, a new head) is refused without it.
    export_dtype: "export": "model", "float32", "bfloat16" or "auto"
      (`tfbert.serving.serving_dtype`).

  Raises:
    ValueError: an unknown format, or one the model has no form in (a sentence-transformers
      directory of anything but a sentence encoder; a Google checkpoint of a tagger); an
      `is_pair` that is not the classifier's own, or given where nothing reads it (a model
      that is no classifier, a format that records no arity); a classifier export of
      unknown arity without `is_pair`.
  """
  if not isinstance(path, str) or not path:
    raise ValueError(f"save needs a path to write, got {path!r}")
  parent = files.parent(path)
  if parent and files.exists(parent) and not files.isdir(parent):
    raise ValueError(f"cannot write {path}: {parent} is a file, not a directory")
  if format is None:
    if not path.endswith(".keras"):
      raise ValueError(f"format= is needed for {path!r} (a .keras path is saved as keras); "
                       f"use one of {', '.join(FORMATS)}")
    format = "keras"  # noqa: A001
  if format not in FORMATS:
    raise ValueError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
  # A file format writes its vocabulary and tokenizer files beside the file (prefix).
  run_directory.check_not_a_run("path", path, parent if format in ("keras", "google") else path)
  settings = text_settings.settings_of(model)
  is_pair = _resolved_is_pair(model, format, is_pair, settings.is_pair)
  vocab, lower, length = settings.vocab_file, settings.do_lower_case, settings.max_seq_length
  if format == "sentence-transformers":
    if not isinstance(model, BertSentenceEncoder):
      raise ValueError(f"a {type(model).__name__} has no sentence-transformers form (a "
                       "BertSentenceEncoder's)")
    sentence_transformers.save_sentence_transformers(model, path, vocab, lower, length)
  elif format == "export":
    _export(model, path, settings, is_pair, export_dtype)
  elif isinstance(model, BertSentenceEncoder):
    if format != "keras":
      raise ValueError(f"a BertSentenceEncoder is saved as keras, sentence-transformers or "
                       f"export, not {format}")
    convert.save_tfbert_model(model, path, vocab, lower, model_max_length=length)
  else:
    if format == "keras" and isinstance(model, BertClassifier):
      _record_text_settings(files.parent(path), is_pair)
    convert.write_model(model, {"keras": "tfbert"}.get(format, format), path, vocab, lower,
                        model_max_length=length, is_pair=is_pair)
    labels = getattr(model, "labels", None)
    if format == "google" and labels is not None:  # Google's format has no labels.
      export.write_labels_file(files.parent(path), labels)
  return path


def _record_text_settings(directory: str, is_pair: Optional[bool]) -> None:
  """Records beside a classifier's `.keras` file what no other file there records: its
  arity `is_pair` (`TEXT_SETTINGS_FILE`, read back by `tfbert.load`); an unknown one (None)
  removes a record left by an earlier save. Written before the model, which appears last."""
  path = os.path.join(directory, TEXT_SETTINGS_FILE)
  if is_pair is None:
    if files.exists(path):
      files.remove(path)
    return
  files.makedirs(directory)
  atomic.write_json(path, {"is_pair": is_pair})


def _export(model, path, settings, is_pair, export_dtype) -> None:
  vocab, lower, length = settings.vocab_file, settings.do_lower_case, settings.max_seq_length
  if isinstance(model, BertClassifier):
    classifier_export.export_classifier_saved_model(model, path, vocab, lower, length,
                                                    model.labels, is_pair, export_dtype)
  elif isinstance(model, BertTokenClassifier):
    tagging_export.export_tagger_saved_model(model, path, vocab, lower, length, export_dtype)
  elif isinstance(model, BertSpanLabeler):
    squad_export.export_squad_saved_model(
        model, path, vocab, lower, length, settings.max_query_length,
        settings.max_answer_length,
        version_2_with_negative=settings.version_2_with_negative,
        null_score_diff_threshold=settings.null_score_diff_threshold,
        export_dtype=export_dtype)
  elif isinstance(model, BertSentenceEncoder):
    embedding_export.export_sentence_encoder_saved_model(model, path, vocab, lower, length,
                                                         export_dtype)
  elif isinstance(model, BertPretrainer):
    pretraining_export.export_pretrainer_saved_model(model, path, vocab, lower, length,
                                                     export_dtype)
  else:
    export.export_encoder_saved_model(model, path, vocab_file=vocab, do_lower_case=lower,
                                      seq_length=length, export_dtype=export_dtype)


# The formats that record a classifier's arity or are built for it.
ARITY_FORMATS = ("keras", "hf", "export")


def _resolved_is_pair(model: keras.Model, format: str, given: Optional[bool],  # noqa: A002
                      own: Optional[bool]) -> Optional[bool]:
  """A classifier's arity to write: `given` (True, False or None), else the model's own
  (`own`, None when unknown); None for a model that is no classifier. Checked before any
  file is written.

  Raises:
    ValueError: `given` not a bool, not the model's known arity, for a model that is no
      classifier or a format that records none; an export of unknown arity (its
      `classify_text` would take single texts or pairs on a guess).
  """
  if given is not None and not isinstance(given, bool):
    raise ValueError(f"is_pair must be True, False or None (the model's), got {given!r}")
  if given is not None and not isinstance(model, BertClassifier):
    raise ValueError(f"is_pair is a classifier's setting; got a {type(model).__name__}: "
                     "leave is_pair out")
  if given is not None and format not in ARITY_FORMATS:
    raise ValueError(f"is_pair: a {format} output records no arity (only "
                     f"{', '.join(ARITY_FORMATS)} do): leave is_pair out")
  if given is not None and own is not None and given != own:
    reads = "sentence pairs" if own else "single texts"
    raise ValueError(f"is_pair={given}, but this classifier reads {reads} (its text "
                     f"settings' is_pair={own}): leave is_pair out")
  is_pair = own if given is None else given
  if format == "export" and isinstance(model, BertClassifier) and is_pair is None:
    raise ValueError(
        "this classifier's arity is unknown (what it was loaded from does not record whether "
        "it reads sentence pairs: a Hugging Face or Google checkpoint not written by "
        "tfbert.save, a new head) and an export's classify_text reads one or the other: "
        "pass is_pair=True for (text_a, text_b) pairs or is_pair=False for single texts")
  return is_pair if isinstance(model, BertClassifier) else None
