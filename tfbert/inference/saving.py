"""`tfbert.save`: a model with text settings written as the user wants it.

* "keras" (a path ending in `.keras`): the `.keras` file + `vocab.txt` and the tokenizer's
  JSON files beside it (a classifier's arity, whether it reads text pairs, when known: in
  `text_settings.json`, by the `.keras` file's name); read by `tfbert.load` and
  `--init_tfbert`;
* "hf": a Hugging Face directory (architecture, labels as `id2label`, tokenizer files; a
  classifier's arity, when known, under `config.json`'s "tfbert" key, which transformers
  keeps and ignores); read by transformers' `AutoModelFor...` and `tfbert.load`;
* "sentence-transformers": a sentence-transformers directory (a `BertSentenceEncoder`); read
  by `SentenceTransformer(path)` and `tfbert.load`;
* "google": a google-research/bert checkpoint prefix + `bert_config.json`, `vocab.txt`;
* "export": the task's SavedModel export with its raw-text signature (TF Serving,
  `tfbert.load`).

A Google checkpoint has no place for labels: a classifier's go into `labels.txt` beside
it, which `tfbert.load` reads back. A span labeler's windows, answer length and v2.0
threshold (`SPAN_SETTINGS`) go where each format has room, and `tfbert.load` reads them
back: a Hugging Face `config.json`'s "tfbert" key, an export's `answer_question.json`, and
beside a `.keras` file or Google prefix `span_settings.json` (by the file's name). The
sequence length is recorded as the tokenizer's `model_max_length` (`tokenizer_config.json`),
which `tfbert.load` reads back.

The vocabulary, casing, S and (span labeler) windows are the model's text settings
(`tfbert.inference.text_settings`); each writer is the one the tools use, so every output is
complete or absent (`tfbert.runtime.atomic`) and an export replaces only an export.

No model is written into a directory that holds a model of another kind (a Google
checkpoint beside a Hugging Face model, ...: `model_paths.check_no_other_model`), which
`tfbert.load` of it could not tell apart.

Nothing is written until every check of the target has passed (`check_target`): a failed
save leaves the places it names as they were. `path` is a str or an `os.PathLike`; a leading
`~` is not expanded (`tfbert.runtime.files.as_path`).
"""

import os
from typing import Optional

import keras
from absl import logging

from tfbert.checkpoints import convert, huggingface, model_paths
from tfbert.classifier import classifier_export
from tfbert.embeddings import embedding_export, sentence_transformers
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.inference import exported, text_settings
from tfbert.models import BertClassifier, BertPretrainer, BertSpanLabeler, BertTokenClassifier
from tfbert.pretraining import pretraining_export
from tfbert.runtime import atomic, files, paths, run_directory, validation
from tfbert.serving import export
from tfbert.squad import squad_export
from tfbert.tagging import tagging_export

FORMATS = ("keras", "hf", "sentence-transformers", "google", "export")
SPAN_SETTINGS = huggingface.SPAN_SETTINGS


