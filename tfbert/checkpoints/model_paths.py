"""Which kind of model a path holds, by its files alone: `locate`.

Shared by the readers that must name a path's kind before reading it: `tfbert.load`
(`tfbert.inference.loading`) and the source checks of the tools (`tfbert.checkpoints.
convert.check_source`). Kinds, tried in order: a directory with `saved_model.pb` (a tfbert
export); a `.keras` file or a run directory with `model.keras` (tfbert); a directory with
`modules.json` (sentence-transformers); `config.json` + `model.safetensors` (Hugging Face);
`bert_config.json` + one checkpoint, or a checkpoint prefix (Google TF1; a
`run_pretraining` run directory: its export's checkpoint). A `.keras` path that is a
symbolic link is read at its target (`real_file`), beside its records; a `.tflite` or `.onnx`
export (ids in, no raw text) is refused naming what runs it.
"""

import os
from typing import Any

import tensorflow as tf

from tfbert.checkpoints import google_checkpoint
from tfbert.models import check_label_names
from tfbert.runtime import atomic, files, json_values
from tfbert.text import casing

RUN_MODEL = "model.keras"  # A fine-tuning run's model in its directory.
MODULES_FILE = "modules.json"  # What makes a directory a sentence-transformers model.


# Where a run_pretraining run directory holds its model (`pretraining_run`'s export).
PRETRAINING_EXPORT = os.path.join("export", "google", "bert_model.ckpt")


def locate(path: str) -> tuple[str, str]:
  """(kind, what to read) of `path`: kind "export", "tfbert", "sentence-transformers",
  "hf" or "google" (see the module docstring).

  Args:
    path: a str or `os.PathLike` (`tfbert.runtime.files.as_path`: `~` is not expanded).

  Raises:
    TypeError: `path` is neither a str nor an `os.PathLike`.
    FileNotFoundError: `path` does not exist.
    ValueError: `path` is none of them, naming what was looked for; a leading `~`.
  """
  path = files.as_path(path, "path")
  files.check_not_dangling(path, "model path")  # `files.exists` counts it: it would pass.
  if files.isfile(path + ".index") and not files.exists(path):
    return "google", path  # A checkpoint prefix (not a file itself).
  if not files.exists(path):
    raise FileNotFoundError(f"no such file or directory: {path}")
  if not files.isdir(path):
    if path.endswith(".keras"):
      return "tfbert", real_file(path)
    reader = _export_reader(path)
    if reader:
      raise ValueError(f"{path}: {reader}")
    raise ValueError(f"{path}: not a model tfbert reads: a file must be a tfbert .keras model "
                     "(a directory: an export, a run, sentence-transformers, Hugging Face or "
                     "Google)")
  def has(name):
    return files.exists(os.path.join(path, name))
  if has("saved_model.pb"):
    return "export", path
  if has(RUN_MODEL):
    return "tfbert", os.path.join(path, RUN_MODEL)
  if has(MODULES_FILE):
    return "sentence-transformers", path
  if has("config.json") and has("model.safetensors"):
    return "hf", path
  if has("bert_config.json") and has(casing.RUN_CONFIG):  # A tool's run directory.
    return "google", _run_model(path)
  if has("bert_config.json"):
    return "google", _google_prefix(path)
  problem = ""
  if has("run_config.json"):
    problem = f" (a tfbert run directory without {RUN_MODEL}: training has not finished)"
  elif has("config.json"):
    problem = " (config.json without model.safetensors)"
  inside = [name for name in sorted(files.listdir(path)) if _holds_a_model(
      os.path.join(path, name.rstrip("/")))]
  if inside and not problem:
    names = [f"{name.rstrip('/')}/" for name in inside]
    names = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
    raise ValueError(f"{path}: not a model directory tfbert reads itself, but it holds "
                     f"{names}: load {'it' if len(inside) == 1 else 'one of them'} (e.g. "
                     f"{os.path.join(path, inside[0].rstrip('/'))})")
  if not problem:
    _check_no_export_file(path)
  raise ValueError(f"{path}: not a model directory tfbert reads{problem}: found none of "
                   f"saved_model.pb, {RUN_MODEL}, {MODULES_FILE}, "
                   "config.json + model.safetensors, bert_config.json + a checkpoint")


# The files tfbert's exports write that `locate` does not read, with what reads them.
_EXPORT_READERS = {
    ".tflite": "a TFLite export (export_tflite), which takes token ids and has no raw-text "
               "path: run it with tfbert.serving.tflite_export.TfliteModel({path!r}) (ids "
               "in), or load the model it was exported from",
    ".onnx": "an ONNX export (export_onnx), which takes token ids and has no raw-text path: "
             "run it with onnxruntime.InferenceSession({path!r}) (ids in), or load the model "
             "it was exported from",
}


