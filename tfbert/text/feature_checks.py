"""The checks of a tfbert model's features against its config: before Keras sees them
(the model classes' calls, `tfbert.text.text_calls.CheckedInputs`) and where the model
runs (the encoder, the training steps).

A dict of NumPy arrays, lists or tensors (or the ids alone: an int array [B, S] or
equal-length lists of ints) is checked before Keras sees it, each failure naming the input
and the config field: integer ids (a float id would be truncated), rank 2, S in [1,
max_position_embeddings] (S 0 named as such), ids in [0, vocab_size), segment ids in [0,
type_vocab_size), mask values 0 or 1, and only the names the model reads (`check_names`;
Hugging Face's names are named as such). What only the graph knows (a `tf.data` input) is
checked where the model runs: the dtype, rank, static S and names at trace time
(`check_specs`, from `BertEncoder.call` and the training steps), and the values by asserts
in the encoder (`graph_checks`) that run only inside these Keras calls and not with
`jit_compile` (XLA drops asserts, with a warning): exports, which check their requests
themselves (`tfbert.serving.export.validate_features`), XLA, TFLite and ONNX never see
them. Such an assert's failure is raised as a `ValueError` with its message.

Shape legend: B batch, S sequence.
"""

import contextlib
import re
from typing import Any, Iterator, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")  # What every model reads.
HF_NAMES = {"attention_mask": "input_mask", "token_type_ids": "segment_ids"}
FEATURES_FORM = ("a dict {'input_ids': int [B, S], 'input_mask': 1 for a token and 0 for "
                 "padding [B, S] (optional), 'segment_ids': int [B, S] (optional)}")
RAW_TEXT = ("raw text goes to predict (and to a classifier's fit and evaluate) as a list of "
            "texts, which the model packs, not in a dataset, generator or feature")
_INTEGERS = {"input_ids": "token ids", "segment_ids": "token type ids",
             "input_mask": "mask values (1 for a token, 0 for padding)",
             "masked_lm_positions": "positions", "masked_lm_ids": "token ids",
             "next_sentence_labels": "next-sentence labels"}
EMPTY_SEQUENCES = ("a sequence needs at least one token (e.g. [CLS] and [SEP]); drop the "
                   "empty rows or give them at least one id")
_GRAPH_CHECKS = "_tfbert_graph_checks"  # The attribute `graph_checks` sets on the encoder.
_MARK = "tfbert input check: "  # Starts each graph assert's message.


def _bounds(config, length: Optional[int]) -> dict[str, tuple[int, str]]:
  """{feature: (its bound, what the range is)}: every value is in [0, bound)."""
  vocabulary = f"the vocabulary [0, {config.vocab_size}) (vocab_size in the config)"
  bounds = {"input_ids": (config.vocab_size, vocabulary),
            "segment_ids": (config.type_vocab_size, f"the token types [0, "
                            f"{config.type_vocab_size}) (type_vocab_size in the config)"),
            "input_mask": (2, "the mask values 0 and 1"),
            "masked_lm_ids": (config.vocab_size, vocabulary),
            "next_sentence_labels": (2, "the next-sentence labels 0 (B follows A) and 1 "
                                     "(random)")}
  if length is not None:
    bounds["masked_lm_positions"] = (length, f"the positions [0, {length}) of its sequences")
  return bounds


def _where(what: str, names) -> dict[str, str]:
  """Each feature's name in the messages: "x['input_ids']"."""
  return {name: f"{what}[{name!r}]" for name in names}


def _dtype(value) -> Optional[tf.DType]:
  """`value`'s dtype as TensorFlow's, or None (no dtype, or none TensorFlow has)."""
  dtype = getattr(value, "dtype", None)
  try:
    return None if dtype is None else tf.as_dtype(dtype)
  except TypeError:
    return None