def save(model: keras.Model, path: str, format: Optional[str] = None, *,  # noqa: A002
         is_pair: Optional[bool] = None, export_dtype: Optional[str] = None) -> str:
  """Writes `model` to `path` in `format` (default: "keras" for a `.keras` path); returns
  `path`.

  Args:
    model: a tfbert model with text settings (`tfbert.load`, `attach_text`).
    path: the file, directory or checkpoint prefix to write (local or a URL): a str or an
      `os.PathLike` (`pathlib.Path`); a leading `~` naming a home directory is refused
      (not expanded, as `open` does not).
    format: one of `FORMATS`.
    is_pair: a classifier's arity: True when it reads (text_a, text_b) pairs, False when
      single texts (default: the model's `TextSettings.is_pair`, which it must agree with
      when known). "keras" and "hf" record it when known; "export" needs it known (its
      `classify_text` takes one or the other): a classifier of unknown arity (a Hugging
      Face directory from elsewhere, a new head) is refused without it.
    export_dtype: "export" only: "model" (the default), "float32", "bfloat16" or "auto"
      (`tfbert.serving.serving_dtype`); refused with another format, which has no compute
      dtype to set.

  Raises:
    TypeError: a `path` that is neither a str nor an `os.PathLike` (bytes).
    ValueError: a model loaded from an export (`ExportedModel`: its weights are graph
      constants, in no format's form); an unknown format, or one the model has no form in
      (a sentence-transformers directory of anything but a sentence encoder; a Google
      checkpoint of a tagger); an `is_pair` that is not the classifier's own, or given
      where nothing reads it (a model that is no classifier, a format that records no
      arity); an `export_dtype` with a format other than "export"; a classifier export of
      unknown arity without `is_pair`; a target that
      cannot be written (`check_target`).
  """
  path = files.as_path(path, "path")
  parent = files.parent(path)
  if isinstance(model, exported.ExportedModel):  # Weights as graph constants: no model.
    raise ValueError(f"{model.path} is a tfbert export (ExportedModel): it cannot be saved "
                     f"again as {format or 'keras'}; copy the directory itself, or "
                     "tfbert.save the model it was exported from (its run's model.keras)")
  if format is None:
    if not path.endswith(".keras"):
      raise ValueError(f"format= is needed for {path!r} (a .keras path is saved as keras); "
                       f"use one of {', '.join(FORMATS)}")
    format = "keras"  # noqa: A001
  if format not in FORMATS:
    how = {"tflite": " (tools/export_tflite.py writes a TFLite file from a saved .keras file; "
                     "in Python: tfbert.serving.tflite_export.export_tflite)",
           "onnx": " (tools/export_onnx.py writes an ONNX file from a SavedModel export, "
                   "format=\"export\"; in Python: tfbert.serving.onnx_export.export_onnx)"
           }.get(str(format).lower(), "")
    raise ValueError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}{how}")
  if format == "keras" and not path.endswith(".keras") and not path.endswith(("/", os.sep)):
    raise ValueError(f"path {path} does not end in .keras, which the keras format needs: "
                     f"pass a path ending in .keras (e.g. {path}.keras)")
  if format != "keras":  # The converse slip: a directory or prefix named as a .keras file.
    keras_named = convert.keras_named_problem(
        "path", path, f"format={format!r}",
        "a checkpoint prefix" if format == "google" else "a directory", "drop format=")
    if keras_named:
      raise ValueError(keras_named)
  if export_dtype is not None and format != "export":
    raise ValueError(f"export_dtype applies to format='export' only (a {format} output is "
                     f"written in the model's own dtype): leave export_dtype={export_dtype!r} "
                     "out")
  check_target(path, format)
  # A file format writes its vocabulary and tokenizer files beside the file (prefix).
  run_directory.check_not_a_run("path", path, parent if format in ("keras", "google") else path)
  if format != "export":  # Not into a directory holding another model (an export is one).
    model_paths.check_no_other_model(path, "tfbert" if format == "keras" else format)
  if not text_settings.has_settings(model):  # Sweep 31, B69: "... cannot read raw text".
    raise ValueError(f"tfbert.save writes a model with its vocabulary and casing (what reads "
                     f"its text), and this {type(model).__name__} has none attached: call "
                     "tfbert.inference.text_settings.attach_text(model, vocab_file) first, "
                     "or load it with tfbert.load(path)")
  settings = text_settings.settings_of(model)
  is_pair = _resolved_is_pair(model, format, is_pair, settings.is_pair)
  if not model.built:  # Its weights made now, so the file holds those the model then uses
    model.build()      # (an unbuilt model's .keras file read back with other weights).
  arities = (convert.new_side_record(path, convert.TEXT_SETTINGS_FILE, convert.read_arities,
                                     is_pair)
             if format == "keras" else None)
  spans = ({name: getattr(settings, name) for name in SPAN_SETTINGS}
           if isinstance(model, BertSpanLabeler) else None)
  span_records = (convert.new_side_record(path, convert.SPAN_SETTINGS_FILE,
                                          convert.read_span_records, spans)
                  if format in ("keras", "google") else None)
  vocab, lower, length = settings.vocab_file, settings.do_lower_case, settings.max_seq_length
  if format == "sentence-transformers":
    if not isinstance(model, BertSentenceEncoder):
      raise ValueError(f"a {type(model).__name__} has no sentence-transformers form (a "
                       "BertSentenceEncoder's)")
    sentence_transformers.save_sentence_transformers(model, path, vocab, lower, length)
  elif format == "export":
    _export(model, path, settings, is_pair, export_dtype or "model")
  elif format == "keras":
    _check_side_contents(path, settings)
    _save_keras(model, path, settings, arities, span_records)
  elif isinstance(model, BertSentenceEncoder):
    raise ValueError(f"a BertSentenceEncoder is saved as keras, sentence-transformers or "
                     f"export, not {format}")
  else:
    convert.write_model(model, format, path, vocab, lower, model_max_length=length,
                        is_pair=is_pair, span_settings=spans)  # Google: with labels.txt.
    if format == "google":  # Google's format has no span settings.
      convert.write_span_records(files.parent(path), span_records)
  return path


