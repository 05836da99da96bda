"""Converts BERT checkpoints between Google TF1, Hugging Face and tfbert formats.

Formats:
  * `google`: a google-research/bert checkpoint prefix (`.../bert_model.ckpt`) with
    `bert_config.json` in the same directory (or given explicitly).
  * `hf`: a Hugging Face directory with `config.json` and `model.safetensors`.
  * `tfbert`: a Keras `.keras` file of a tfbert model (config included).

The model class is chosen from the heads present in the source: MLM/NSP -> `BertPretrainer`,
`cls/squad` -> `BertSpanLabeler`, a root `output_weights` -> `BertClassifier`, otherwise
`BertEncoder`. Every conversion goes through a tfbert model with strict loading, so a
shape or name problem fails loudly instead of producing a half-converted checkpoint.

Outputs are self-contained: the `vocab.txt` beside the input (beside the prefix, in the
Hugging Face directory, beside the `.keras` file) is copied beside the output. Every output
file appears under its final name only when complete (`tfbert.runtime.atomic`), with mode 0644
less the umask; a bad input names its file and what is wrong with it.
"""

import os
import shutil
import zipfile
from typing import Mapping, Optional

import keras
import numpy as np

from tfbert.checkpoints import google_checkpoint, huggingface
from tfbert.config import BertConfig
from tfbert.encoder import BertEncoder
from tfbert.models import BertClassifier, BertPretrainer, BertSpanLabeler, BertTokenClassifier
from tfbert.runtime import atomic

FORMATS = ("google", "hf", "tfbert")
# What a `.keras` file must hold to be a tfbert model.
TFBERT_MODELS = (BertEncoder, BertPretrainer, BertSpanLabeler, BertClassifier,
                 BertTokenClassifier)


def model_for_weights(config: BertConfig, weights: Mapping[str, np.ndarray]) -> keras.Model:
  """Builds the tfbert model class whose heads match a Google-name dict."""
  if any(n.startswith(("cls/predictions/", "cls/seq_relationship/")) for n in weights):
    return BertPretrainer(config)
  if any(n.startswith("cls/squad/") for n in weights):
    return BertSpanLabeler(config)
  if "output_weights" in weights:
    return BertClassifier(config, num_classes=weights["output_weights"].shape[0])
  return BertEncoder(config)


def _missing_heads(model: keras.Model, weights: Mapping[str, np.ndarray]) -> tuple[str, ...]:
  """A pretraining checkpoint may lack one of its two heads (e.g. MLM-only exports)."""
  if not isinstance(model, BertPretrainer):
    return ()
  heads = {"mlm_head": "cls/predictions/", "nsp_head": "cls/seq_relationship/"}
  return tuple(h for h, scope in heads.items() if not any(n.startswith(scope) for n in weights))


def read_tfbert_model(path: str) -> keras.Model:
  """Loads a tfbert `.keras` file (without its optimizer).

  Raises:
    FileNotFoundError: naming `path`.
    ValueError: naming `path` and what is wrong: not a `.keras` name, a truncated or
      corrupt archive (Keras itself says "File not found" for those), a model Keras cannot
      load, or a Keras model that is not a tfbert one.
  """
  if not os.path.exists(path):
    raise FileNotFoundError(f"tfbert model file not found: {path}")
  if not path.endswith(".keras") or os.path.isdir(path):
    raise ValueError(f"{path}: a tfbert model must be a .keras file")
  problem = _keras_archive_problem(path)
  if problem:
    raise ValueError(f"{path}: not a valid .keras file ({problem})")
  try:
    model = keras.saving.load_model(path, compile=False)
  except Exception as e:  # Keras raises many types; all mean "this file does not load".
    message = " ".join(str(e).split())[:300]
    raise ValueError(f"{path}: Keras cannot load it ({type(e).__name__}: {message})") from e
  if not isinstance(model, TFBERT_MODELS):
    raise ValueError(f"{path}: not a tfbert model: holds a keras {type(model).__name__}")
  return model


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


def save_tfbert_model(model: keras.Model, path: str, vocab_file: Optional[str] = None) -> None:
  """Saves `model` as a `.keras` file (+ `vocab.txt` beside it), complete or not at all.

  Keras writes straight to the path it is given (a full disk leaves a truncated file under
  the final name) and wants it to end in `.keras`, so the model is saved
  under its final name inside a staging directory and renamed into place, after the vocab
  (`tfbert.runtime.atomic.file_set`).

  Raises:
    OSError: naming `path`, when it cannot be written (a full disk).
  """
  if not path.endswith(".keras"):
    raise ValueError(f"a tfbert model file must end in .keras, got {path!r}")
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  with atomic.file_set(directory, os.path.basename(path), "keras") as staging:
    try:
      model.save(os.path.join(staging, os.path.basename(path)))
    except OSError as e:  # Keras' names no file, or the staging one.
      raise OSError(f"cannot write {path}: {e.strerror or e}") from e
    if vocab_file:
      shutil.copyfile(vocab_file, os.path.join(staging, "vocab.txt"))


def source_vocab_file(fmt: str, path: str) -> Optional[str]:
  """The `vocab.txt` beside a checkpoint of format `fmt` at `path`, if there is one."""
  directory = path if fmt == "hf" else os.path.dirname(os.path.abspath(path))
  vocab = os.path.join(directory, "vocab.txt")
  return vocab if os.path.isfile(vocab) else None


def read_model(fmt: str, path: str, config_file: Optional[str] = None) -> keras.Model:
  """Reads a checkpoint of any supported format into a tfbert model."""
  if fmt == "tfbert":
    return read_tfbert_model(path)
  if fmt == "google":
    config_file = config_file or os.path.join(os.path.dirname(path), "bert_config.json")
    config = BertConfig.from_json_file(config_file)
    weights = google_checkpoint.read_google_checkpoint(path)
  elif fmt == "hf":
    config, weights, _ = huggingface.load_hf_checkpoint(path)
  else:
    raise ValueError(f"unknown checkpoint format {fmt!r}; use one of {FORMATS}")
  model = model_for_weights(config, weights)
  google_checkpoint.assign_google_weights(model, weights, path,
                                          allow_missing=_missing_heads(model, weights))
  return model


def write_model(model: keras.Model, fmt: str, path: str,
                vocab_file: Optional[str] = None) -> None:
  """Writes a tfbert model in any supported format, `vocab_file` copied beside it if given."""
  if fmt == "google":
    google_checkpoint.export_google_checkpoint(model, path, vocab_file=vocab_file)
  elif fmt == "hf":
    huggingface.save_hf_checkpoint(model.config, google_checkpoint.google_weights(model), path,
                                   vocab_file=vocab_file)
  elif fmt == "tfbert":
    save_tfbert_model(model, path, vocab_file=vocab_file)
  else:
    raise ValueError(f"unknown checkpoint format {fmt!r}; use one of {FORMATS}")


def convert_checkpoint(input_format: str, input_path: str, output_format: str,
                       output_path: str, config_file: Optional[str] = None) -> keras.Model:
  """Reads `input_path` in `input_format`, writes it to `output_path` in `output_format`.

  The input's `vocab.txt` (`source_vocab_file`), when there is one, is copied beside the
  output.
  """
  model = read_model(input_format, input_path, config_file)
  write_model(model, output_format, output_path,
              vocab_file=source_vocab_file(input_format, input_path))
  return model