def _cut_off(value) -> str:
  """" (e.g. 5.7 at [0, 1] would be read as 5)": the first value of `value` that is no whole
  number, where its values are at hand, else "". The message quoted a made-up "1037.7 read
  as 1037", which read like the caller's data (sweep 33, A38)."""
  try:
    array = value if isinstance(value, np.ndarray) else _concrete(value, "")
  except (TypeError, ValueError):
    return ""
  dtype = _dtype(array) if array is not None else None
  if dtype is None or not dtype.is_floating or not array.size:
    return ""
  wide = np.asarray(array, np.float64)  # bfloat16 arrays are of numpy kind "V".
  with np.errstate(invalid="ignore"):
    bad = ~np.isfinite(wide) | (np.trunc(wide) != wide)
  if not bad.any():
    return ""
  first = tuple(int(i) for i in np.argwhere(bad)[0])
  found, wide = array[first], wide[first]
  if not np.isfinite(wide):
    return f" (e.g. {str(found)} at {list(first)}, no token id at all)"
  return f" (e.g. {str(found)} at {list(first)} would be read as {int(wide)})"


def is_string(value) -> bool:
  """Whether `value` is an array or tensor of strings (an object array holding any: a
  missing text first, None or NaN, does not make texts token ids)."""
  kind = getattr(getattr(value, "dtype", None), "kind", None)
  if kind == "O":
    return any(isinstance(item, (str, bytes)) for item in value.flat)
  return kind in ("U", "S") or _dtype(value) == tf.string


def check_names(features, names: Optional[Sequence[str]], what: str = "features") -> None:
  """Raises unless `features` is a dict with `input_ids` and only names among `names`.

  Args:
    features: the model's inputs (arrays, tensors or symbolic tensors).
    names: the names the model reads; None: any (the encoder inside a larger model), but
      never Hugging Face's, which it would silently leave unread.
    what: their name in the messages.

  Raises:
    TypeError: not a dict; KeyError: no `input_ids`; ValueError: naming the names that
      the model does not read.
  """
  if not isinstance(features, Mapping):
    kind = (f"strings: {RAW_TEXT}" if is_string(features)
            else f"a {type(features).__name__}")
    raise TypeError(f"{what} must be {FEATURES_FORM}; got {kind}")
  unknown = [name for name in features if name in HF_NAMES or (
      names is not None and name not in names)]
  named = [f"{name} (Hugging Face's name; tfbert's is {HF_NAMES[name]})" if name in HF_NAMES
           else name for name in sorted(unknown)]
  if "input_ids" not in features:
    raise KeyError(f"features need 'input_ids' (int32 [B, S]); {what} has {sorted(features)}"
                   + (f": {', '.join(named)}" if named else ""))
  if named:
    raise ValueError(f"{what} has {', '.join(named)}, which the model does not read: its "
                     f"features are {', '.join(names or FEATURE_NAMES)}")


