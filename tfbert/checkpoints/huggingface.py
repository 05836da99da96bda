"""The Hugging Face boundary: BERT safetensors <-> Google-name dicts, without PyTorch.

One table maps Hugging Face parameter names onto google-research/bert names. PyTorch
`nn.Linear` stores `weight` as [out, in], so dense kernels are transposed; the
`[C, H]` projections (NSP, SQuAD, classifier) already have Google's layout.

Hugging Face BERT differs from google-research/bert in two ways that matter here:
  * its `"gelu"` is the exact erf form (handled by `BertConfig.from_hf_config`);
  * its word embedding has `padding_idx=0`, so the [PAD] row gets no gradient. This only
    affects training; tfbert trains the [PAD] row like Google (see docs/pitfalls.md).
"""

import dataclasses
import json
import os
import re
from typing import Any, Mapping, Optional, Sequence

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load, load_file, save, save_file

from tfbert.config import BertConfig
from tfbert.runtime import atomic, files, json_values

# (Hugging Face name, Google name, transpose). `{i}` is a layer index. Encoder names take an
# optional `bert.` prefix (BertForPreTraining / BertForQuestionAnswering) or none (BertModel).
TABLE = (
    ("embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings", False),
    ("embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings", False),
    ("embeddings.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings", False),
    ("embeddings.LayerNorm.weight", "bert/embeddings/LayerNorm/gamma", False),
    ("embeddings.LayerNorm.bias", "bert/embeddings/LayerNorm/beta", False),
    ("encoder.layer.{i}.attention.self.query.weight",
     "bert/encoder/layer_{i}/attention/self/query/kernel", True),
    ("encoder.layer.{i}.attention.self.query.bias",
     "bert/encoder/layer_{i}/attention/self/query/bias", False),
    ("encoder.layer.{i}.attention.self.key.weight",
     "bert/encoder/layer_{i}/attention/self/key/kernel", True),
    ("encoder.layer.{i}.attention.self.key.bias",
     "bert/encoder/layer_{i}/attention/self/key/bias", False),
    ("encoder.layer.{i}.attention.self.value.weight",
     "bert/encoder/layer_{i}/attention/self/value/kernel", True),
    ("encoder.layer.{i}.attention.self.value.bias",
     "bert/encoder/layer_{i}/attention/self/value/bias", False),
    ("encoder.layer.{i}.attention.output.dense.weight",
     "bert/encoder/layer_{i}/attention/output/dense/kernel", True),
    ("encoder.layer.{i}.attention.output.dense.bias",
     "bert/encoder/layer_{i}/attention/output/dense/bias", False),
    ("encoder.layer.{i}.attention.output.LayerNorm.weight",
     "bert/encoder/layer_{i}/attention/output/LayerNorm/gamma", False),
    ("encoder.layer.{i}.attention.output.LayerNorm.bias",
     "bert/encoder/layer_{i}/attention/output/LayerNorm/beta", False),
    ("encoder.layer.{i}.intermediate.dense.weight",
     "bert/encoder/layer_{i}/intermediate/dense/kernel", True),
    ("encoder.layer.{i}.intermediate.dense.bias",
     "bert/encoder/layer_{i}/intermediate/dense/bias", False),
    ("encoder.layer.{i}.output.dense.weight", "bert/encoder/layer_{i}/output/dense/kernel", True),
    ("encoder.layer.{i}.output.dense.bias", "bert/encoder/layer_{i}/output/dense/bias", False),
    ("encoder.layer.{i}.output.LayerNorm.weight",
     "bert/encoder/layer_{i}/output/LayerNorm/gamma", False),
    ("encoder.layer.{i}.output.LayerNorm.bias",
     "bert/encoder/layer_{i}/output/LayerNorm/beta", False),
    ("pooler.dense.weight", "bert/pooler/dense/kernel", True),
    ("pooler.dense.bias", "bert/pooler/dense/bias", False),
    ("cls.predictions.transform.dense.weight", "cls/predictions/transform/dense/kernel", True),
    ("cls.predictions.transform.dense.bias", "cls/predictions/transform/dense/bias", False),
    ("cls.predictions.transform.LayerNorm.weight", "cls/predictions/transform/LayerNorm/gamma",
     False),
    ("cls.predictions.transform.LayerNorm.bias", "cls/predictions/transform/LayerNorm/beta",
     False),
    ("cls.predictions.bias", "cls/predictions/output_bias", False),
    ("cls.seq_relationship.weight", "cls/seq_relationship/output_weights", False),
    ("cls.seq_relationship.bias", "cls/seq_relationship/output_bias", False),
    ("qa_outputs.weight", "cls/squad/output_weights", False),
    ("qa_outputs.bias", "cls/squad/output_bias", False),
    ("classifier.weight", "output_weights", False),
    ("classifier.bias", "output_bias", False),
)

