"""Where a pretraining run starts: the model a user has, in any form tfbert reads.

Continued pretraining (domain adaptation) starts from the checkpoint a user already uses:

* `init_checkpoint`: a google-research/bert checkpoint prefix (`bert_config.json` beside it);
* `init_hf_dir`: a Hugging Face directory (`BertForMaskedLM`, `BertForPreTraining`,
  `BertModel`, or any task head: that head is skipped) or a sentence-transformers directory
  (its transformer is read: the MiniLM shipped with tfbert, for one);
* `init_tfbert`: a tfbert `.keras` model (e.g. `<run>/model.keras`).

The encoder must come whole. A head the source lacks starts fresh and the log says so: a
`BertForMaskedLM` has no next-sentence head and no pooler, a `BertModel` no MLM head.
Without `bert_config_file` the model's config is the source's (`source_config`).
"""

import dataclasses
import os
from typing import Optional

import keras
import numpy as np
from absl import logging

from tfbert.checkpoints import convert, google_checkpoint, huggingface
from tfbert.config import SHAPE_FIELDS, BertConfig
from tfbert.embeddings import sentence_transformers
from tfbert.runtime import files

SOURCE_FLAGS = ("init_checkpoint", "init_hf_dir", "init_tfbert")


@dataclasses.dataclass(frozen=True)
class Source:
  """What a run starts from.

  Attributes:
    name: where the weights come from (for messages).
    weights: its weights by Google name.
    ignored: source names skipped on purpose (Hugging Face's tied decoder copies).
  """
  name: str
  weights: dict[str, np.ndarray]
  ignored: tuple[str, ...] = ()


def given(config) -> Optional[str]:
  """The flag naming the run's source (`SOURCE_FLAGS`), or None.

  Raises:
    ValueError: more than one is given.
  """
  named = [flag for flag in SOURCE_FLAGS if getattr(config, flag, None)]
  if len(named) > 1:
    raise ValueError(f"give one of --{', --'.join(SOURCE_FLAGS)}; got --{' and --'.join(named)}")
  return named[0] if named else None


def _hf_directory(path: str) -> str:
  """The Hugging Face directory of `path`: itself, or a sentence-transformers directory's
  transformer."""
  if files.isfile(os.path.join(path, sentence_transformers.MODULES_FILE)):
    return sentence_transformers.read_config(path).transformer_dir
  return path


def read_source(config) -> Optional[Source]:
  """The weights and config of the run's source (`given`), or None for random weights.

  Raises:
    FileNotFoundError, ValueError: naming the flag's path and what is wrong with it.
  """
  flag = given(config)
  if flag is None:
    return None
  path = getattr(config, flag)
  if flag == "init_checkpoint":
    google_checkpoint.check_prefix(path, "--init_checkpoint")
    return Source(path, google_checkpoint.read_google_checkpoint(path))
  if flag == "init_hf_dir":
    if not files.isdir(path):
      raise FileNotFoundError(f"--init_hf_dir {path}: no such directory (a Hugging Face or "
                              "sentence-transformers model directory)")
    directory = _hf_directory(path)
    _, weights, ignored = huggingface.load_hf_checkpoint(directory)
    return Source(directory, weights, tuple(ignored))
  if not files.exists(path):
    raise FileNotFoundError(f"--init_tfbert {path}: no such file (a tfbert .keras model, e.g. "
                            "<run>/model.keras)")
  return Source(path, google_checkpoint.google_weights(convert.read_tfbert_model(path)))


def source_config(config) -> Optional[BertConfig]:
  """The `BertConfig` of the run's source without reading its weights, or None."""
  flag = given(config)
  if flag == "init_hf_dir":
    return BertConfig.from_hf_json_file(os.path.join(_hf_directory(config.init_hf_dir),
                                                     "config.json"))
  if flag == "init_checkpoint":
    return BertConfig.from_json_file(os.path.join(os.path.dirname(config.init_checkpoint),
                                                  "bert_config.json"))
  if flag == "init_tfbert":
    return convert.read_tfbert_model(config.init_tfbert).config
  return None


def check_config(config) -> None:
  """The run's `bert_config` has the shapes of its source's (`source_config`): a
  `--bert_config_file` that disagrees is named in one line, before any work (the load would
  list every weight's shape).

  Raises:
    ValueError: naming the source flag and each differing field.
  """
  flag = given(config)
  if flag is None or flag == "init_checkpoint" and not files.isfile(os.path.join(
      os.path.dirname(config.init_checkpoint), "bert_config.json")):
    return
  theirs = source_config(config).to_dict()
  ours = config.bert_config.to_dict()
  differ = [f"{name} {ours.get(name)} vs {theirs.get(name)}" for name in sorted(SHAPE_FIELDS)
            if ours.get(name) != theirs.get(name)]
  if differ:
    raise ValueError(f"the model's config (--bert_config_file) does not fit --{flag} "
                     f"{getattr(config, flag)}: {'; '.join(differ)}; drop --bert_config_file "
                     "to take the source's")


def load_source(model: keras.Model, source: Source) -> google_checkpoint.LoadReport:
  """Loads `source` into the `BertPretrainer` `model`: the encoder strictly, each head the
  source has; a head (and the pooler) it lacks keeps its fresh values, said in the log;
  a task head of the source (a classifier's, a span labeler's) is skipped.

  Raises:
    ValueError: naming the source and every encoder weight that is missing or misfit.
  """
  heads = convert.missing_heads(model, source.weights)
  for head in heads:
    logging.warning(f"{source.name} has no {head}: it starts fresh")
  weights = convert.with_fresh_pooler(model, source.weights, source.name,
                                      "e.g. a BertForMaskedLM directory")
  report = google_checkpoint.assign_google_weights(model, weights, source.name,
                                                   allow_unused=True, allow_missing=heads,
                                                   ignored=source.ignored)
  logging.info(report.summary())
  return report