def check_specs(features, config, names: Optional[Sequence[str]] = None,
                what: str = "features", where: Optional[dict[str, str]] = None) -> None:
  """Raises when what is known before running does not fit the model: the names
  (`check_names`), integer dtypes, rank 2, S in [1, max_position_embeddings] and equal
  shapes. On arrays, and on tensors at trace time (an unknown dimension passes).

  Args:
    features: the model's inputs by name.
    config: the model's `BertConfig`.
    names: as `check_names`.
    what: their name in the messages.
    where: each feature's name in the messages (default `what['<name>']`).

  Raises:
    TypeError: as `check_names`, or a feature not of integers; KeyError: no `input_ids`;
      ValueError: unknown names, or a rank, length or shape that does not fit.
  """
  check_names(features, names, what)
  where = where or _where(what, features)
  for name in [name for name in _INTEGERS if name in features]:
    value, dtype = features[name], _dtype(features[name])
    if isinstance(value, (tf.RaggedTensor, tf.RaggedTensorSpec)):
      # TensorFlow's "Failed to convert elements of tf.RaggedTensor" from inside the
      # encoder said neither (sweep 30, B32).
      raise TypeError(f"{where[name]} is ragged (rows of different lengths): pad every row "
                      "to one length S (e.g. .to_tensor() or padded_batch) and mark the "
                      "real tokens in input_mask (1) against the padding (0)")
    if is_string(value):
      raise TypeError(f"{where[name]} holds strings: {RAW_TEXT}")
    if getattr(getattr(value, "dtype", None), "kind", None) == "O":
      raise TypeError(f"{where[name]} is an array of Python objects (dtype object): "
                      f"{_INTEGERS[name]} are integers (int32 or int64); cast them, e.g. with "
                      ".astype('int32')")
    if dtype is not None and not (dtype.is_integer or (dtype.is_bool and name == "input_mask")):
      raise TypeError(f"{where[name]} is {dtype.name}: {_INTEGERS[name]} are integers (int32 "
                      f"or int64), and a fraction would be cut off{_cut_off(value)}; "
                      "cast them, e.g. with .astype('int32')")
    shape = tf.TensorShape(getattr(value, "shape", None))
    if name == "next_sentence_labels":
      continue  # One per sequence, [B]: its shape is the pretrainer's to check.
    if shape.rank is not None and shape.rank != 2:
      raise ValueError(f"{where[name]} has shape {shape.as_list()}: features are [B, S], a "
                       "batch of sequences (one sequence: [ids], of shape [1, S])")
  shape = tf.TensorShape(getattr(features["input_ids"], "shape", None))
  limit = config.max_position_embeddings
  if shape.rank == 2 and shape[1] == 0:
    raise ValueError(f"{where['input_ids']} has sequence length 0 (shape {shape.as_list()}): "
                     f"{EMPTY_SEQUENCES}")
  if shape.rank == 2 and shape[1] is not None and not 1 <= shape[1] <= limit:
    raise ValueError(f"{where['input_ids']} has sequence length {shape[1]}, outside [1, "
                     f"{limit}]: the model has {limit} positions (max_position_embeddings in "
                     "the config); cut or split the sequences")
  for name in [name for name in FEATURE_NAMES[1:] if name in features]:
    other = tf.TensorShape(getattr(features[name], "shape", None))
    if not other.is_compatible_with(shape):
      raise ValueError(f"{where[name]} has shape {other.as_list()} but {where['input_ids']} "
                       f"has {shape.as_list()}")


def check_values(arrays: Mapping[str, np.ndarray], config, where: dict[str, str]) -> None:
  """Raises ValueError naming the first value outside its range (`_bounds`), as the
  exports' checks do: "x['input_ids'] holds 40000 at [0, 1], outside the vocabulary ..."."""
  for name, (high, what) in _bounds(config, arrays["input_ids"].shape[-1]).items():
    values = arrays.get(name)
    if values is None or not values.size:
      continue
    values = values.astype(np.int64)  # A bool mask, too.
    outside = (values < 0) | (values >= high)
    if outside.any():
      first = tuple(int(i) for i in np.argwhere(outside)[0])
      raise ValueError(f"{where[name]} holds {values[first]} at {list(first)}, outside {what}")
  weights = arrays.get(WEIGHTS)
  if weights is not None and weights.size:
    values = np.asarray(weights, np.float64)
    bad = ~(np.isfinite(values) & (values >= 0))
    if bad.any():
      first = tuple(int(i) for i in np.argwhere(bad)[0])
      raise ValueError(f"{where.get(WEIGHTS, WEIGHTS)} holds {weights[first]} at "
                       f"{list(first)}: {WEIGHTS_FORM}")
  _check_masked_positions_on_text(arrays, where)