# Buffers and tied copies that carry no weight of their own.
_BUFFERS = re.compile(r"(^|\.)(position_ids|token_type_ids)$")
_TIED = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")
# Older Hugging Face checkpoints name LayerNorm parameters gamma/beta.
_LEGACY = ((".LayerNorm.gamma", ".LayerNorm.weight"), (".LayerNorm.beta", ".LayerNorm.bias"))


def _compile(template: str) -> re.Pattern:
  return re.compile("^" + re.escape(template).replace(re.escape("{i}"), r"(?P<i>\d+)") + "$")


_HF_PATTERNS = [(_compile(hf), google, t) for hf, google, t in TABLE]
_GOOGLE_PATTERNS = [(_compile(google), hf, t) for hf, google, t in TABLE]


def _canonical_hf_name(name: str) -> str:
  for old, new in _LEGACY:
    if name.endswith(old):
      name = name[: -len(old)] + new
  return name[len("bert."):] if name.startswith("bert.") else name


def hf_to_google(tensors: Mapping[str, np.ndarray], source: str = "safetensors"
                 ) -> tuple[dict[str, np.ndarray], list[str]]:
  """Converts Hugging Face BERT tensors to a Google-name dict.

  Returns:
    (weights, ignored): the Google-name dict and the skipped buffer / tied names.

  Raises:
    ValueError: listing every Hugging Face name the table does not know, or a decoder
      weight that is not tied to the word embeddings.
  """
  weights, ignored, unknown = {}, [], []
  for name, value in tensors.items():
    if _BUFFERS.search(name) or name in _TIED:
      ignored.append(name)
      continue
    canonical = _canonical_hf_name(name)
    for pattern, google, transpose in _HF_PATTERNS:
      match = pattern.match(canonical)
      if match:
        key = google.format(**match.groupdict())
        weights[key] = np.ascontiguousarray(value.T if transpose else value)
        break
    else:
      unknown.append(name)
  if unknown:
    raise ValueError(f"{source}: Hugging Face tensors not in tfbert's table: {sorted(unknown)}")
  decoder = tensors.get("cls.predictions.decoder.weight")
  if decoder is not None and not np.array_equal(decoder,
                                                weights["bert/embeddings/word_embeddings"]):
    raise ValueError(f"{source}: cls.predictions.decoder.weight is not tied to the word "
                     "embeddings; tfbert's MLM decoder is always tied (as google-research/bert)")
  return weights, sorted(ignored)


