"""`tfbert.save`: a model with text settings written as the user wants it.

* "keras" (a path ending in `.keras`): the `.keras` file + `vocab.txt` and the tokenizer's
  JSON files beside it; read by `tfbert.load` and `--init_tfbert`;
* "hf": a Hugging Face directory (architecture, labels as `id2label`, tokenizer files); read
  by transformers' `AutoModelFor...` and `tfbert.load`;
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

from typing import Optional

import keras

from tfbert.checkpoints import convert
from tfbert.classifier import classifier_export
from tfbert.embeddings import embedding_export, sentence_transformers
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.inference import text_settings
from tfbert.models import BertClassifier, BertPretrainer, BertSpanLabeler, BertTokenClassifier
from tfbert.pretraining import pretraining_export
from tfbert.runtime import files, run_directory
from tfbert.serving import export
from tfbert.squad import squad_export
from tfbert.tagging import tagging_export

FORMATS = ("keras", "hf", "sentence-transformers", "google", "export")


def save(model: keras.Model, path: str, format: Optional[str] = None, *,  # noqa: A002
         is_pair: bool = False, export_dtype: str = "model") -> str:
  """Writes `model` to `path` in `format` (default: "keras" for a `.keras` path); returns
  `path`.

  Args:
    model: a tfbert model with text settings (`tfbert.load`, `attach_text`).
    path: the file, directory or checkpoint prefix to write (local or a URL).
    format: one of `FORMATS`.
    is_pair: "export" of a classifier: its `classify_text` takes text pairs.
    export_dtype: "export": "model", "float32", "bfloat16" or "auto"
      (`tfbert.serving.serving_dtype`).

  Raises:
    ValueError: an unknown format, or one the model has no form in (a sentence-transformers
      directory of anything but a sentence encoder; a Google checkpoint of a tagger).
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
    convert.write_model(model, {"keras": "tfbert"}.get(format, format), path, vocab, lower,
                        model_max_length=length)
    labels = getattr(model, "labels", None)
    if format == "google" and labels is not None:  # Google's format has no labels.
      export.write_labels_file(files.parent(path), labels)
  return path


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
