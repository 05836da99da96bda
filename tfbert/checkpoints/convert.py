"""Converts BERT checkpoints between Google TF1, Hugging Face and tfbert formats.

Formats:
  * `google`: a google-research/bert checkpoint prefix (`.../bert_model.ckpt`) with
    `bert_config.json` in the same directory (or given explicitly).
  * `hf`: a Hugging Face directory with `config.json` and `model.safetensors`.
  * `tfbert`: a Keras `.keras` file of a tfbert model (config included).

The model class is chosen from the heads present in the source: MLM/NSP -> `BertPretrainer`
(MLM without NSP, e.g. a `BertForMaskedLM`: the MLM-only pretrainer, `objective="mlm"`),
`cls/squad` -> `BertSpanLabeler`, a root `output_weights` -> `BertClassifier` (or
`BertTokenClassifier` when a Hugging Face `config.json` says `BertForTokenClassification`;
its `id2label` gives the class names or tags), otherwise `BertEncoder`. A tagger has no Google
form (google-research/bert has no such head). Every conversion goes through a tfbert model
with strict loading, so a shape or name problem fails loudly instead of producing a
half-converted checkpoint.

Outputs are self-contained: the vocabulary (`--vocab_file`, else the `vocab.txt` beside the
input: beside the prefix, in the Hugging Face directory, beside the `.keras` file) is copied
beside the output with `tokenizer_config.json` (its casing, checked against the input's by
`tfbert.text.casing`) and `special_tokens_map.json`, so Hugging Face's `AutoTokenizer` loads
an `hf` output alone; a `.keras` input's recorded vocabulary refuses another one
(`check_recorded_vocab`, as `tfbert.load`); a tokenizer file of another model already there
(beside a `.keras` file or TFLite export, in a folder made a Hugging Face directory) is not
replaced (`check_side_contents`, as `tfbert.save`). The text settings its input records
(`convert_checkpoint`'s `settings_of`: the sequence length, a classifier's arity, a span
labeler's windows) go with the output where it has room for them, and a classifier its
class names: a Google checkpoint has no place for them, so they go into `labels.txt` beside
it (as `tfbert.save`), which reading a Google input takes back (`google_labels`, as
`tfbert.load`). Google and Hugging Face outputs need a vocabulary. Every output
file appears under its final name only when complete (`tfbert.runtime.atomic`), with mode 0644
less the umask; a bad input names its file and what is wrong with it.

Inputs and outputs may be URLs (`gs://...`, any `tf.io.gfile` filesystem:
`tfbert.runtime.files`), with the same staging and renames (the filesystem's: on object stores
a copy then a delete, see `tfbert.runtime.atomic`). Keras and safetensors read and write local
files only: a `.keras` file on a URL goes through a local temporary copy, safetensors through
memory.
"""

import contextlib
import hashlib
import io
import json
import os
import tempfile
import zipfile
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

import keras
import numpy as np
from absl import logging

from tfbert.checkpoints import google_checkpoint, google_names, huggingface, model_paths
from tfbert.config import REQUIRED_FIELDS, BertConfig
from tfbert.encoder import BertEncoder
from tfbert.models import BertClassifier, BertPretrainer, BertSpanLabeler, BertTokenClassifier
from tfbert.runtime import atomic, files, json_values, paths, run_directory
from tfbert.text import casing, tokenization

FORMATS = ("google", "hf", "tfbert")


def is_tfbert_model(model) -> bool:
  """Whether `model` (what a `.keras` file held) is a tfbert model: a Keras model of a class
  registered in tfbert's package (the encoder, every task model, the sentence encoder),
  whichever subpackage defines it."""
  return (isinstance(model, keras.Model) and
          keras.saving.get_registered_name(type(model)).startswith("tfbert>"))


def model_for_weights(config: BertConfig, weights: Mapping[str, np.ndarray],
                      task: Optional[huggingface.HfTask] = None) -> keras.Model:
  """Builds the tfbert model class whose heads match a Google-name dict.

  A root `output_weights` [C, H] is a sentence classifier's head, or a tagger's when a Hugging
  Face directory says `BertForTokenClassification` (`task`); the directory's `id2label`
  names the classes or tags (a regression's single output has none).
  """
  if any(n.startswith(("cls/predictions/", "cls/seq_relationship/")) for n in weights):
    nsp = any(n.startswith("cls/seq_relationship/") for n in weights)
    return BertPretrainer(config, objective="mlm_nsp" if nsp else "mlm")
  if any(n.startswith("cls/squad/") for n in weights):
    return BertSpanLabeler(config)
  if "output_weights" in weights:
    classes = weights["output_weights"].shape[0]
    task = task or huggingface.HfTask()
    labels = task.labels if task.labels and len(task.labels) == classes else None
    if task.architecture == "BertForTokenClassification":
      return BertTokenClassifier(config, labels or [f"LABEL_{i}" for i in range(classes)])
    regression = classes == 1 or task.problem_type == "regression"
    return BertClassifier(config, num_classes=classes, labels=None if regression else labels)
  return BertEncoder(config)


# transformers builds `BertForQuestionAnswering`, `BertForTokenClassification` and
# `BertForMaskedLM` without BERT's pooler (`add_pooling_layer=False`): their directories hold
# none, and tfbert's span labeler, tagger and MLM-only pretrainer read none of its output.
POOLERLESS_ARCHITECTURES = frozenset({"BertForQuestionAnswering", "BertForTokenClassification",
                                      "BertForMaskedLM"})
POOLER_SCOPE = "bert/pooler/"


def hf_architecture(model: keras.Model) -> Optional[str]:
  """The transformers class of a tfbert model's head (its `hf_task`), or None."""
  hf_task = getattr(model, "hf_task", None)
  return hf_task()["architectures"][0] if hf_task else None