def google_to_hf(weights: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
  """Converts a Google-name dict to Hugging Face names.

  Encoder names get the `bert.` prefix when any head is present (BertForPreTraining
  layout), none otherwise (BertModel layout).
  """
  with_heads = any(not n.startswith("bert/") for n in weights)
  out = {}
  for name, value in weights.items():
    for pattern, hf, transpose in _GOOGLE_PATTERNS:
      match = pattern.match(name)
      if match:
        key = hf.format(**match.groupdict())
        if with_heads and name.startswith("bert/"):
          key = "bert." + key
        out[key] = np.ascontiguousarray(value.T if transpose else value)
        break
    else:
      raise ValueError(f"Google name {name!r} has no Hugging Face counterpart")
  return out


def read_safetensors(path: str) -> dict[str, np.ndarray]:
  """Reads a `.safetensors` file into numpy arrays (no PyTorch).

  safetensors reads local files only: a URL's file (`gs://...`) is read into memory first.

  Raises:
    FileNotFoundError: naming `path`.
    ValueError: naming `path`, for a truncated or corrupt file (safetensors' own message
      names no file).
  """
  files.check_found(path, "safetensors file")
  try:
    return load(files.read_bytes(path)) if files.is_url(path) else load_file(path)
  except SafetensorError as e:
    raise ValueError(f"{path}: not a valid safetensors file, truncated or corrupt "
                     f"({' '.join(str(e).split())})") from e
  except (ValueError, TypeError, OSError) as e:  # E.g. a dtype numpy lacks (bfloat16).
    raise ValueError(f"{path}: cannot read it ({type(e).__name__}: "
                     f"{' '.join(str(e).split())})") from e


def load_hf_checkpoint(model_dir: str) -> tuple[BertConfig, dict[str, np.ndarray], list[str]]:
  """Reads `config.json` + `model.safetensors` of a Hugging Face BERT directory.

  Returns:
    (config, Google-name weights, ignored Hugging Face names).

  Raises:
    FileNotFoundError: naming the missing directory or file (with what to do when the
      directory holds PyTorch or TensorFlow weights only).
    ValueError: naming the file that is invalid.
  """
  if not files.isdir(model_dir):
    files.check_found(model_dir, "Hugging Face model directory")
    raise FileNotFoundError(f"Hugging Face model directory {model_dir} is a file, not a "
                            "directory")
  config = BertConfig.from_hf_json_file(os.path.join(model_dir, "config.json"))
  path = os.path.join(model_dir, "model.safetensors")
  check_has_safetensors(model_dir)
  weights, ignored = hf_to_google(read_safetensors(path), source=path)
  _check_label_count(model_dir, weights)
  return config, weights, ignored


def _check_label_count(model_dir: str, weights: Mapping[str, np.ndarray]) -> None:
  """Refuses a `config.json` whose `id2label` (or `num_labels`) counts other classes than
  the head in the weights has (`output_weights` [C, H]): its names would be dropped for
  `LABEL_i`, or name other classes (transformers refuses such a head). A single output (a
  regression, which has no names) is let be.

  Raises:
    ValueError: naming `config.json` and both counts.
  """
  head = weights.get("output_weights")
  if head is None:
    return
  classes = int(head.shape[0])
  path = os.path.join(model_dir, "config.json")
  values = json_values.read(path)
  labels = read_hf_task(model_dir).labels or ()
  num_labels = values.get("num_labels")
  counts = {"id2label": len(labels) or None,
            "num_labels": num_labels if isinstance(num_labels, int) else None}
  for field, count in counts.items():
    if count is not None and count != classes and classes > 1:
      raise ValueError(f"{path}: {field} has {count} labels, but the head in "
                       f"model.safetensors has {classes} classes (classifier weight shape "
                       f"[{classes}, {head.shape[1]}]): make {field} name one label per class")



# Weight files transformers writes besides safetensors, which tfbert does not read.
OTHER_WEIGHT_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5")
# Files of another model or format that a reader of a Hugging Face directory would read
# instead of, or beside, what `save_hf_checkpoint` writes: transformers prefers a fast
# `tokenizer.json` over `vocab.txt` and an index of sharded weights over
# `model.safetensors`; sentence-transformers reads `modules.json` and its pooling; a
# SavedModel or a Google checkpoint makes the directory read as those.
FOREIGN_FILES = (*OTHER_WEIGHT_FILES, "tokenizer.json", "model.safetensors.index.json",
                 "flax_model.msgpack", "modules.json", "sentence_bert_config.json",
                 "saved_model.pb")


def check_writable_directory(model_dir: str, allow: Sequence[str] = ()) -> None:
  """Refuses to write a Hugging Face directory where it would mix with another model.

  A directory holding `FOREIGN_FILES` (bar `allow`) or a Google checkpoint (`*.index`)
  would read, after the write, as a mix of two models (the sentence-transformers pooling of
  one over the weights of the other; another tokenizer over this vocabulary). Other files
  (a model card, the user's own) stay, and a Hugging Face directory of this layout is
  rewritten in place.

  Raises:
    ValueError: naming the directory and the files.
  """
  if files.exists(model_dir) and not files.isdir(model_dir):
    target = files.dangling_link(model_dir)
    what = ("a file" if target is None
            else f"a symbolic link to {target}, which does not exist")
    raise ValueError(f"{model_dir} is {what}, not a directory to write a model into")
  if not files.isdir(model_dir):
    return
  found = sorted(name for name in files.listdir(model_dir)
                 if (name in FOREIGN_FILES and name not in allow) or name.endswith(".index"))
  if found:
    raise ValueError(f"{model_dir} holds {', '.join(found)} of another model or format: a "
                     "Hugging Face directory written here would be read with them, as a mix "
                     "of two models; write into a new or empty directory")


def check_has_safetensors(model_dir: str) -> None:
  """Raises a one-line FileNotFoundError when `model_dir` lacks `model.safetensors` but holds
  another format transformers writes (`pytorch_model.bin`, a sharded index, `tf_model.h5`),
  with the command that converts it where transformers runs. Without any weight file it
  passes: `read_safetensors` names the missing file."""
  if files.exists(os.path.join(model_dir, "model.safetensors")):
    return
  others = [n for n in OTHER_WEIGHT_FILES if files.exists(os.path.join(model_dir, n))]
  if others:
    raise FileNotFoundError(
        f"{model_dir} has {', '.join(others)} but no model.safetensors, the only weight format "
        "tfbert reads (no PyTorch): convert it once where transformers is installed, e.g. "
        f"AutoModel.from_pretrained({model_dir!r}).save_pretrained(<dir>) (safetensors is "
        "its default; use the AutoModelFor... class of the task to keep the head)")


# `config.json`'s key for what tfbert records that no Hugging Face field does: {"is_pair":
# true/false}, whether a classifier reads (text_a, text_b) pairs; {"span_settings": {...}}, a
# span labeler's windows, answer length and v2.0 threshold (`SPAN_SETTINGS`). transformers keeps an
# unknown key as a config attribute (and writes it back); tfbert's config reader skips it.
TFBERT_KEY = "tfbert"


@dataclasses.dataclass(frozen=True)
class HfTask:
  """What a Hugging Face `config.json` says about the task beyond the BERT settings.

  Attributes:
    architecture: the transformers class named first in `architectures`, or None.
    labels: `id2label`'s names in id order, or None when it has none.
    problem_type: e.g. "regression", or None.
    is_pair: a classifier's arity as `tfbert.save` records it (`TFBERT_KEY`), or None:
      unknown (a directory from elsewhere says nothing of it).
  """
  architecture: Optional[str] = None
  labels: Optional[tuple[str, ...]] = None
  problem_type: Optional[str] = None
  is_pair: Optional[bool] = None
  span_settings: Optional[dict] = None


# A span labeler's text settings beyond S (`tfbert.inference.text_settings.TextSettings`),
# which `tfbert.save` records wherever it writes one and `tfbert.load` restores.
SPAN_SETTINGS = ("max_query_length", "doc_stride", "max_answer_length",
                 "version_2_with_negative", "null_score_diff_threshold")


def tfbert_fields(is_pair: Optional[bool], span_settings: Optional[Mapping[str, Any]] = None
                  ) -> dict:
  """The `config.json` fields recording a classifier's arity and a span labeler's
  `SPAN_SETTINGS` (`TFBERT_KEY`); none when unknown (None)."""
  record = ({} if is_pair is None else {"is_pair": is_pair}) | (
      {} if span_settings is None else {"span_settings": dict(span_settings)})
  return {TFBERT_KEY: record} if record else {}


def check_span_settings(value: Any, where: str) -> dict:
  """`value` as a record of `SPAN_SETTINGS` (every one of them, nothing else).

  Raises:
    ValueError: naming `where`, when it is not that.
  """
  if not isinstance(value, dict) or set(value) != set(SPAN_SETTINGS):
    raise ValueError(f"{where}: span_settings must be an object of exactly "
                     f"{', '.join(SPAN_SETTINGS)}, got {value!r:.200}: write it again with "
                     "tfbert.save")
  return value


def read_hf_task(model_dir: str) -> HfTask:
  """The task fields of `model_dir/config.json` (`HfTask`).

  Raises:
    ValueError: naming the file, when `id2label` does not map the ids 0..C-1 to names, or
      its arity record is not true or false.
  """
  path = os.path.join(model_dir, "config.json")
  values = json_values.read(path)
  architectures = values.get("architectures") or [None]
  id2label = values.get("id2label") or {}
  if not isinstance(id2label, dict) or sorted(map(str, id2label)) != sorted(
      str(i) for i in range(len(id2label))):
    raise ValueError(f"{path}: id2label must map the ids 0..C-1 to names, got {id2label!r}")
  labels = tuple(str(id2label[str(i)]) for i in range(len(id2label))) or None
  if values.get("problem_type") == "multi_label_classification":  # Sweep 27, B120.
    raise ValueError(
        f"{path}: problem_type multi_label_classification (an independent sigmoid per label, "
        "any number of labels per text) is not what a tfbert classifier computes (a softmax "
        "over its labels, one label per text): it would read and train as one without a "
        "word. Use it with transformers, or convert its encoder alone (remove problem_type "
        "and the classifier weights) to fine-tune a tfbert classifier from it")
  record = values.get(TFBERT_KEY)
  spans = record.get("span_settings") if isinstance(record, dict) else None
  return HfTask(architectures[0], labels, values.get("problem_type"),
                _recorded_is_pair(values, path),
                None if spans is None else check_span_settings(
                    spans, f"{path}: {TFBERT_KEY}"))


def _recorded_is_pair(values: Mapping[str, Any], path: str) -> Optional[bool]:
  """`config.json`'s `TFBERT_KEY` arity (None: none recorded).

  Raises:
    ValueError: naming the file, when the record is not an object or its is_pair not true
      or false.
  """
  record = values.get(TFBERT_KEY)
  is_pair = record.get("is_pair") if isinstance(record, dict) else None
  if (record is not None and not isinstance(record, dict)) or (
      is_pair is not None and not isinstance(is_pair, bool)):
    raise ValueError(f"{path}: {TFBERT_KEY} must be {{\"is_pair\": true or false}} (whether "
                     f"the classifier reads sentence pairs), got {record!r}")
  return is_pair


SPECIAL_TOKENS_MAP = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                      "cls_token": "[CLS]", "mask_token": "[MASK]"}
TOKENIZER_FILES = ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


