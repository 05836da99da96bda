"""BERT model configuration: `BertConfig`, mirroring `bert_config.json` field for field.

Field names are exactly google-research/bert's `bert_config.json` names, including the
optional fields that the Chinese and multilingual releases add (`directionality`,
`pooler_*`). Those are kept on a round trip but do not change the model (Google's
`modeling.py` ignores them too).

Activation semantics (`hidden_act`) follow google-research/bert:

  * `"gelu"`: the tanh approximation, as in google-research/bert `modeling.gelu`.
  * `"gelu_exact"`: the exact erf form. This is what Hugging Face calls `"gelu"`; the
    Hugging Face boundary (`from_hf_config`) renames it, so a Hugging Face config reproduces
    Hugging Face's model and a Google config reproduces Google's.
  * `"relu"`, `"tanh"`, `"linear"`.

Python code constructs configs with BERT-Base defaults (`BertConfig(vocab_size=...)`), but a
`bert_config.json` (`from_json_file` / `from_dict`) must hold every field Google writes
(`REQUIRED_FIELDS`): a file missing `num_hidden_layers` must not silently become BERT-Base.

The one boundary to Hugging Face's `config.json` is `from_hf_config` / `to_hf_config`.
"""

import dataclasses
import difflib
import math
from typing import Any, ClassVar, Iterator, Optional

from tfbert.runtime import atomic, files, json_values, paths, validation

# hidden_act values understood by tfbert (see module docstring).
ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear")

# Hugging Face `hidden_act` -> tfbert `hidden_act`. HF "gelu" is exact erf; "gelu_new",
# "gelu_pytorch_tanh" and "gelu_fast" are the tanh approximation (Google's "gelu").
_HF_TO_TFBERT_ACT = {
    "gelu": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_fast": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}
_TFBERT_TO_HF_ACT = {"gelu_exact": "gelu", "gelu": "gelu_new", "relu": "relu",
                     "tanh": "tanh", "linear": "linear"}

_INT_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
               "intermediate_size", "max_position_embeddings", "type_vocab_size")

# The fields of google-research/bert's `bert_config.json`, as Google writes them (its
# `modeling.BertConfig`); every one is required in a file.
REQUIRED_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                   "intermediate_size", "hidden_act", "hidden_dropout_prob",
                   "attention_probs_dropout_prob", "max_position_embeddings",
                   "type_vocab_size", "initializer_range")
# Optional: written by Google's Chinese and multilingual releases (e.g. their
# bert_config.json has directionality and pooler_*); kept on a round trip.
RELEASE_FIELDS = ("directionality", "pooler_fc_size", "pooler_num_attention_heads",
                  "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type")

# transformers' `BertConfig` defaults: what Hugging Face itself builds from a `config.json`
# that omits a field (its `save_pretrained` writes them all), so `from_hf_config` uses them.
_HF_DEFAULTS = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                    num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
                    hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                    max_position_embeddings=512, type_vocab_size=2, initializer_range=0.02)


# The fields that give the model's variables their shapes: a checkpoint of one value cannot
# be restored into a model of another (`tfbert.runtime.run_directory.RunRecord`).
SHAPE_FIELDS = frozenset({"vocab_size", "hidden_size", "num_hidden_layers",
                          "num_attention_heads", "intermediate_size",
                          "max_position_embeddings", "type_vocab_size"})