def uses_pooler(model: keras.Model) -> bool:
  """Whether `model`'s outputs read the pooler (every tfbert model but the span labeler, the
  tagger and the MLM-only pretrainer, by their transformers class)."""
  return hf_architecture(model) not in POOLERLESS_ARCHITECTURES


def with_fresh_pooler(model: keras.Model, weights: Mapping[str, np.ndarray],
                      source: str, why: str) -> dict[str, np.ndarray]:
  """`weights` plus `model`'s own (fresh) pooler when they have none, said in the log."""
  if any(name.startswith(POOLER_SCOPE) for name in weights):
    return dict(weights)
  pooler = {name: variable.numpy() for name, variable in
            google_names.google_variable_map(model).items() if name.startswith(POOLER_SCOPE)}
  logging.info(f"{source} has no pooler ({why}): it keeps its fresh values")
  return {**weights, **pooler}


def missing_heads(model: keras.Model, weights: Mapping[str, np.ndarray]) -> tuple[str, ...]:
  """The heads of the `BertPretrainer` `model` that `weights` lack (a pretraining checkpoint
  may lack one of its two heads, e.g. a `BertForMaskedLM`'s NSP head); an MLM-only
  pretrainer has no NSP head to lack."""
  if not isinstance(model, BertPretrainer):
    return ()
  heads = {"mlm_head": "cls/predictions/", "nsp_head": "cls/seq_relationship/"}
  return tuple(h for h, scope in heads.items() if getattr(model, h) is not None
               and not any(n.startswith(scope) for n in weights))


def read_tfbert_model(path: str, flag: Optional[str] = None) -> keras.Model:
  """Loads a tfbert `.keras` file (without its optimizer); `flag`, the tool's flag that
  gave `path`, starts the messages when given.

  Raises:
    FileNotFoundError: naming `path`.
    ValueError: naming `path` and what is wrong: another kind of model (`other_kind`: a
      Google checkpoint, a Hugging Face, sentence-transformers or run directory, an export),
      not a `.keras` name, a truncated or corrupt archive (Keras itself says "File not
      found" for those), a model Keras cannot load, or a Keras model that is not a tfbert
      one.
  """
  if not (path.endswith(".keras") and files.isfile(path)):
    problem = other_kind(path)
    if problem:
      raise ValueError(f"{flag} {problem}" if flag else problem)
  files.check_found(path, f"{flag + ': ' if flag else ''}tfbert model file")
  where = f"{flag} {path}" if flag else path
  if files.isdir(path):  # Sweep 31, A53: named neither the flag nor the file to give.
    inside = os.path.join(path, "model.keras")
    raise ValueError(f"{where} is a directory: name the .keras model in it (e.g. {inside})"
                     + ("" if files.exists(inside) else
                        "; it holds none yet: a run writes model.keras when it finishes "
                        "(rerun it to resume from its checkpoints/)"))
  if not path.endswith(".keras"):
    raise ValueError(f"{where}: a tfbert model must be a .keras file")
  with _local_copy(path) as local:
    problem = _keras_archive_problem(local)
    if problem:
      raise ValueError(f"{path}: not a valid .keras file ({problem})")
    try:
      model = keras.saving.load_model(local, compile=False)
    except Exception as e:  # Keras raises many types; all mean "this file does not load".
      message = " ".join(str(e).split())[:300]
      raise ValueError(f"{path}: Keras cannot load it ({type(e).__name__}: {message})") from e
  if not is_tfbert_model(model):
    raise ValueError(f"{path}: not a tfbert model: holds a keras {type(model).__name__}")
  return model


@contextlib.contextmanager
def _local_copy(path: str) -> Iterator[str]:
  """`path` itself when local; for a URL (`gs://...`) a local temporary copy of it (Keras'
  checks of a `.keras` name and zip archive read local files), removed afterwards."""
  if not files.is_url(path):
    yield path
    return
  with tempfile.TemporaryDirectory(prefix="tfbert-keras-") as directory:
    local = os.path.join(directory, os.path.basename(path))
    files.copy(path, local)
    yield local


def _keras_archive_problem(path: str) -> Optional[str]:
  """What is wrong with `path` as a `.keras` zip archive, or None."""
  if not zipfile.is_zipfile(path):
    return "not a zip archive: truncated, or another kind of file"
  try:
    with zipfile.ZipFile(path) as archive:
      damaged = archive.testzip()
      names = set(archive.namelist())
  except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
    return f"corrupt zip archive: {e}"
  if damaged:
    return f"corrupt zip archive: {damaged} fails its CRC check"
  if "config.json" not in names:
    return "the zip archive holds no config.json"
  return None


def save_tfbert_model(model: keras.Model, path: str, vocab_file: Optional[str] = None,
                      do_lower_case: Optional[bool] = None,
                      model_max_length: Optional[int] = None,
                      tokenizer_files: bool = True) -> None:
  """Saves `model` as a `.keras` file (+ its tokenizer files beside it), complete or not at all.

  Keras writes straight to the path it is given (a full disk leaves a truncated file under
  the final name) and wants it to end in `.keras`, so the model is saved
  under its final name inside a staging directory and renamed into place, after the vocab
  (`tfbert.runtime.atomic.file_set`).

  Args:
    model: a tfbert model.
    path: the `.keras` file.
    vocab_file: copied as `vocab.txt` beside it when given; with `do_lower_case`, the
      tokenizer's JSON files too (`huggingface.write_tokenizer_files`).
    do_lower_case: the vocabulary's casing.
    model_max_length: the sequence length `tokenizer_config.json` records (default:
      `max_position_embeddings`).
    tokenizer_files: False: no file beside the model (a fine-tuning run's `model.keras`,
      whose directory holds the run's `vocab.txt` and `run_config.json` already).

  With `vocab_file` and `do_lower_case`, the file records them (`text_record`, in its zip
  comment) whatever `tokenizer_files` says: every `.keras` file tfbert writes with a known
  vocabulary refuses another one when loaded (`tfbert.load`).

  Raises:
    OSError: naming `path`, when it cannot be written (a full disk).
  """
  if not path.endswith(".keras"):
    raise ValueError(f"a tfbert model file must end in .keras, got {path!r}")
  directory = files.parent(path)
  model_max_length = model_max_length or model.config.max_position_embeddings
  if vocab_file and tokenizer_files:
    check_side_contents(path, directory, tokenizer_sides(vocab_file, do_lower_case,
                                                         model_max_length),
                        rewrite=files.isfile(path))
  files.makedirs(directory)
  with atomic.file_set(directory, os.path.basename(path), "keras") as staging:
    try:
      _save_keras(model, os.path.join(staging, os.path.basename(path)))
    except OSError as e:  # Keras' names no file, or the staging one.
      raise OSError(f"cannot write {path}: {e.strerror or e}") from e
    if vocab_file and do_lower_case is not None:
      write_text_record(os.path.join(staging, os.path.basename(path)),
                        text_record(vocab_file, do_lower_case))
      if tokenizer_files:
        huggingface.write_tokenizer_files(staging, vocab_file, do_lower_case,
                                          model_max_length)
    elif vocab_file and tokenizer_files:
      files.copy(vocab_file, os.path.join(staging, "vocab.txt"))