def check_target(path: str, format: str) -> None:  # noqa: A002
  """Refuses, before anything is written, a `path` that `format` cannot be written at.

  A "keras" file, or a "google" prefix, shares its directory with its side files; the other
  formats are directories. Refused, naming the path and what is there: a symbolic link to
  nothing (the path or a directory above it, naming its target); a parent that is a file;
  a "keras" path that is an existing directory, or a file that is no `.keras` model (zip
  archive); a directory format's path that is an existing file; a path inside an output
  tfbert wrote or a SavedModel, below a file, or where nothing can be created
  (`tfbert.runtime.paths.output_problems`); a side file the format writes (`vocab.txt`,
  `text_settings.json`, `config.json`, ...) that is an existing directory. The format's own
  writer checks what it alone knows (a Hugging Face directory of another model, a Google
  checkpoint beside another, an export that is not one).

  Raises:
    ValueError: naming `path` and the problem.
  """
  if format in ("keras", "google") and path.endswith(("/", os.sep)):
    example = "model.keras" if format == "keras" else "bert_model.ckpt"
    raise ValueError(f"path {path} names a directory, where the {format} format writes "
                     f"{'a file' if format == 'keras' else 'a checkpoint prefix'} (files "
                     f"beside it): name it inside, e.g. {os.path.join(path, example)}")
  link = paths.dangling_link_problem("path", path)
  if link:  # Before "is an existing file": no file is there.
    raise ValueError(link)
  parent = files.parent(path)
  if files.exists(parent) and not files.isdir(parent):
    raise ValueError(f"cannot write {path}: {parent} is a file, not a directory")
  is_directory = format not in ("keras", "google")
  if is_directory and files.exists(path) and not files.isdir(path):
    raise ValueError(f"path {path} is an existing file, not a directory: the {format} "
                     "format writes a directory; choose another path")
  problems = paths.output_problems({"path": path}, "file" if format == "keras" else "prefix")
  if problems:
    raise ValueError("; ".join(problems))
  if format == "keras" and files.isfile(path) and not _is_zip(path):
    raise ValueError(f"path {path} exists and is not a .keras model (no zip archive): "
                     "refusing to replace it; remove it or choose another path")
  for side, is_dir in _side_files(path, format):
    if files.exists(side) and files.isdir(side) != is_dir:
      found, wanted = ("a directory", "file") if not is_dir else ("a file", "directory")
      raise ValueError(f"cannot write {path}: {side} is {found}, where this {format} output "
                       f"writes its {os.path.basename(side)} {wanted}; move it away or choose "
                       "another path")


def _is_zip(path: str) -> bool:
  """Whether the file at `path` starts as a zip archive does (a `.keras` model is one)."""
  with files.open_file(path, "rb") as f:
    return f.read(4) == b"PK\x03\x04"