def tokenizer_config(do_lower_case: bool, model_max_length: int) -> dict:
  """`tokenizer_config.json` of a BERT WordPiece tokenizer, as Hugging Face's `BertTokenizer`
  reads it: the casing (its default would be lower-casing, whatever the vocabulary), the
  longest input, the special tokens and google-research/bert's basic tokenization (CJK
  characters split; accents stripped exactly when lower-casing, `strip_accents: null`)."""
  return {"tokenizer_class": "BertTokenizer", "do_lower_case": do_lower_case,
          "model_max_length": model_max_length, "do_basic_tokenize": True,
          "tokenize_chinese_chars": True, "strip_accents": None, **SPECIAL_TOKENS_MAP}


def write_tokenizer_files(directory: str, vocab_file: str, do_lower_case: bool,
                          model_max_length: int) -> None:
  """Writes `TOKENIZER_FILES` into `directory` (a staging one: no atomicity here)."""
  files.copy(vocab_file, os.path.join(directory, "vocab.txt"))
  for name, value in (("tokenizer_config.json", tokenizer_config(do_lower_case,
                                                                 model_max_length)),
                      ("special_tokens_map.json", SPECIAL_TOKENS_MAP)):
    with files.open_file(os.path.join(directory, name), "w") as f:
      f.write(json.dumps(value, indent=2, sort_keys=True) + "\n")