# What a model written as a file (or prefix) may share its folder's tokenizer files with:
# tfbert's model files, its id exports, Google checkpoints (by their `.index`).
MODEL_FILE_SUFFIXES = (".keras", ".tflite", ".onnx", ".index")


def tokenizer_sides(vocab_file: str, do_lower_case: Optional[bool],
                    model_max_length: int) -> dict[str, Any]:
  """{name: content} of the tokenizer files written with a model (`vocab.txt`; with
  `do_lower_case`, the JSON files of `huggingface.write_tokenizer_files`)."""
  sides = {huggingface.TOKENIZER_FILES[0]: files.read_bytes(vocab_file)}
  if do_lower_case is not None:
    sides[huggingface.TOKENIZER_FILES[1]] = json.dumps(
        huggingface.tokenizer_config(do_lower_case, model_max_length))
    sides[huggingface.TOKENIZER_FILES[2]] = json.dumps(huggingface.SPECIAL_TOKENS_MAP)
  return sides


def check_side_contents(output: str, directory: str, sides: Mapping[str, Any],
                        rewrite: bool) -> None:
  """Refuses to replace a file in `directory` that writing `output` writes there (`sides`:
  {name: content, str or bytes}) when its content differs: another model's vocabulary (a
  `.keras` file's, a TFLite or ONNX export's, a checkpoint's), a user's file; they would
  then describe this model, and whatever read them before would read them wrong. The same
  content is fine, and so is a `rewrite` of `output` (the `.keras` file, the Hugging Face
  directory is there already) when no other model file (`MODEL_FILE_SUFFIXES`) shares the
  folder: the files are that model's.

  Raises:
    ValueError: naming `output`, the file that differs and what to do.
  """
  if not files.isdir(directory):
    return
  others = [name for name in files.listdir(directory)
            if name.endswith(MODEL_FILE_SUFFIXES) and name != os.path.basename(output)]
  if rewrite and not others:
    return
  beside = f"; here {', '.join(sorted(others)[:3])}" if others else ""
  for name, content in sides.items():
    side = os.path.join(directory, name)
    if not files.isfile(side) or files.same_content(name, files.read_bytes(side), content):
      continue
    what = "differs from the one this model's save writes"
    if name == huggingface.TOKENIZER_FILES[0]:
      what = "holds another vocabulary than this model's"
    elif name == huggingface.TOKENIZER_FILES[1]:
      ours = json.loads(content)
      what += (f" (do_lower_case {ours['do_lower_case']}, model_max_length "
               f"{ours['model_max_length']})")
    raise ValueError(f"cannot write {output}: {side} {what}, and writing would replace it "
                     f"(the tokenizer files beside a model are that model's{beside}): save "
                     "into a folder of its own")


# Beside `.keras` files: each classifier's `is_pair` by its file's name (`read_arities`).
TEXT_SETTINGS_FILE = "text_settings.json"


def read_arities(path: str) -> dict[str, bool]:
  """The arities `TEXT_SETTINGS_FILE` at `path` records: {`.keras` file name: is_pair}.

  The file reads `{"is_pair": {"model.keras": true, ...}}`: several models may share a
  directory (and its side files), so each has its entry; one without an entry is of unknown
  arity.

  Raises:
    ValueError: naming `path`: not that form (an earlier tfbert's `{"is_pair": true}` said
      nothing of which model it described).
  """
  value = json_values.read(path)
  arities = value.get("is_pair") if isinstance(value, dict) else None
  if isinstance(arities, bool):
    raise ValueError(f"{path}: an arity record of an earlier tfbert (is_pair: "
                     f"{str(arities).lower()}) that does not name the .keras file it "
                     "describes: remove it, or save the model again with tfbert.save")
  if (not isinstance(arities, dict) or set(value) != {"is_pair"}
      or not all(isinstance(v, bool) for v in arities.values())):
    raise ValueError(f"{path}: not a tfbert arity record: it must read "
                     '{"is_pair": {"<name>.keras": true or false, ...}}')
  return arities


# Beside `.keras` files and Google prefixes: each span labeler's `SPAN_SETTINGS` by its
# file's (prefix's) name (`read_span_records`).
SPAN_SETTINGS_FILE = "span_settings.json"


def read_span_records(path: str) -> dict[str, dict]:
  """The span settings `SPAN_SETTINGS_FILE` at `path` records: {`.keras` file or Google
  prefix name: {`huggingface.SPAN_SETTINGS`}}.

  Raises:
    ValueError: naming `path`, when it is not that form.
  """
  value = json_values.read(path)
  if not isinstance(value, dict) or not all(isinstance(name, str) for name in value):
    raise ValueError(f"{path}: expected {{\"<name>.keras\" or \"<prefix>\": "
                     f"{{{', '.join(huggingface.SPAN_SETTINGS)}}}}}, got {value!r:.200}")
  return {name: huggingface.check_span_settings(entry, f"{path}: {name}")
          for name, entry in value.items()}


