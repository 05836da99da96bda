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
"""

import os
from typing import Mapping, Optional

import keras
import numpy as np

from tfbert import google_checkpoint, huggingface
from tfbert.config import BertConfig
from tfbert.encoder import BertEncoder
from tfbert.models import BertClassifier, BertPretrainer, BertSpanLabeler

FORMATS = ("google", "hf", "tfbert")


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


def read_model(fmt: str, path: str, config_file: Optional[str] = None) -> keras.Model:
  """Reads a checkpoint of any supported format into a tfbert model."""
  if fmt == "tfbert":
    if not os.path.exists(path):
      raise FileNotFoundError(f"tfbert model file not found: {path}")
    return keras.saving.load_model(path)
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


def write_model(model: keras.Model, fmt: str, path: str) -> None:
  """Writes a tfbert model in any supported format."""
  if fmt == "google":
    google_checkpoint.export_google_checkpoint(model, path)
  elif fmt == "hf":
    huggingface.save_hf_checkpoint(model.config, google_checkpoint.google_weights(model), path)
  elif fmt == "tfbert":
    if not path.endswith(".keras"):
      raise ValueError(f"a tfbert model file must end in .keras, got {path!r}")
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    model.save(path)
  else:
    raise ValueError(f"unknown checkpoint format {fmt!r}; use one of {FORMATS}")


def convert_checkpoint(input_format: str, input_path: str, output_format: str,
                       output_path: str, config_file: Optional[str] = None) -> keras.Model:
  """Reads `input_path` in `input_format`, writes it to `output_path` in `output_format`."""
  model = read_model(input_format, input_path, config_file)
  write_model(model, output_format, output_path)
  return model
