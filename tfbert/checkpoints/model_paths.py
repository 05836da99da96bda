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
from collections.abc import Mapping
from typing import Any, Optional

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
  _check_one_model(path)
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


def models_in(directory: str, any_keras: bool = False) -> list[tuple[str, str]]:
  """(kind, what: the files that make it) of each model the directory `directory` holds by
  its files alone, in `locate`'s order: a SavedModel export, tfbert `.keras` files,
  sentence-transformers (which holds a Hugging Face model's files as its own), Hugging Face
  (`config.json`, with `model.safetensors` or without), Google checkpoints (a `.index`
  beside `bert_config.json`, or several). A run directory's `bert_config.json` beside its
  `model.keras`, an export's beside `saved_model.pb`, are records, not models. `.keras`
  files: `model.keras` (what `locate` reads in a directory), or with `any_keras` any."""
  if not files.isdir(directory):
    return []
  names = set(files.listdir(directory))
  found = []
  if "saved_model.pb" in names:
    found.append(("export", "a SavedModel export (saved_model.pb)"))
  kerases = sorted(name for name in names if (name.endswith(".keras") if any_keras
                                              else name == RUN_MODEL)
                   and not files.isdir(os.path.join(directory, name)))
  if kerases:
    found.append(("tfbert", f"a tfbert model ({', '.join(kerases)})"))
  if MODULES_FILE in names:
    found.append(("sentence-transformers", f"a sentence-transformers model ({MODULES_FILE})"))
  elif "config.json" in names:
    weights = "model.safetensors" if "model.safetensors" in names else "no model.safetensors"
    found.append(("hf", f"a Hugging Face model (config.json + {weights})"))
  prefixes = google_checkpoint.prefixes_in(directory)
  if prefixes:
    found.append(("google", f"a Google checkpoint ({', '.join(p + '.*' for p in prefixes)})"))
  return found


def _check_one_model(directory: str) -> None:
  """Refuses a directory that holds models of two kinds (`models_in`), naming both and how
  to read one: `locate` would pick one of them without a word.

  Raises:
    ValueError: naming the directory, the models and what to do.
  """
  found = models_in(directory)
  if len(found) < 2:
    return
  prefixes = google_checkpoint.prefixes_in(directory)
  picks = {"tfbert": os.path.join(directory, RUN_MODEL),
           "google": os.path.join(directory, prefixes[0]) if len(prefixes) == 1 else None}
  ways = [f"{picks[kind]} for the {kind} one" for kind, _ in found if picks.get(kind)]
  how = (f"pass {' or '.join(ways)}, or " if ways else "") + "move one into a folder of its own"
  raise ValueError(f"{directory} holds {len(found)} models, {' and '.join(w for _, w in found)}: "
                   f"which one to load is ambiguous; {how}")


def check_no_other_model(path: str, kind: str) -> None:
  """Refuses to write a model of `kind` at `path` ("google": a checkpoint prefix; "tfbert":
  a `.keras` file; "hf" or "sentence-transformers": the directory itself) where its
  directory already holds a model of another kind (`models_in`): it would then hold two,
  which `tfbert.load` and the tools could not tell apart. This very prefix (a rewrite) is
  no other model, nor are other `.keras` files for a `.keras` file (each has its records by
  its name), nor a Hugging Face or sentence-transformers model for a directory format (its
  writer replaces its own and refuses another's by its files).

  Raises:
    ValueError: naming the directory, what is there and what to do.
  """
  in_place = kind in ("hf", "sentence-transformers")
  directory = path if in_place else files.parent(path)
  base = os.path.basename(path)
  others = []
  for found, what in models_in(directory, any_keras=True):
    if kind == found == "google" and google_checkpoint.prefixes_in(directory) == [base]:
      continue  # Its own checkpoint, rewritten.
    if found == kind == "tfbert" or (in_place and found in ("hf", "sentence-transformers")):
      continue
    others.append(what)
  if others:
    written = {"google": "a Google checkpoint", "tfbert": "a .keras model",
               "hf": "a Hugging Face model", "sentence-transformers":
               "a sentence-transformers model"}[kind]
    raise ValueError(f"{directory} holds {' and '.join(others)}: {written} written "
                     f"{'into it' if in_place else f'at {path}'} would make it hold two "
                     "models, which tfbert.load cannot tell apart; write it into a folder of "
                     "its own")


def check_not_a_model_directory(outputs: Mapping[str, Optional[str]], tool: str) -> None:
  """Refuses, before any work, a tool's working or output directory (`align --workdir`,
  `demo --workdir`, ...) that holds a model of any kind (`models_in`: a Hugging Face or
  sentence-transformers directory, a Google checkpoint, a run's `model.keras`, an export):
  the tool's files would mix with that model's (`align --workdir=<a Hugging Face model>`
  put init/, runs/ and report.json beside its model.safetensors), as `check_no_other_model`
  refuses a second model there.

  Args:
    outputs: {setting name, e.g. "--workdir": directory (None or "": not written)}.
    tool: the tool's name, for the message.

  Raises:
    ValueError: naming the setting, its path, what it holds and what to do.
  """
  for name, path in outputs.items():
    if not path:
      continue
    found = models_in(os.fspath(path))
    if found:
      raise ValueError(f"{name} {path} holds {' and '.join(what for _, what in found)}: "
                       f"{tool} would write its own files among that model's; choose another "
                       f"{name}, e.g. a new directory")


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