def new_side_record(path: str, record_name: str, read: Callable[[str], dict],
                    value: Any) -> Optional[dict]:
  """The side record `record_name` beside the file (or Google prefix) `path` once `value`
  (None: nothing of this kind) is its file's entry: None when the record stays as it is.
  `read` reads the record; it is read before anything is written (a record tfbert cannot
  read is refused then)."""
  record = os.path.join(files.parent(path), record_name)
  old = read(record) if files.isfile(record) else {}
  new = {name: entry for name, entry in old.items() if name != os.path.basename(path)}
  if value is not None:
    new[os.path.basename(path)] = value
  return None if new == old else new


def write_span_records(directory: str, records: Optional[dict[str, dict]]) -> None:
  """Writes (an empty record: removes) `SPAN_SETTINGS_FILE` in `directory`; None: leaves
  it as it is."""
  _write_side_record(os.path.join(directory, SPAN_SETTINGS_FILE), records)


def write_arity_records(directory: str, arities: Optional[dict[str, bool]]) -> None:
  """Writes (an empty record: removes) `TEXT_SETTINGS_FILE` in `directory`; None: leaves
  it as it is."""
  _write_side_record(os.path.join(directory, TEXT_SETTINGS_FILE),
                     arities and {"is_pair": arities})


def _write_side_record(path: str, value: Optional[dict]) -> None:
  if value is None:
    return
  if value:
    atomic.write_json(path, value)
  elif files.isfile(path):
    files.remove(path)


# A `.keras` file's record of its text settings, in its zip archive's comment (Keras reads
# and writes no comment, and it survives a copy of the file): {RECORD_KEY: {...}}.
RECORD_KEY = "tfbert_text"


def text_record(vocab_file: str, do_lower_case: bool) -> dict[str, Any]:
  """What a `.keras` file records of its text settings: its vocabulary's fingerprint
  (`vocab_sha256`, `vocab_lines`) and casing (`do_lower_case`)."""
  content = files.read_bytes(vocab_file)
  return {"vocab_sha256": hashlib.sha256(content).hexdigest(),
          "vocab_lines": len(content.splitlines()), "do_lower_case": bool(do_lower_case)}


def write_text_record(keras_file: str, record: dict[str, Any]) -> None:
  """Writes `record` (`text_record`) into the `.keras` file `keras_file` (its zip comment);
  the file is one being staged (`save_tfbert_model`), not yet in place."""
  comment = json.dumps({RECORD_KEY: record}, sort_keys=True).encode()
  if not files.is_url(keras_file):
    with zipfile.ZipFile(keras_file, "a") as archive:
      archive.comment = comment
    return
  buffer = io.BytesIO(files.read_bytes(keras_file))
  with zipfile.ZipFile(buffer, "a") as archive:
    archive.comment = comment
  with files.open_file(keras_file, "wb") as f:
    f.write(buffer.getvalue())


def read_text_record(keras_file: str) -> Optional[dict[str, Any]]:
  """The record `write_text_record` wrote into `keras_file`, or None (a file written before
  tfbert recorded it, or by Keras itself).

  Raises:
    ValueError: naming the file, when its record is not one.
  """
  with files.open_file(keras_file, "rb") as f:
    try:
      comment = zipfile.ZipFile(f).comment
    except zipfile.BadZipFile:
      return None  # The reader names it.
  try:
    value = json.loads(comment.decode("utf-8")) if comment else None
  except ValueError:
    return None  # Not ours.
  record = value.get(RECORD_KEY) if isinstance(value, dict) else None
  if record is None:
    return None
  if (not isinstance(record, dict) or not isinstance(record.get("vocab_sha256"), str)
      or not isinstance(record.get("vocab_lines"), int)
      or not isinstance(record.get("do_lower_case"), bool)):
    raise ValueError(f"{keras_file}: its tfbert text record is not one: {record!r}; save the "
                     "model again with tfbert.save")
  return record


def check_recorded_vocab(source: str, record: dict[str, Any], vocab: str, given: bool,
                         term: str = "vocab_file=", beside: Optional[str] = None) -> None:
  """Refuses a vocabulary other than the one the `.keras` file `source` was saved with (its
  record: `read_text_record`): every id would be another word piece, silently. The one check
  of it: `tfbert.load` and convert_checkpoint.

  Args:
    source: the `.keras` file.
    record: its `read_text_record`.
    vocab: the vocabulary to use with it.
    given: whether the user gave `vocab` (False: the `vocab.txt` beside `source`).
    term: how the caller's user gives a vocabulary ("vocab_file=", "--vocab_file=").
    beside: the `vocab.txt` beside `source`, if any: named as the fix when it is the one.

  Raises:
    ValueError: naming both files and their fingerprints, and what to pass.
  """
  found = text_record(vocab, record["do_lower_case"])
  if found["vocab_sha256"] == record["vocab_sha256"]:
    return
  where = f"{term}{vocab!r}" if given else f"the vocab.txt beside it ({vocab})"
  fix = (f"pass {term} the vocabulary it was saved with" if given else
         f"put the model's own vocab.txt beside it, or pass {term} the vocabulary it was "
         "saved with")
  if given and beside and text_record(beside, False)["vocab_sha256"] == record["vocab_sha256"]:
    fix = f"leave {term.rstrip('=')} out: the vocab.txt beside it ({beside}) is that one"
  raise ValueError(
      f"{source} was saved with a vocabulary of {record['vocab_lines']} lines (sha256 "
      f"{record['vocab_sha256'][:12]}), but {where} has {found['vocab_lines']} lines "
      f"(sha256 {found['vocab_sha256'][:12]}): its ids would be other word pieces; {fix}")