@dataclasses.dataclass(frozen=True)
class BertConfig:
  """Configuration of a BERT encoder, with google-research/bert's field names.

  Attributes:
    vocab_size: Size of the WordPiece vocabulary (V).
    hidden_size: Width of the encoder (H).
    num_hidden_layers: Number of transformer layers (L).
    num_attention_heads: Attention heads per layer (N); must divide `hidden_size`.
    intermediate_size: Width of the feed-forward layer (I).
    hidden_act: Activation of the feed-forward layer and the MLM transform; one of
      `ACTIVATIONS`. `"gelu"` is Google's tanh approximation.
    hidden_dropout_prob: Dropout on embeddings and layer outputs.
    attention_probs_dropout_prob: Dropout on attention probabilities.
    max_position_embeddings: Rows of the position table (maximum sequence length).
    type_vocab_size: Rows of the token-type (segment) table.
    initializer_range: Stddev of the truncated-normal initializer.
    directionality, pooler_fc_size, pooler_num_attention_heads, pooler_num_fc_layers,
    pooler_size_per_head, pooler_type: Present in Google's Chinese and multilingual
      releases; kept for a faithful round trip, unused by the model (as in Google's code).
  """
  OWN_TYPE_CHECKS: ClassVar[bool] = True  # `checks()` (validation.field_types).

  vocab_size: int
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 16
  initializer_range: float = 0.02
  directionality: Optional[str] = None
  pooler_fc_size: Optional[int] = None
  pooler_num_attention_heads: Optional[int] = None
  pooler_num_fc_layers: Optional[int] = None
  pooler_size_per_head: Optional[int] = None
  pooler_type: Optional[str] = None

  def __post_init__(self):
    validation.validate(self)

  def checks(self) -> Iterator[validation.Check]:
    """The rules of a buildable config (`tfbert.runtime.validation`)."""
    typed = True
    for name in _INT_FIELDS:
      value = getattr(self, name)
      typed &= validation.is_int(value) and value > 0
      yield (validation.is_int(value) and value > 0,
             f"{name} must be a positive integer, got {value!r}")
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range"):
      value = getattr(self, name)
      finite = (not isinstance(value, bool) and isinstance(value, (int, float))
                and math.isfinite(value))
      typed &= finite
      yield finite, f"{name} must be a finite number, got {value!r}"
    for name in RELEASE_FIELDS:
      value = getattr(self, name)
      wants_int = name not in ("directionality", "pooler_type")
      yield (value is None or (validation.is_int(value) and value > 0 if wants_int
                               else isinstance(value, str)),
             f"{name} must be {'a positive integer' if wants_int else 'a string'}, "
             f"got {value!r}")
    yield self.hidden_act in ACTIVATIONS, (
        f"hidden_act {self.hidden_act!r} is not one of {ACTIVATIONS}")
    if not typed:
      return  # The rules below compare numbers.
    yield not self.hidden_size % self.num_attention_heads, (
        f"hidden_size ({self.hidden_size}) is not a multiple of num_attention_heads "
        f"({self.num_attention_heads})")
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
      value = getattr(self, name)
      yield 0.0 <= value < 1.0, f"{name} must be in [0, 1), got {value!r}"
    yield self.initializer_range > 0, (
        f"initializer_range must be > 0, got {self.initializer_range!r}")

  @property
  def head_size(self) -> int:
    """Width of one attention head (H / N)."""
    return self.hidden_size // self.num_attention_heads

  @classmethod
  def from_dict(cls, values: dict[str, Any], source: str = "dict") -> "BertConfig":
    """Builds a config from a `bert_config.json`-style dict (as read from a file).

    Every field of `REQUIRED_FIELDS` must be present; the release fields are optional. Any
    other field is an error, with the known name it looks like a typo of: tfbert would not
    apply it, and a setting silently not applied (`num_hidden_layer`, or another family's
    `layer_norm_eps`) builds another model than the file describes, while a warning scrolls
    past unread in a training log. Deleting the field is the way out.

    Args:
      values: the dict.
      source: the file it came from, for messages.

    Raises:
      ValueError: one line naming `source` and every missing and unknown field, or the
        first field with an invalid value.
    """
    if not isinstance(values, dict):
      raise ValueError(f"{source}: expected a bert_config object, got {type(values).__name__}")
    missing = [name for name in REQUIRED_FIELDS if name not in values]
    unknown = sorted(set(values) - set(REQUIRED_FIELDS) - set(RELEASE_FIELDS))
    problems = []
    if missing:
      problems.append(f"missing bert_config field(s) {', '.join(missing)}")
    if unknown:
      problems.append(f"unknown bert_config field(s) {', '.join(map(_with_guess, unknown))}"
                      + (" (a Hugging Face config.json: give its directory as --init_hf_dir, "
                         "or read it with BertConfig.from_hf_json_file)"
                         if "model_type" in values else ""))
    if problems:
      raise ValueError(f"{source}: " + "; ".join(problems))
    try:
      return cls(**values)
    except (TypeError, ValueError) as e:
      raise ValueError(f"{source}: {e}") from e

  def to_dict(self) -> dict[str, Any]:
    """Returns the `bert_config.json` dict; optional release fields only when set."""
    return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

  @classmethod
  def from_json_file(cls, path: str, name: str = "config file") -> "BertConfig":
    """Reads a google-research/bert `bert_config.json`; `name` (e.g. "--bert_config_file")
    names it when it cannot be read (`_read_json`)."""
    return cls.from_dict(_read_json(path, name), source=path)

  def to_json_file(self, path: str) -> None:
    """Writes a google-research/bert `bert_config.json` (sorted keys, as Google's), atomically."""
    atomic.write_json(path, self.to_dict())

  @classmethod
  def from_hf_config(cls, values: dict[str, Any], source: str = "config.json") -> "BertConfig":
    """Builds a config from a Hugging Face BERT `config.json` dict (the one boundary).

    Hugging Face's `"gelu"` is the exact erf form and becomes `"gelu_exact"` here. A field
    the file omits takes transformers' own default (`_HF_DEFAULTS`), as Hugging Face loads
    it; fields that are not BERT settings (`architectures`, `torch_dtype`, ...) are skipped.

    Raises:
      ValueError: for a non-BERT config, a non-absolute position embedding type, a
        LayerNorm epsilon other than BERT's 1e-12, an unknown activation, or a decoder.
    """
    model_type = values.get("model_type", "bert")
    if model_type != "bert":
      raise ValueError(f"{source}: model_type {model_type!r} is not 'bert'")
    if values.get("position_embedding_type", "absolute") != "absolute":
      raise ValueError(f"{source}: only absolute position embeddings are supported")
    eps = values.get("layer_norm_eps", 1e-12)
    if eps != 1e-12:
      raise ValueError(f"{source}: layer_norm_eps {eps} differs from BERT's 1e-12")
    act = values.get("hidden_act", "gelu")
    if not isinstance(act, str) or act not in _HF_TO_TFBERT_ACT:
      raise ValueError(f"{source}: unsupported hidden_act {act!r}")
    if values.get("is_decoder"):  # Sweep 34, B1, B29: read as bidirectional without a word.
      raise ValueError(f"{source}: is_decoder is true: transformers runs this model with a "
                       "causal mask (each token sees only the tokens before it), and tfbert's "
                       "encoder is bidirectional; convert a BERT encoder (is_decoder false)")
    picked = {**_HF_DEFAULTS, **{k: v for k, v in values.items()
                                 if k in REQUIRED_FIELDS + RELEASE_FIELDS}}
    picked["hidden_act"] = _HF_TO_TFBERT_ACT[act]
    return cls.from_dict(picked, source=source)

  @classmethod
  def from_hf_json_file(cls, path: str, name: str = "config file") -> "BertConfig":
    """Reads a Hugging Face BERT `config.json`; `name` as for `from_json_file`."""
    return cls.from_hf_config(_read_json(path, name), source=path)

  def to_hf_config(self) -> dict[str, Any]:
    """Returns a Hugging Face `BertModel` `config.json` dict for this config."""
    values = {k: v for k, v in self.to_dict().items()
              if not k.startswith("pooler_") and k != "directionality"}
    values.update(hidden_act=_TFBERT_TO_HF_ACT[self.hidden_act], model_type="bert",
                  architectures=["BertForPreTraining"], layer_norm_eps=1e-12, pad_token_id=0,
                  position_embedding_type="absolute")
    return values


