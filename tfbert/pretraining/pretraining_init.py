"""Where a pretraining run starts: the model a user has, in any form tfbert reads.

Continued pretraining (domain adaptation) starts from the checkpoint a user already uses:

* `init_checkpoint`: a google-research/bert checkpoint prefix (`bert_config.json` beside it);
* `init_hf_dir`: a Hugging Face directory (`BertForMaskedLM`, `BertForPreTraining`,
  `BertModel`, or any task head: that head is skipped) or a sentence-transformers directory
  (its transformer is read: the MiniLM shipped with tfbert, for one);
* `init_tfbert`: a tfbert `.keras` model (e.g. `<run>/model.keras`).

The encoder must come whole. A head the source lacks starts fresh and the log says so: a
`BertForMaskedLM` has no next-sentence head and no pooler, a `BertModel` no MLM head. With
the objective "mlm" the model has no next-sentence head to start (a source's is skipped).
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
from tfbert.runtime import files, json_values
from tfbert.text import casing, tokenization

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


# The format each source flag takes, and how a user names a source of each format.
_FORMATS = {"init_checkpoint": "google", "init_hf_dir": "hf", "init_tfbert": "tfbert"}
_SPELLINGS = {fmt: f"--{flag}={{path}}" for flag, fmt in _FORMATS.items()}


def check_source(config, needs_config: bool = False) -> Optional[str]:
  """The run's source (`given`) exists and is the kind its flag takes, checked before any
  part of it is read (`tfbert.checkpoints.convert.check_source`): a vocab.txt given as
  `--init_hf_dir` said "config file not found: .../vocab.txt/config.json".

  Args:
    config: the run's settings (`init_*`; `bert_config_file` when the tool's).
    needs_config: the source's config is read (`source_config`): a Google checkpoint
      then needs its `bert_config.json` beside it.

  Returns:
    The flag naming the source, or None.

  Raises:
    FileNotFoundError, ValueError: naming the flag's path and what is wrong with it.
  """
  flag = given(config)
  if flag is not None:
    convert.check_source(_FORMATS[flag], getattr(config, flag), f"--{flag}", _SPELLINGS,
                         needs_config=needs_config)
  return flag


def read_source(config) -> Optional[Source]:
  """The weights and config of the run's source (`given`), or None for random weights.

  Raises:
    FileNotFoundError, ValueError: naming the flag's path and what is wrong with it.
  """
  flag = check_source(config)
  if flag is None:
    return None
  path = getattr(config, flag)
  if flag == "init_checkpoint":
    return Source(path, google_checkpoint.read_google_checkpoint(path))
  if flag == "init_hf_dir":
    directory = _hf_directory(path)
    _, weights, ignored = huggingface.load_hf_checkpoint(directory)
    return Source(directory, weights, tuple(ignored))
  return Source(path, google_checkpoint.google_weights(convert.read_tfbert_model(path)))


def source_config(config) -> Optional[BertConfig]:
  """The `BertConfig` of the run's source without reading its weights, or None.

  Raises:
    FileNotFoundError, ValueError: naming the flag's path and what is wrong with it.
  """
  flag = check_source(config, needs_config=True)
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


def source_vocabulary(config) -> Optional[str]:
  """The `vocab.txt` that comes with the run's source (beside it; a sentence-transformers
  directory's transformer's or its own), or None."""
  flag = given(config)
  if flag is None:
    return None
  path = getattr(config, flag)
  places = ([_hf_directory(path), path] if flag == "init_hf_dir"
            else casing.checkpoint_directories(path))
  for directory in places:
    vocab = os.path.join(directory, casing.VOCAB)
    if files.isfile(vocab):
      return vocab
  return None


def _data_vocab_size(data: dict) -> Optional[int]:
  """The vocabulary size the data's `create_pretraining_data` summaries record, or None."""
  sizes = {json_values.read(path).get("vocab_size")
           for path in data.get("summaries") or []} - {None}
  return sizes.pop() if len(sizes) == 1 else None


def check_vocabulary(config, data: dict) -> None:
  """Continued pretraining: the data was made with the source's vocabulary and casing.

  Token ids index the source's embedding rows, so data made with another vocabulary (a
  cased one for an uncased model, say) trains each row on another word piece and no error
  ever says so. The data's vocabulary and casing are its `create_pretraining_data`
  summaries' (`data`: `pretraining_run.data_record`); the source's are the `vocab.txt` and
  the casing records beside it (`tfbert.text.casing.checkpoint_casing`). Without a
  summary (data made by google-research/bert's script) there is nothing to compare.

  Raises:
    ValueError: before any work, naming the source flag, both vocabularies (or casings)
      and the create_pretraining_data flags that remake the data.
  """
  flag = given(config)
  if flag is None or not data.get("summaries"):
    return
  source = f"--{flag} {getattr(config, flag)}"
  made = f"the data ({', '.join(os.path.basename(p) for p in data['summaries'])})"
  theirs, ours = source_vocabulary(config), data.get("vocab_file")
  if theirs and ours and files.isfile(ours):
    a, b = tokenization.load_vocab(theirs), tokenization.load_vocab(ours)
    if a != b:
      first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
      raise ValueError(
          f"{source}: {made} was made with another vocabulary: {ours} ({len(b)} word pieces) "
          f"but the source's is {theirs} ({len(a)}; they differ from id {first} on): token "
          "ids would train other word pieces' embeddings. Remake the data with "
          f"create_pretraining_data --vocab_file={theirs}")
  size = _data_vocab_size(data)
  # The run's config has the source's shapes (`check_config`); a Google checkpoint given
  # with --bert_config_file may have no bert_config.json to read.
  model_size = size and (getattr(config, "bert_config", None) or source_config(config)).vocab_size
  if not theirs and size is not None and size != model_size:
    raise ValueError(
        f"{source}: {made} was made with a vocabulary of {size} word pieces ({ours}) but the "
        f"source's embedding has {model_size} rows: another vocabulary. Remake the data with "
        "the source's vocabulary, or put that vocab.txt beside the source if it is the same")
  lower = data.get("do_lower_case")
  for evidence in casing.checkpoint_casing(getattr(config, flag) if flag != "init_hf_dir"
                                           else _hf_directory(config.init_hf_dir)):
    if lower is not None and evidence.do_lower_case != lower:
      raise ValueError(
          f"{source}: {made} was made with do_lower_case={str(lower).lower()} but "
          f"{evidence.source} says do_lower_case={str(evidence.do_lower_case).lower()}: the "
          "model never saw such word pieces. Remake the data with create_pretraining_data "
          f"--do_lower_case={str(evidence.do_lower_case).lower()}")


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
  weights = convert.with_fresh_pooler(
      model, source.weights, source.name, "e.g. a BertForMaskedLM directory"
      if convert.uses_pooler(model) else "the objective mlm reads none")
  report = google_checkpoint.assign_google_weights(model, weights, source.name,
                                                   allow_unused=True, allow_missing=heads,
                                                   ignored=source.ignored)
  logging.info(report.summary())
  return report