def _save_keras(model: keras.Model, path: str) -> None:
  """`model.save(path)`; for a URL, saved to a local temporary file first and copied over."""
  if not files.is_url(path):
    model.save(path)
    return
  with tempfile.TemporaryDirectory(prefix="tfbert-keras-") as directory:
    local = os.path.join(directory, os.path.basename(path))
    model.save(local)
    files.copy(local, path)


def source_vocab_file(fmt: str, path: str) -> Optional[str]:
  """The `vocab.txt` beside a checkpoint of format `fmt` at `path` (a linked `.keras` file:
  beside its target), if there is one."""
  if fmt == "tfbert":
    path = model_paths.real_file(path)
  directory = path if fmt == "hf" else files.parent(path)
  vocab = os.path.join(directory, "vocab.txt")
  return vocab if files.isfile(vocab) else None


# What a source of each format is, for messages.
SOURCE_KINDS = {
    "google": "a Google checkpoint prefix (<directory>/bert_model.ckpt: its .index file's "
              "path without .index)",
    "hf": "a Hugging Face or sentence-transformers model directory (config.json, "
          "model.safetensors; or modules.json)",
    "tfbert": "a tfbert .keras model (e.g. <run>/model.keras)",
}
# What `model_paths.locate` finds, as a user would read it.
_LOCATED = {
    "google": "a Google checkpoint", "hf": "a Hugging Face directory",
    "sentence-transformers": "a sentence-transformers directory",
    "tfbert": "a tfbert .keras model",
    "export": "a SavedModel export (it serves; it holds no checkpoint to read: use its run's "
              "model.keras)"}


def other_kind(path: str) -> Optional[str]:
  """Where a tfbert `.keras` model file is wanted: what `path` is instead when it is another
  model kind `model_paths.locate` knows, with how to get the file (the convert_checkpoint
  command, or the run's own model.keras); None for anything else (a missing path, a file
  of no known kind), which the caller names its own way."""
  located = _located(path)
  if not located or located == ("tfbert", path):
    return None
  kind, target = located
  if kind == "google":
    problem = google_checkpoint.training_checkpoint_problem(target)
    if problem:
      return problem
  what = _LOCATED[kind]
  if kind == "tfbert":  # A run directory.
    return f"{path} is a tfbert run directory, not a .keras model file: pass its model {target}"
  if kind == "export":
    return f"{path} is {what}"
  if target != path:
    what = f"a directory holding {what} ({target})"
  fmt = "hf" if kind == "sentence-transformers" else kind
  return (f"{path} is {what}, not a tfbert .keras model file: make one with python "
          f"tools/convert_checkpoint.py --input_format={fmt} --input={target} "
          "--output_format=tfbert --output=<new>.keras")


def _is_kind(fmt: str, path: str) -> bool:
  """Whether `path` has the form a source of format `fmt` takes (not yet its content)."""
  if fmt == "google":
    return files.isfile(path + ".index") and not files.isdir(path)
  if fmt == "hf":
    return files.isdir(path) and any(files.isfile(os.path.join(path, name))
                                     for name in ("config.json", "modules.json"))
  return files.isfile(path)


def _located(path: str) -> Optional[tuple[str, str]]:
  """(kind, what to read) of `path` by `model_paths.locate`, with
  "sentence-transformers" read as "hf"; None for a path that is no model."""
  try:
    kind, target = model_paths.locate(path)
  except (OSError, ValueError):
    return None
  return kind, target


def _enclosing_model(path: str, spellings: Mapping[str, str]) -> Optional[str]:
  """For a missing `path`: the model its directory (or that one's parent, when missing too)
  holds, with the flag that reads it ("p01 holds a Google checkpoint (...): pass
  --init_checkpoint=..."), or None. A run_pretraining run's `<run>/model.keras`,
  which such a run never writes, was answered "(e.g. <run>/model.keras)", the path just
  given."""
  parent = os.path.dirname(path.rstrip("/"))
  if parent and not files.isdir(parent):  # <run>/best/model.keras: the run; no further.
    parent = os.path.dirname(parent)
  located = _located(parent) if parent and files.isdir(parent) else None
  if not located or located[0] not in spellings or located[1] == path:
    return None
  kind, target = located
  kind = "hf" if kind == "sentence-transformers" else kind
  return (f"{parent} holds {_LOCATED[located[0]]} ({target}): pass "
          f"{spellings[kind].format(path=target)}")