def _check_masked_positions_on_text(arrays: Mapping[str, np.ndarray],
                                    where: dict[str, str]) -> None:
  """A masked position of weight > 0 on padding (`input_mask` 0) is warned of: its token is
  the pad's, and the model trained toward it without a word (sweep 33, B188). Positions
  are in range here (`check_values` checked them first)."""
  positions, mask = arrays.get("masked_lm_positions"), arrays.get("input_mask")
  if positions is None or mask is None or not positions.size:
    return
  positions, mask = np.asarray(positions, np.int64), np.asarray(mask)
  if positions.ndim != 2 or mask.ndim != 2 or positions.shape[0] != mask.shape[0]:
    return
  weights = arrays.get(WEIGHTS)
  weighted = (np.ones(positions.shape, bool) if weights is None
              else np.asarray(weights, np.float64).reshape(positions.shape) > 0)
  on_pad = (np.take_along_axis(mask, positions, 1) == 0) & weighted
  if on_pad.any():  # Warned, not refused: a caller may mean it (a test of the loss alone).
    b, p = (int(i) for i in np.argwhere(on_pad)[0])
    name = "masked_lm_positions"
    logging.warning("%s: %d prediction(s) of %s > 0 on padding (input_mask 0 there), the "
                    "first %d at [%d, %d]: they are trained on and scored; a masked token is "
                    "one of the text's own, a padding prediction has weight 0",
                    where.get(name, name), int(on_pad.sum()), WEIGHTS, positions[b, p], b, p)


WEIGHTS = "masked_lm_weights"
WEIGHTS_FORM = ("the weight of a prediction is a finite number >= 0 (1 for a masked token, 0 "
                "for a padding prediction); a negative one would train its token away")


def checked_features(x, config, names: Sequence[str], what: str = "x", hint: str = "") -> Any:
  """`x` checked when its values are at hand (`check_specs`, `check_values`): a dict of
  arrays, lists or eager tensors, or the ids alone (an array or eager tensor [B, S], or
  equal-length lists of ints), read as {"input_ids": ids}; lists become arrays. Anything
  else (a dataset, a generator, None) is left to the checks where the model runs.

  `hint` ends the message refusing a list that is neither: what else the call takes (", or
  raw texts as a list of str" where it reads them) or where its features come from; ""
  offers features and ids only, so no call is told of an input it refuses.

  Raises:
    TypeError, KeyError, ValueError: naming the input of `what` that does not fit.
  """
  if isinstance(x, Mapping):
    arrays = {name: _concrete(value, f"{what}[{name!r}]") for name, value in x.items()}
    if any(value is None for value in arrays.values()):
      check_specs(x, config, names, what)
      return x
    check_specs(arrays, config, names, what)
    check_values(arrays, config, _where(what, arrays))
    return {name: arrays[name] if isinstance(value, (list, tuple)) else value
            for name, value in x.items()}
  ids = _ids(x, what, hint)
  if ids is None:
    return x
  where = {"input_ids": f"{what} (read as input_ids)"}
  check_specs({"input_ids": ids}, config, names, what, where)
  check_values({"input_ids": ids}, config, where)
  return {"input_ids": ids}


def _concrete(value, what: str) -> Optional[np.ndarray]:
  """`value` as an array, or None when only the graph knows it."""
  if isinstance(value, np.ndarray):
    return value
  if isinstance(value, (list, tuple)):
    return _rows(value, what)
  if tf.is_tensor(value) and callable(getattr(value, "numpy", None)):
    try:
      return value.numpy()
    except (AttributeError, NotImplementedError):  # A symbolic tensor.
      return None
  return None


def _rows(rows, what: str) -> np.ndarray:
  """`rows` as an array; rows of different lengths refused, saying to pad them."""
  try:
    array = np.asarray(rows)
  except ValueError:
    array = np.asarray(rows, dtype=object)
  if array.size == 0 and array.dtype == np.float64:  # No values, so no dtype: NumPy's default.
    array = array.astype(np.int32)
  if array.dtype == object and not is_string(array):
    lengths = sorted({len(row) for row in rows if hasattr(row, "__len__")})
    raise ValueError(f"{what} has rows of different lengths {lengths}: pad them to one length "
                     "S and pass input_mask (1 for a token, 0 for padding), e.g. "
                     "{'input_ids': ids, 'input_mask': mask}")
  return array