def _export_reader(path: str) -> str:
  """What runs the export file `path` (`_EXPORT_READERS`, the path filled in), or ""."""
  reader = _EXPORT_READERS.get(os.path.splitext(path)[1].lower())
  return reader.format(path=path) if reader else ""


def _check_no_export_file(directory: str) -> None:
  """Refuses a directory that holds no model `locate` reads but an export file (what
  export_tflite writes: `model.tflite` with `bert_config.json`, `vocab.txt`, `labels.txt`
  beside it), naming the file and what runs it, as for the file itself.

  Raises:
    ValueError: `directory` holds a `.tflite` or `.onnx` file.
  """
  exports = [name for name in sorted(files.listdir(directory))
             if _export_reader(name) and files.isfile(os.path.join(directory, name))]
  if exports:
    path = os.path.join(directory, exports[0])
    raise ValueError(f"{directory}: holds no checkpoint but {exports[0]}, {_export_reader(path)}")


def real_file(path: str) -> str:
  """`path`, or for a local symbolic link to a file the file it points to (`os.path.realpath`):
  a model file's records (`vocab.txt`, `run_config.json`, `span_settings.json`, ...) sit beside
  the file itself, not beside a link to it."""
  if files.is_url(path) or not os.path.islink(path) or not os.path.isfile(path):
    return path
  return os.path.realpath(path)


def _holds_a_model(directory: str) -> bool:
  """Whether `directory` is one that `locate` reads as a model, by its marker files alone
  (for a message pointing into a folder that holds models)."""
  if not files.isdir(directory):
    return False
  def has(name):
    return files.exists(os.path.join(directory, name))
  return (has("saved_model.pb") or has(RUN_MODEL) or has(MODULES_FILE)
          or (has("config.json") and has("model.safetensors")) or has("bert_config.json"))


def _run_model(directory: str) -> str:
  """The model of a tool's run directory without `model.keras`: a run_pretraining run's
  export (its run_config.json names a `model_dir`; a fine-tuning run's an `output_dir`).

  Raises:
    ValueError: a run that has not finished (no export, no model.keras), naming what is
      missing.
  """
  if "model_dir" in _read_json(os.path.join(directory, casing.RUN_CONFIG)):
    exported = os.path.join(directory, PRETRAINING_EXPORT)
    if files.isfile(exported + ".index"):
      return exported
    raise ValueError(f"{directory}: a run_pretraining run directory without its export "
                     f"{exported} (the run has not finished, or exported to another "
                     "--export_dir): load that export, or this directory once the run has "
                     "finished")
  raise ValueError(f"{directory}: a tfbert run directory without {RUN_MODEL}: training has "
                   "not finished (or the run only evaluated)")


def _google_prefix(directory: str) -> str:
  """The one checkpoint beside `bert_config.json` (the `checkpoint` file's latest, or the
  only `*.index`)."""
  latest = tf.train.latest_checkpoint(directory)
  if latest:
    return latest
  prefixes = google_checkpoint.prefixes_in(directory)
  if not prefixes:
    _check_no_export_file(directory)
  if len(prefixes) != 1:
    found = "no checkpoint" if not prefixes else "several checkpoints: " + ", ".join(prefixes)
    raise ValueError(f"{directory}: bert_config.json with {found} (a Google checkpoint "
                     "directory holds one <prefix>.index and its data)")
  return os.path.join(directory, prefixes[0])


def _read_json(path: str) -> Any:
  """The JSON value of `path`, a bad file (or a key given twice) named."""
  return json_values.read(path)


LABELS_FILE = "labels.txt"  # A classifier's or tagger's label names, in id order.


def write_labels_file(folder: str, labels) -> str:
  """Writes `labels.txt` (one label per line, in id order) into `folder` atomically; returns
  its path. The one writer of that file: exports, TFLite files, Google checkpoints and
  tagging runs.

  Raises:
    TypeError, ValueError: a name that is not a non-empty str on one line
      (`tfbert.models.check_label_names`), before anything is written.
  """
  path = os.path.join(folder, LABELS_FILE)
  labels = check_label_names(labels, f"{path}: the labels ")
  return atomic.write_text(path, "".join(f"{label}\n" for label in labels))


def read_labels_file(path: str) -> tuple[str, ...]:
  """The label names of the `labels.txt` at `path`, one per line in id order, checked as
  every label name is (`tfbert.models.check_label_names`): the one reader of that file.

  Raises:
    ValueError: an empty line (no name), naming the file and the line.
  """
  return check_label_names(files.read_lines(path), path, lines=True)