def check_source(fmt: str, path: str, flag: str, spellings: Mapping[str, str],
                 config_file: Optional[str] = None, needs_config: bool = False) -> None:
  """The one check of a source path, before any part of it is read: it exists and is the
  kind its flag takes; one that is recognisably another kind is named with the flag that
  takes it ("--input X is a Hugging Face directory: pass --input_format=hf").

  Args:
    fmt: the format the flag takes ("google", "hf", "tfbert").
    path: the source.
    flag: the flag that gave it (e.g. "--input", "--init_hf_dir").
    spellings: how the caller's user names a source of each format, `{path}` standing for
      what to read (convert_checkpoint: "--input_format=hf"; pretraining:
      "--init_hf_dir={path}").
    config_file: the config given for a Google checkpoint (`--bert_config_file`), if any.
    needs_config: a Google checkpoint's `bert_config.json` is read (without `config_file`).

  Raises:
    FileNotFoundError: nothing at `path`; a Google checkpoint without the config it needs.
    ValueError: `path` is another kind, or none, naming the flag and what it takes; a tfbert
      run's training checkpoint (`google_checkpoint.training_checkpoint_problem`), naming
      the run's model.keras.
  """
  if fmt not in FORMATS:
    raise ValueError(f"unknown checkpoint format {fmt!r}; use one of {FORMATS}")
  if files.isfile(path + ".index"):  # Whatever the format: never read as a model.
    problem = google_checkpoint.training_checkpoint_problem(path)
    if problem:
      raise ValueError(f"{flag} {problem}")
  if not _is_kind(fmt, path):
    located = _located(path)
    if located:
      kind, target = located
      kind = "hf" if kind == "sentence-transformers" else kind
      what = _LOCATED[located[0]]
      if target != path:  # A directory holding the model: a run's, a checkpoint's.
        what = (f"a directory holding {what} ({target})" if kind != "tfbert"
                else f"a tfbert run directory (its model: {target})")
      if kind != fmt or target != path:
        how = (f": pass {spellings[kind].format(path=target)}" if kind in spellings
               else "")
        raise ValueError(f"{flag} {path} is {what}{how}")
    if fmt == "google":
      google_checkpoint.check_prefix(path, flag)  # Names a prefix in a directory, hints.
    if not files.exists(path) or files.dangling_link(path) is not None:
      missing = (files.missing_file_message(path, flag) if files.dangling_link(path)
                 else f"{flag} {path}: no such {'directory' if fmt == 'hf' else 'file'}")
      enclosing = _enclosing_model(path, spellings)
      raise FileNotFoundError(f"{missing}; {flag} takes {SOURCE_KINDS[fmt]}"
                              f"{f', and {enclosing}' if enclosing else ''}")
    found = "a directory" if files.isdir(path) else "a file"
    raise ValueError(f"{flag} {path}: {found}, where {SOURCE_KINDS[fmt]} is expected")
  if fmt == "google" and needs_config and not config_file:
    beside = os.path.join(os.path.dirname(path), "bert_config.json")
    if not files.isfile(beside):
      missing = (files.missing_file_message(beside, "bert_config.json")
                 if files.dangling_link(beside)
                 else f"no bert_config.json beside the checkpoint ({beside})")
      raise FileNotFoundError(f"{flag} {path}: {missing}: pass --bert_config_file")


# How convert_checkpoint's user names a source of each format.
INPUT_SPELLINGS = {fmt: f"--input_format={fmt} --input={{path}}" for fmt in FORMATS}


def read_model(fmt: str, path: str, config_file: Optional[str] = None,
               config_flag: Optional[str] = None) -> keras.Model:
  """Reads a checkpoint of any supported format into a tfbert model.

  A Google checkpoint's config (`config_file`, given by the setting `config_flag` when there
  is one; else the `bert_config.json` beside it) must describe its tensors: one that does
  not is named with its first contradicted field (`google_checkpoint.config_mismatch`). A
  tfbert or Hugging Face input carries its own config: a `config_file` given with one must
  equal it (`own_config_difference`), never ignored without a word.
  """
  if fmt in ("tfbert", "hf") and config_file:
    given_config = BertConfig.from_json_file(config_file, config_flag or "config file")
    model = read_model(fmt, path)
    difference = own_config_difference(given_config, model.config, fmt, path,
                                       f"{config_flag}={config_file}" if config_flag
                                       else config_file)
    if difference:
      raise ValueError(difference)
    return model
  if fmt == "tfbert":
    return read_tfbert_model(path)
  if fmt == "google":
    given = config_file
    config_file = config_file or os.path.join(os.path.dirname(path), "bert_config.json")
    config = BertConfig.from_json_file(config_file)
    weights = google_checkpoint.read_google_checkpoint(path)
    where = (f"{config_flag}={config_file}" if given and config_flag
             else f"{config_file}" + ("" if given else " (beside the checkpoint)"))
    cause = google_checkpoint.config_mismatch(config, weights, where)
    if cause:
      how = f" ({config_flag})" if config_flag and not given else ""
      raise ValueError(f"{cause}: pass the config the checkpoint was trained with{how}")
    task = None  # A Google checkpoint says nothing about its task (labels.txt: below).
  elif fmt == "hf":
    config, weights, _ = huggingface.load_hf_checkpoint(path)
    task = huggingface.read_hf_task(path)
  else:
    raise ValueError(f"unknown checkpoint format {fmt!r}; use one of {FORMATS}")
  try:
    model = model_for_weights(config, weights, task)
  except ValueError as e:  # A head its model class refuses (a one-tag tagger): named here.
    raise ValueError(f"{path}: {e}") from e
  if not uses_pooler(model):
    weights = with_fresh_pooler(model, weights, path, f"a {type(model).__name__} reads none")
  google_checkpoint.assign_google_weights(model, weights, path,
                                          allow_missing=missing_heads(model, weights))
  return google_labels(model, path) if fmt == "google" else model


def own_config_difference(given: BertConfig, own: BertConfig, fmt: str, path: str,
                          where: str) -> Optional[str]:
  """The refusal of a config given for a tfbert or Hugging Face input (which carries its own)
  that differs from the input's own, naming the first differing field of those that define
  the model (`REQUIRED_FIELDS`; the release fields are unused by it); None when equal.

  Args:
    given: the config given (e.g. by `--bert_config_file`).
    own: the input model's own config.
    fmt: the input's format ("tfbert", "hf").
    path: the input.
    where: where `given` came from, e.g. "--bert_config_file=cfg.json".
  """
  for field in REQUIRED_FIELDS:
    mine, theirs = getattr(given, field), getattr(own, field)
    if mine != theirs:
      kind = "a tfbert model file" if fmt == "tfbert" else "a Hugging Face directory"
      return (f"{field} {json.dumps(mine)} in {where}, but the input {path} ({kind}, which "
              f"carries its own config) has {json.dumps(theirs)}: leave the config out (the "
              "input's own is used) or pass the one it was built with")
  return None