def save_hf_checkpoint(config: BertConfig, weights: Mapping[str, np.ndarray],
                       model_dir: str, vocab_file: Optional[str] = None,
                       do_lower_case: Optional[bool] = None,
                       task: Optional[Mapping[str, Any]] = None,
                       allow: Sequence[str] = (),
                       model_max_length: Optional[int] = None) -> None:
  """Writes `config.json` + `model.safetensors` (+ the tokenizer) in Hugging Face's layout.

  With `vocab_file`, the directory is complete: Hugging Face's `AutoTokenizer` loads it
  alone (`vocab.txt`, `tokenizer_config.json` with `do_lower_case` and `model_max_length` =
  `max_position_embeddings`, `special_tokens_map.json`; `write_tokenizer_files`).

  The files appear together, `config.json` last (`tfbert.runtime.atomic.file_set`): all are written
  into a staging directory inside `model_dir` first, so a full disk leaves `model_dir` as
  it was. Hugging Face (and `load_hf_checkpoint`) finds a model through `config.json`, so
  until it appears the directory holds no model rather than a truncated one or an old
  config over new weights. Not a whole-directory rename: `model_dir` may hold files that
  are not ours (a tokenizer's, a model card) that must survive.

  Args:
    config: the model's config.
    weights: Google-name weights.
    model_dir: the output directory (created if missing).
    vocab_file: copied as `vocab.txt` when given, with the tokenizer's two JSON files.
    do_lower_case: the vocabulary's casing; needed with `vocab_file`.
    task: `config.json`'s task fields (the model's `hf_task`: `architectures`, labels; a
      classifier's arity, `tfbert_fields`); None: `BertForPreTraining`'s.
    allow: `FOREIGN_FILES` the directory may hold (a sentence-transformers directory's
      own, when that writer puts its transformer at the root).
    model_max_length: `tokenizer_config.json`'s (the sequence length the model reads);
      default `max_position_embeddings`.

  Raises:
    OSError: naming the file, when it cannot be written (a full disk).
    ValueError: `vocab_file` without `do_lower_case`; a directory holding another model's
      files (`check_writable_directory`).
  """
  if vocab_file and do_lower_case is None:
    raise ValueError("save_hf_checkpoint: a vocab_file needs its do_lower_case (the "
                     "tokenizer_config.json Hugging Face reads)")
  check_writable_directory(model_dir, allow)
  files.makedirs(model_dir)
  tensors = google_to_hf(weights)
  with atomic.file_set(model_dir, "config.json", "hf") as staging:
    weights_file = os.path.join(staging, "model.safetensors")
    try:
      if files.is_url(weights_file):  # safetensors writes local files only.
        with files.open_file(weights_file, "wb") as f:
          f.write(save(tensors, metadata={"format": "pt"}))
      else:
        save_file(tensors, weights_file, metadata={"format": "pt"})
    except SafetensorError as e:  # Names no file.
      raise OSError(f"cannot write {os.path.join(model_dir, 'model.safetensors')}: {e}") from e
    if vocab_file:
      write_tokenizer_files(staging, vocab_file, do_lower_case,
                            model_max_length or config.max_position_embeddings)
    with files.open_file(os.path.join(staging, "config.json"), "w") as f:
      f.write(json.dumps({**config.to_hf_config(), **(task or {})}, indent=2, sort_keys=True)
              + "\n")