def _ids(x, what: str, hint: str = "") -> Optional[np.ndarray]:
  """The ids alone as an array: an array or eager tensor, or lists of ints; None for what
  Keras reads (a dataset, a generator); a list of anything else refused, saying what to
  pass (features, the ids, then `hint`: `checked_features`)."""
  concrete = None if isinstance(x, (list, tuple)) else _concrete(x, what)
  if concrete is not None:
    return concrete
  if not isinstance(x, (list, tuple)):
    return None
  if x and all(isinstance(row, (list, tuple, np.ndarray)) and all(
      isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in row) for row in x):
    return _rows(x, what)
  first = type(x[0]).__name__ if x else "nothing"
  one = (": one sequence's ids go as [[...]], a list of it" if x and isinstance(
      x[0], (int, np.integer)) else "")
  raise TypeError(f"{what} is a {type(x).__name__} of {first}{one}; pass features as "
                  f"{FEATURES_FORM} or the ids alone as equal-length lists of ints (or an "
                  f"int array [B, S]){hint}")


@contextlib.contextmanager
def graph_checks(model, call: str) -> Iterator[None]:
  """Within a Keras call of `model`: its encoder asserts the values of the features it
  reads (`graph_checked`) unless the call runs under XLA, which drops asserts; a failed
  assert is raised as a ValueError naming the call and what failed.

  A call that fails drops Keras' step functions, to be traced anew by the next call: the
  optimizer is built in the first trace of the training step (`models.step_number`), and a
  `tf.function` whose first trace failed refuses to create variables in the next one.
  """
  encoder = getattr(model, "encoder", model)
  previous = getattr(encoder, _GRAPH_CHECKS, False)
  object.__setattr__(encoder, _GRAPH_CHECKS, not model.jit_compile)
  warn_unchecked_under_xla(model)
  try:
    yield
  except Exception as error:
    model.train_function = model.test_function = model.predict_function = None
    found = isinstance(error, tf.errors.InvalidArgumentError) and re.search(
        re.escape(_MARK) + r"([^\]]*)\] \[([^\]]*)\] \[(.*?)\]\n", error.message)
    if not found:
      raise
    raise ValueError(f"{type(model).__name__}.{call}: a batch's {found.group(1)} "
                     f"{found.group(2)}{found.group(3)}") from None
  finally:
    object.__setattr__(encoder, _GRAPH_CHECKS, previous)


def graph_checked(encoder, features: Mapping[str, Any]) -> Mapping[str, Any]:
  """The encoder's `features` checked at trace time (`check_specs`) and, within
  `graph_checks`, gated on asserts of their length and values, so no embedding gather sees
  a bad index. Run eagerly (within `graph_checks` or not: a direct `model(features)`), the
  values are checked at hand (`check_values`) and no op is added; a trace outside
  `graph_checks` (a user's own `tf.function` or training step) gets no asserts.

  Args:
    encoder: the `BertEncoder` reading them (its `config`).
    features: its inputs.

  Returns:
    The features: the same, or with identities of the three that run after the asserts.
  """
  config = encoder.config
  check_specs(features, config)
  if not getattr(encoder, _GRAPH_CHECKS, False) and not tf.executing_eagerly():
    return features  # A trace outside `graph_checks` (a user's own step): no op added.
  present = {name: tf.convert_to_tensor(features[name]) for name in FEATURE_NAMES
             if name in features}
  if tf.executing_eagerly():  # Any eager call (a direct `model(features)`): values at hand.
    check_values({name: value.numpy() for name, value in present.items()}, config,
                 _where("features", present))
    return features
  limit = config.max_position_embeddings
  length = tf.shape(present["input_ids"])[1]
  asserts = [tf.debugging.Assert(length <= limit, [
      f"{_MARK}input_ids has sequence length", length, f", beyond the {limit} positions "
      "of the model (max_position_embeddings in the config)"]),
             tf.debugging.Assert(length >= 1, [
                 f"{_MARK}input_ids has sequence length", length, f": {EMPTY_SEQUENCES}"])]
  for name, (high, what) in _bounds(config, None).items():
    if name in present:
      asserts.append(_range_assert(name, present[name], high, what))
  with tf.control_dependencies(asserts):
    checked = {name: tf.identity(value) for name, value in present.items()}
  return {**features, **checked}