def google_labels(model: keras.Model, prefix: str) -> keras.Model:
  """A Google checkpoint's classifier with the names of the `labels.txt` beside it (what
  `write_model` writes there: the format has no place for them); unchanged without one, or
  for another model.

  Raises:
    ValueError: naming `labels.txt`, when its names are not as many as the classes (or the
      classifier is a regression's).
  """
  path = os.path.join(files.parent(prefix), model_paths.LABELS_FILE)
  if not isinstance(model, BertClassifier):
    return model
  files.check_not_dangling(path, "labels file")
  if not files.isfile(path):
    return model
  labels = model_paths.read_labels_file(path)
  if model.num_classes < 2 or len(labels) != model.num_classes:
    what = ("a regression (one score, no class names)" if model.num_classes < 2
            else f"a classifier of {model.num_classes} classes")
    raise ValueError(f"{path}: {len(labels)} labels {list(labels)} for {what} ({prefix}): "
                     "it is another model's; move it away")
  named = BertClassifier(model.config, model.num_classes, model.dropout_rate, labels=labels)
  named.build()
  named.set_weights(model.get_weights())
  return named


def write_model(model: keras.Model, fmt: str, path: str,
                vocab_file: Optional[str] = None, do_lower_case: Optional[bool] = None,
                labels: Optional[Sequence[str]] = None,
                model_max_length: Optional[int] = None,
                is_pair: Optional[bool] = None,
                span_settings: Optional[Mapping[str, Any]] = None) -> None:
  """Writes a tfbert model in any supported format, with its tokenizer files if given.

  `vocab_file` is copied beside the output as `vocab.txt`; with `do_lower_case`, the
  tokenizer's `tokenizer_config.json` (which records the casing) and
  `special_tokens_map.json` are written too (`huggingface.write_tokenizer_files`). A
  Hugging Face directory says which transformers class loads it and, for a classifier or
  tagger, its labels (the model's `hf_task`; a classifier's `labels` name its classes); a
  span labeler's or tagger's holds no pooler, as transformers' own (`uses_pooler`).
  `model_max_length` is the sequence length the tokenizer's files record (default:
  `max_position_embeddings`). A Google checkpoint has no place for a classifier's labels:
  they go into `labels.txt` beside it, which `read_model` reads back. `is_pair`, a
  classifier's arity when known, goes into a Hugging
  Face `config.json` (`huggingface.tfbert_fields`; the other formats have no place for it),
  and so do a span labeler's `span_settings` (`huggingface.SPAN_SETTINGS`; `tfbert.save`
  writes them beside a Google checkpoint or `.keras` file). No model is written into a
  directory holding a model of another kind (`model_paths.check_no_other_model`).
  """
  if fmt in ("google", "tfbert", "hf"):  # Not into a directory of another kind of model.
    model_paths.check_no_other_model(path, fmt)
  if fmt == "google":
    google_checkpoint.export_google_checkpoint(  # The casing is resolved by its caller.
        model, path, vocab_file=vocab_file, do_lower_case=do_lower_case,
        model_max_length=model_max_length, allow_casing_mismatch=True)
    labels = labels if labels is not None else getattr(model, "labels", None)
    if labels is not None:  # Google's format has no place for them (`google_labels`).
      model_paths.write_labels_file(files.parent(path), labels)
    else:  # One checkpoint per folder: a labels.txt there named the one just replaced.
      stale = os.path.join(files.parent(path), model_paths.LABELS_FILE)
      if files.isfile(stale):
        files.remove(stale)
        logging.info("removed %s: it named the classes of the checkpoint %s replaced, and "
                     "this model has no labels", stale, path)
  elif fmt == "hf":
    if vocab_file:  # Into a folder of other files: not over another model's tokenizer.
      check_side_contents(path, path, tokenizer_sides(
          vocab_file, do_lower_case, model_max_length or model.config.max_position_embeddings),
                          rewrite=files.isfile(os.path.join(path, "config.json")))
    weights = google_checkpoint.google_weights(model)
    if not uses_pooler(model):  # As transformers' own directories of these heads.
      weights = {n: w for n, w in weights.items() if not n.startswith(POOLER_SCOPE)}
    huggingface.save_hf_checkpoint(model.config, weights, path,
                                   vocab_file=vocab_file, do_lower_case=do_lower_case,
                                   task={**model.hf_task(labels),
                                         **huggingface.tfbert_fields(is_pair,
                                                                     span_settings)},
                                   model_max_length=model_max_length)
  elif fmt == "tfbert":
    save_tfbert_model(model, path, vocab_file=vocab_file, do_lower_case=do_lower_case,
                      model_max_length=model_max_length)
  else:
    raise ValueError(f"unknown checkpoint format {fmt!r}; use one of {FORMATS}")


# Outputs that must carry their vocabulary: a deployer loads them with other tools
# (Hugging Face's AutoTokenizer, google-research/bert's scripts) that need it beside them.
NEEDS_VOCAB = ("google", "hf")


def keras_named_problem(term: str, path: str, format_term: str, writes: str,
                        keras_way: str) -> Optional[str]:
  """The refusal of a directory or checkpoint prefix named like a `.keras` file (every tool
  and person would take it for one: most likely the Keras format was meant), or None.

  Args:
    term: what gave `path` (e.g. "--output", "path").
    path: the output.
    format_term: how the format was chosen (e.g. "--output_format=hf", "format='hf'").
    writes: what the format writes ("a directory", "a checkpoint prefix").
    keras_way: how to write a `.keras` file instead (e.g. "pass --output_format=tfbert").
  """
  if not path.rstrip("/" + os.sep).lower().endswith(".keras"):
    return None
  named = "directory" if writes == "a directory" else "prefix"
  return (f"{term} {path} ends in .keras, a Keras file's name, but {format_term} writes "
          f"{writes}: {keras_way} for a .keras file, or name the {named} without .keras")