def _with_guess(name: str) -> str:
  """`name`, with the known field it is probably a typo of."""
  close = difflib.get_close_matches(name, REQUIRED_FIELDS + RELEASE_FIELDS, n=1, cutoff=0.8)
  return f"{name} (did you mean {close[0]}?)" if close else name


# Why a config file must be a regular file (`_read_json`, `paths.special_input_problems`).
CONFIG_READ = "a config is read by opening its file (a pipe with no writer waits forever)"


def _read_json(path: str, name: str = "config file") -> dict[str, Any]:
  """The JSON object in config file `path`, `name` ("--bert_config_file") naming it.

  Raises:
    FileNotFoundError: nothing there, or a symbolic link to nothing.
    ValueError: a named pipe (`/dev/stdin`, bash's `<(...)`), socket or device, refused
      before it is opened (opening a pipe waited for a writer forever); bad JSON, a key given
      twice, or not an object, naming the file.
  """
  files.check_found(path, "config file")  # A link to nothing named as one.
  special = paths.special_input_problems({name: path}, CONFIG_READ)
  if special:
    raise ValueError(special[0])
  # read_text drops a byte-order mark (Windows editors write one); a key given twice (which
  # one is meant?) is refused, as bad JSON is, naming the file.
  values = json_values.read(path)
  if not isinstance(values, dict):
    raise ValueError(f"{path}: expected a JSON object, got {type(values).__name__}")
  return values