def graph_checked_labels(encoder, features: Mapping[str, Any],
                         names: Sequence[str]) -> Mapping[str, Any]:
  """`features` with the pretraining labels among `names` (`masked_lm_positions` in [0, S),
  `masked_lm_ids` in the vocabulary, `next_sentence_labels` 0 or 1) gated on asserts, as
  `graph_checked` gates the inputs: within `graph_checks` only, in a graph. A `tf.data`
  batch with a position of S or a label of 2 ended in TensorFlow's raw
  InvalidArgumentError, where the same values as NumPy are refused naming the feature
  (sweep 30, B53, B54, B55, B63)."""
  if not getattr(encoder, _GRAPH_CHECKS, False) or tf.executing_eagerly():
    return features
  length = tf.shape(features["input_ids"])[1]
  bounds = _bounds(encoder.config, None)
  asserts, present = [], {}
  for name in names:
    if name not in features or (name not in bounds and name not in ("masked_lm_positions",
                                                                      WEIGHTS)):
      continue
    present[name] = tf.convert_to_tensor(features[name])
    if name == WEIGHTS:  # Any finite float >= 0 (sweep 31, B54: -1 trained silently).
      flat = tf.reshape(tf.cast(present[name], tf.float32), [-1])
      good = tf.math.is_finite(flat) & (flat >= 0.0)
      shown = tf.concat([tf.boolean_mask(flat, ~good), [0.0]], 0)[0]  # The first bad one.
      asserts.append(tf.debugging.Assert(tf.reduce_all(good),
                                         [f"{_MARK}{name} holds", shown, f": {WEIGHTS_FORM}"]))
    elif name == "masked_lm_positions":
      values = tf.cast(present[name], tf.int32)
      low, high = tf.reduce_min(values), tf.reduce_max(values)
      ok = (tf.size(values) == 0) | ((low >= 0) & (high < length))
      asserts.append(tf.debugging.Assert(ok, [
          f"{_MARK}{name} holds", tf.where(high >= length, high, low),
          ", outside the positions [0, S) of its sequences (S: the length of input_ids)"]))
    else:
      asserts.append(_range_assert(name, present[name], *bounds[name]))
  with tf.control_dependencies(asserts):
    checked = {name: tf.identity(value) for name, value in present.items()}
  return {**features, **checked}


_XLA_WARNED = "_tfbert_xla_warned"  # Set on a model once its XLA calls were warned of.


def warn_unchecked_under_xla(model) -> None:
  """Logs once per model that a `jit_compile` call runs without the value checks (XLA
  drops asserts): a bad id is looked up as garbage, not refused (sweep 30, B47)."""
  kind = type(model).__name__
  if not getattr(model, "jit_compile", False) or getattr(model, _XLA_WARNED, False):
    return
  object.__setattr__(model, _XLA_WARNED, True)
  from absl import logging  # pylint: disable=import-outside-toplevel
  logging.warning(
      "%s compiled with jit_compile=True: XLA drops asserts, so the values of a tf.data "
      "batch (ids within the vocabulary, segment ids, mask values, positions and labels) "
      "are not checked; check them before, or compile without jit_compile to have them "
      "refused naming the feature", kind)


def marked_assert(ok: tf.Tensor, what: str, shown: tf.Tensor, rest: str) -> tf.Operation:
  """An assert whose failure `graph_checks` raises as "<Model>.<call>: a batch's <what>
  <shown><rest>" (a ValueError), e.g. what "labels hold", rest ": the head trains on ..."
  (`rest` may not hold "]" followed by a line end)."""
  return tf.debugging.Assert(ok, [f"{_MARK}{what}", shown, rest])


def _range_assert(name: str, values: tf.Tensor, high: int, what: str) -> tf.Operation:
  """An assert that every value is in [0, high), showing the one furthest outside."""
  if values.dtype == tf.bool:
    values = tf.cast(values, tf.int32)
  low_value, high_value = tf.reduce_min(values), tf.reduce_max(values)
  ok = (tf.size(values) == 0) | ((low_value >= 0) & (high_value < high))
  shown = tf.where(high_value >= high, high_value, low_value)
  return tf.debugging.Assert(ok, [f"{_MARK}{name} holds", shown, f", outside {what}"])