def convert_checkpoint(input_format: str, input_path: str, output_format: str,
                       output_path: str, config_file: Optional[str] = None, *,
                       vocab_file: Optional[str] = None, do_lower_case: Optional[bool] = None,
                       allow_casing_mismatch: bool = False,
                       settings_of: Optional[
                           Callable[[keras.Model, str], Optional[Mapping[str, Any]]]] = None
                       ) -> keras.Model:
  """Reads `input_path` in `input_format`, writes it to `output_path` in `output_format`.

  The vocabulary (`vocab_file`, else the `vocab.txt` beside the input, `source_vocab_file`)
  goes beside the output with the tokenizer files that record its casing; one of another
  model there is not replaced (`check_side_contents`, as `tfbert.save`; a Google prefix:
  `google_checkpoint.check_writable_prefix`). The casing is checked before anything is
  written (`tfbert.text.casing`): `do_lower_case`, when given, must agree with the input's
  records and the vocabulary's content.

  The text settings the input records, `settings_of(model, input_path)` (the tool passes
  `tfbert.inference.loading.recorded_settings`, what `tfbert.load` reads; None: none), go
  with the output where it has room for them, as `tfbert.save` writes them, and are logged:
  the sequence length (`max_seq_length`, as `tokenizer_config.json`'s `model_max_length`;
  else `max_position_embeddings`, as before), a classifier's arity (`is_pair`: a Hugging
  Face `config.json`, the record beside a `.keras` file) and a span labeler's windows,
  answer length and v2.0 threshold (`huggingface.SPAN_SETTINGS`). A model converted from
  its run's `model.keras` then reads text as the run's model does.

  Raises:
    ValueError: a Google or Hugging Face output without a vocabulary to put beside it; an
      output that is, contains or lies inside an input (`tfbert.runtime.paths`); a tokenizer
      file of another model where the output's would go; an hf or google output named like
      a `.keras` file (`keras_named_problem`); a `config_file` that differs from a tfbert or
      hf input's own config (`own_config_difference`).
    tfbert.text.casing.CasingMismatchError: a casing that contradicts the input's.
  """
  paths.check_apart({"--input": input_path, "--bert_config_file": config_file,  # Before any work.
                     "--vocab_file": vocab_file}, {"--output": output_path})
  kind = {"hf": "directory", "google": "prefix"}.get(output_format, "file")
  if kind != "file":
    keras_named = keras_named_problem("--output", output_path,
                                      f"--output_format={output_format}",
                                      "a directory" if kind == "directory"
                                      else "a checkpoint prefix",
                                      "pass --output_format=tfbert")
    if keras_named:
      raise ValueError(keras_named)
  example = "model.keras" if output_format == "tfbert" else None
  named_directory = paths.directory_named_problem("--output", output_path, kind, example)
  if named_directory:  # "DIR/" as a prefix wrote hidden DIR/.index files, or into the parent.
    raise ValueError(named_directory)
  paths.check_outputs({"--output": output_path}, kind, required=True, example=example)
  run_directory.check_not_a_run(  # The vocabulary and tokenizer files go beside the output.
      "--output", output_path,
      output_path if output_format == "hf" else files.parent(output_path))
  check_source(input_format, input_path, "--input", INPUT_SPELLINGS, config_file,
               needs_config=True)
  if input_format == "tfbert":  # A link's records (vocab.txt, ...) are its target's.
    input_path = model_paths.real_file(input_path)
  model = read_model(input_format, input_path, config_file,  # Its errors name the input.
                     "--bert_config_file")
  given = vocab_file is not None
  vocab_file = vocab_file or source_vocab_file(input_format, input_path)
  record = read_text_record(input_path) if input_format == "tfbert" else None
  if record is not None and vocab_file is not None:  # As `tfbert.load` checks it.
    check_recorded_vocab(input_path, record, vocab_file, given, term="--vocab_file=",
                         beside=source_vocab_file(input_format, input_path))
  if vocab_file is None and output_format in NEEDS_VOCAB:
    raise ValueError(
        f"a {output_format} output needs its vocabulary beside it (other tools load it from "
        f"there) and there is no vocab.txt beside {input_path}: pass --vocab_file")
  if vocab_file is not None:  # Its ids past the model's vocab_size have no embedding.
    tokenization.check_vocab_fits(
        tokenization.vocab_entries(vocab_file), model.config.vocab_size,
        f"--vocab_file={vocab_file}" if given else f"the vocabulary {vocab_file} beside --input",
        f"--input {input_path}", trained=True)
    do_lower_case = casing.resolve_do_lower_case(  # Named as the other paths: the tool's.
        do_lower_case, casing.checkpoint_casing(input_path, vocab_file),
        allow_mismatch=allow_casing_mismatch, terms=casing.FLAGS)
  recorded = dict((settings_of(model, input_path) or {}) if settings_of else {})
  spans = ({name: recorded[name] for name in huggingface.SPAN_SETTINGS}
           if isinstance(model, BertSpanLabeler) and "doc_stride" in recorded else None)
  is_pair = recorded.get("is_pair") if isinstance(model, BertClassifier) else None
  length = recorded.get("max_seq_length")
  length = min(length, model.config.max_position_embeddings) if length else None
  records = (new_side_record(output_path, SPAN_SETTINGS_FILE, read_span_records, spans)
             if output_format in ("google", "tfbert") else None)  # Read before writing.
  arities = (new_side_record(output_path, TEXT_SETTINGS_FILE, read_arities, is_pair)
             if output_format == "tfbert" else None)
  write_model(model, output_format, output_path, vocab_file=vocab_file,
              do_lower_case=do_lower_case, model_max_length=length, is_pair=is_pair,
              span_settings=spans)
  write_span_records(files.parent(output_path), records)
  write_arity_records(files.parent(output_path), arities)
  kept = [f"max_seq_length {length}"] if length else []
  if is_pair is not None and output_format == "google":  # No place for it (sweep 27, B61).
    logging.warning("%s records no classifier arity (a Google checkpoint has no place for "
                    "it): %s's is_pair %s is not kept, and the checkpoint reads single texts "
                    "and pairs alike when loaded; --output_format=tfbert or hf keep it",
                    output_path, input_path, is_pair)
  else:
    kept += [] if is_pair is None else [f"is_pair {is_pair}"]
  kept += [] if spans is None else ["its span settings"]
  if kept:
    logging.info("%s keeps the text settings %s records: %s", output_path, input_path,
                 ", ".join(kept))
  return model