def _side_files(path: str, format: str) -> list[tuple[str, bool]]:  # noqa: A002
  """(path, whether a directory) of what `format` writes at `path` besides `path` itself:
  beside a file (prefix) or inside a directory. An export replaces its directory whole."""
  tokenizer = list(huggingface.TOKENIZER_FILES)
  if format == "keras":
    return [(os.path.join(files.parent(path), n), False)
            for n in tokenizer + [convert.TEXT_SETTINGS_FILE, convert.SPAN_SETTINGS_FILE]]
  if format == "google":
    base = os.path.basename(path)
    names = [export.CONFIG_FILE, *tokenizer, model_paths.LABELS_FILE, convert.SPAN_SETTINGS_FILE,
             f"{base}.index",
             f"{base}.data-00000-of-00001"]
    return [(os.path.join(files.parent(path), n), False) for n in names]
  if format in ("hf", "sentence-transformers"):
    names = ["config.json", "model.safetensors", *tokenizer]
    if format == "sentence-transformers":
      names += [sentence_transformers.MODULES_FILE, sentence_transformers.SENTENCE_CONFIG_FILE,
                os.path.join(sentence_transformers.POOLING_DIR, "config.json")]
    sides = [(os.path.join(path, n), False) for n in names]
    if format == "sentence-transformers":
      sides.append((os.path.join(path, sentence_transformers.POOLING_DIR), True))
    return sides
  return []


def _save_keras(model: keras.Model, path: str, settings: text_settings.TextSettings,
                arities: Optional[dict[str, bool]],
                span_records: Optional[dict[str, dict]] = None) -> None:
  """The `.keras` file, its tokenizer files and (when it changes) the arity record beside
  it, appearing together: the model last (`tfbert.runtime.atomic.file_set`), so no reader
  finds the new model beside an old record or a record without its model. A record left
  with no entry is removed afterwards (an empty one says nothing)."""
  directory, name = files.parent(path), os.path.basename(path)
  files.makedirs(directory)
  with atomic.file_set(directory, name, "keras") as staging:
    staged = os.path.join(staging, name)
    try:
      convert.save_tfbert_model(model, staged, settings.vocab_file, settings.do_lower_case,
                                model_max_length=settings.max_seq_length)
    except OSError as error:  # It names the staging file: name the one asked for.
      raise OSError(str(error).replace(staged, path)) from error
    if arities is not None:
      atomic.write_json(os.path.join(staging, convert.TEXT_SETTINGS_FILE),
                        {"is_pair": arities})
    if span_records:
      atomic.write_json(os.path.join(staging, convert.SPAN_SETTINGS_FILE), span_records)
  if arities == {}:
    convert.write_arity_records(directory, arities)
  if span_records == {}:
    convert.write_span_records(directory, span_records)


def _check_side_contents(path: str, settings: text_settings.TextSettings) -> None:
  """Refuses to replace a tokenizer file beside the `.keras` file `path` whose content differs
  from what this save writes there (`convert.check_side_contents`: another model's
  vocabulary, a user's file), before anything is written.

  Raises:
    ValueError: naming the file that differs and what to do.
  """
  convert.check_side_contents(
      path, files.parent(path),
      convert.tokenizer_sides(settings.vocab_file, settings.do_lower_case,
                              settings.max_seq_length),
      rewrite=files.isfile(path))


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
        export_dtype=export_dtype, doc_stride=settings.doc_stride)
  elif isinstance(model, BertSentenceEncoder):
    embedding_export.export_sentence_encoder_saved_model(model, path, vocab, lower, length,
                                                         export_dtype)
  elif isinstance(model, BertPretrainer):
    pretraining_export.export_pretrainer_saved_model(model, path, vocab, lower, length,
                                                     export_dtype)
  else:
    export.export_encoder_saved_model(  # The casing as attached (resolved there).
        model, path, vocab_file=vocab, do_lower_case=lower, seq_length=length,
        export_dtype=export_dtype, allow_casing_mismatch=True)


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
  given = validation.plain_bool("is_pair", given, optional=True)
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
  if isinstance(model, BertClassifier) and own and format not in ARITY_FORMATS:
    # Sweep 32, B59: read back, it classified single texts without a word.
    logging.warning(f"this classifier reads sentence pairs, which a {format} output does not "
                    f"record (only {', '.join(ARITY_FORMATS)} do): read back, it classifies "
                    "single texts as readily as pairs; save it as one of those to keep it")
  if format == "export" and isinstance(model, BertClassifier) and is_pair is None:
    raise ValueError(
        "this classifier's arity is unknown (what it was loaded from does not record whether "
        "it reads sentence pairs: a Hugging Face or Google checkpoint not written by "
        "tfbert.save, a new head) and an export's classify_text reads one or the other: "
        "pass is_pair=True for (text_a, text_b) pairs or is_pair=False for single texts")
  return is_pair if isinstance(model, BertClassifier) else None
