"""What the model classes take in Keras' `predict`, `fit` and `evaluate`: raw text, packed;
features, checked against the model's config before Keras sees them; and the entry point of
each model's text calls.

keras-hub's convention: a model whose preprocessing travels with it takes strings where it
takes features. A tfbert model with text settings (`tfbert.load`, or
`tfbert.inference.text_settings.attach_text`) packs strings with its raw-text signature's
packing and then runs Keras' own method on the features, so `model.predict(["text"])`
returns what `model.predict(features)` does. A classifier's `fit(texts, labels)` takes
labels by name (or class ids; regression scores). Every raw-text argument (`x`, and
`validation_data` as a tuple or list) is packed the same way, so no string reaches Keras. A
`tf.data.Dataset` (or generator) of strings is refused, naming the list it takes.

No examples (an empty list of texts, features of 0 rows) reach Keras, whose `predict` fails
in its own code on them ("cannot access local variable 'batch_outputs'") and whose `fit` and
`evaluate` return without a word: `predict` returns outputs of 0 rows, shaped and typed as
one example's; `fit` and `evaluate` refuse them, naming the input. A dataset (or generator)
that gives no batch is refused after the call (`_BatchCount`).

Features (`CheckedInputs`, every model class) are checked before Keras sees them, and
where the model runs (`tfbert.text.feature_checks`). Sample weights are refused, as
`compile` refuses a loss or metrics: the models' steps train and evaluate on their own
unweighted loss, so `fit` and `evaluate` refuse `sample_weight=`, `class_weight=` and a
third element of `validation_data` before Keras runs (`refuse_weights`), and the steps a
batch of (x, y, sample_weight), e.g. from a dataset, at trace time (`unweighted_batch`).

The model classes mix these in, and `tfbert.inference.raw_text` implements the text calls.
It imports the models, so the models cannot import it: it registers itself here when
imported (`register`), which attaching text settings to a model always does first
(`tfbert.inference.text_settings.attach`). A model without them is told how to get them.

Shape legend: B batch, S sequence.
"""

import inspect
from collections.abc import Collection, Sequence
from typing import Any, Mapping, Optional

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from tfbert.runtime import validation
from tfbert.text.feature_checks import (
  FEATURE_NAMES,
  FEATURES_FORM,
  check_specs,
  checked_features,
  graph_checks,
)

_IMPLEMENTATION = None
NO_TEXT_SETTINGS = ("this {kind} has no vocabulary attached, so it cannot read raw text: load "
                    "it with tfbert.load(path), or call "
                    "tfbert.inference.text_settings.attach_text(model, vocab_file)")


def register(implementation) -> None:
  """Called by `tfbert.inference.raw_text` at import: the module the text calls run."""
  global _IMPLEMENTATION
  _IMPLEMENTATION = implementation


def implementation(model) -> Any:
  """The registered `tfbert.inference.raw_text`.

  Raises:
    ValueError: none registered, so `model` has no text settings (see the module doc).
  """
  if _IMPLEMENTATION is None:
    raise ValueError(NO_TEXT_SETTINGS.format(kind=type(model).__name__))
  return _IMPLEMENTATION


# What Keras' `compile` takes that a tfbert model's own steps never read.
NOT_COMPILED = ("loss", "loss_weights", "metrics", "weighted_metrics")


def reported_metrics(model) -> list[str]:
  """The names a model's `fit` and `evaluate` report (its `metrics`, with the names its
  `metric_directions` list holds), in order, once each; `loss` first (a pretrainer's is
  the sum of its head losses)."""
  names = ["loss"]
  for metric in model.metrics:
    for inner in getattr(metric, "metrics", None) or [metric]:
      if inner.name not in names:
        names.append(inner.name)
  return names


WEIGHTS_REFUSED = ("sample_weight", "class_weight")  # Keras makes sample weights of both.


def _weights_message(model, given: str) -> str:
  kind = type(model).__name__
  return (f"{kind} takes no sample_weight or class_weight (got {given}): {kind} trains and "
          "evaluates on the plain mean of its own per-example loss, so Keras' weights would "
          "be ignored. Leave them out; to weight examples, repeat or drop them in the data")


def refuse_weights(model, call: str, args: tuple, kwargs: dict,
                   validation_data: Any = None) -> None:
  """Refuses, before Keras runs, the weights a model's `train_step` and `test_step` would
  drop: `sample_weight` or `class_weight` of Keras' `fit` or `evaluate` (`call`), by
  keyword or position, and a third element (sample weights) of `validation_data`.

  Raises:
    ValueError: naming both arguments and what was given.
  """
  try:
    given = inspect.signature(getattr(keras.Model, call)).bind_partial(
        model, None, None, *args, **kwargs).arguments
  except TypeError:  # Keras refuses the call in its own words.
    given = kwargs
  named = [f"{call}({name}=...)" for name in WEIGHTS_REFUSED if given.get(name) is not None]
  validation_data = given.get("validation_data", validation_data)
  if (isinstance(validation_data, (tuple, list)) and len(validation_data) == 3
      and validation_data[2] is not None):
    named.append("validation_data[2] (sample weights)")
  if named:
    raise ValueError(_weights_message(model, " and ".join(named)))


def unweighted_batch(model, data) -> tuple[Any, Any]:
  """(x, y) of a training or evaluation batch, refusing (at trace time, before the step
  builds or runs anything) sample weights, which the model's steps would drop: a dataset's
  third element, or Keras' own from `sample_weight=` or `class_weight=`.

  Raises:
    ValueError: the batch has sample weights.
  """
  features, labels, weights = keras.utils.unpack_x_y_sample_weight(data)
  if weights is not None:
    raise ValueError(_weights_message(
        model, "batches of (x, y, sample_weight): from sample_weight=, class_weight= or a "
               "dataset's third element"))
  return features, labels


def _refuse_builtin_accumulation(optimizer: Any, kind: str) -> None:
  """Raises ValueError for an optimizer (or a LossScaleOptimizer's inner one) set with Keras'
  own `gradient_accumulation_steps`: under tf.distribute it is wrong, and its schedule
  advances per micro-step (docs/pitfalls.md); tfbert's accumulation is the one proven."""
  inner = getattr(optimizer, "inner_optimizer", None)
  for candidate in (optimizer, inner):
    steps = getattr(candidate, "gradient_accumulation_steps", None)
    if steps:
      raise ValueError(
          f"{kind}.compile: the optimizer {candidate.name!r} accumulates with Keras' own "
          f"gradient_accumulation_steps={steps}, which is wrong under tf.distribute and "
          "advances the learning-rate schedule per micro-step: build it without that and "
          f"pass tfbert.with_gradient_accumulation(optimizer, {steps}) (or create_optimizer "
          f"with gradient_accumulation_steps={steps})")


# The key of a model's config that records which of its layers train (`get_config`).
LAYER_TRAINABLE = "layer_trainable"


def _named_layers(layer, prefix: str = ""):
  """(path of names below `layer`, sublayer) of every layer under `layer`, parents first."""
  for child in layer._flatten_layers(include_self=False, recursive=False):  # pylint: disable=protected-access
    name = f"{prefix}{child.name}"
    yield name, child
    yield from _named_layers(child, name + "/")


class CheckedInputs:
  """Mixin: Keras' `predict`, `fit` and `evaluate` with the model's inputs checked first (see
  the module docstring); the model names the features it reads in `input_names`. Its
  `compile` takes no loss and no metric: the model's steps compute their own."""

  input_names: tuple[str, ...] = FEATURE_NAMES  # A pretrainer reads its labels there too.

  def compile(self, optimizer="rmsprop", loss=None, loss_weights=None, metrics=None,
              weighted_metrics=None, **kwargs):
    """Keras' `compile`, refusing what the model's own `train_step` and `test_step` would
    ignore: a `loss` or `loss_weights` (it trains on its own loss) and `metrics` or
    `weighted_metrics` (it reports its own, `reported_metrics`).

    Raises:
      ValueError: any of those given, naming what the model computes instead.
    """
    given = {"loss": loss, "loss_weights": loss_weights, "metrics": metrics,
             "weighted_metrics": weighted_metrics}
    refused = [name for name, value in given.items()
               if value is not None and not (name.endswith("metrics") and not value)]
    if refused:
      kind = type(self).__name__
      raise ValueError(
          f"{kind}.compile takes no {' or '.join(refused)}: {kind} trains on its own loss and "
          f"fit / evaluate report its own metrics ({', '.join(reported_metrics(self))}), so "
          f"Keras' would be ignored. Pass the optimizer only (compile(optimizer=...)); compute "
          f"other metrics from model.predict's outputs")
    _refuse_builtin_accumulation(optimizer, type(self).__name__)
    return super().compile(optimizer=optimizer, **kwargs)

  def _maybe_symbolic_build(self, iterator=None, data_batch=None):
    """Keras' build before `fit` / `evaluate` under a strategy, from the first replica's
    share of the first batch. Keras averaged the replicas' shares to get shapes, which
    failed with a traceback when they differed (a global batch of 3 on 2 replicas is 2 and
    1 rows: "Inputs to operation AddN must have the same size and shape"; sweep 29, B103)."""
    strategy = getattr(self, "_distribute_strategy", None)
    if iterator is not None and data_batch is None and strategy is not None:
      for _, _, batches in iterator:
        data_batch = tf.nest.map_structure(
            lambda x: (strategy.experimental_local_results(x)[0]
                       if isinstance(x, tf.distribute.DistributedValues) else x),
            next(batches))
        break
      iterator = None
    return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

  def get_config(self):
    """Keras' config, with which of the model's layers train (`LAYER_TRAINABLE`): Keras
    rebuilds a subclassed model's layers from its constructor, so an encoder frozen before
    `save` came back trainable from `load_model`, and resumed training trained it (sweep
    30, B44)."""
    config = super().get_config()
    states = {name: bool(layer.trainable) for name, layer in _named_layers(self)}
    if not all(states.values()):
      config[LAYER_TRAINABLE] = states
    return config

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    states = config.pop(LAYER_TRAINABLE, None)
    model = super().from_config(config, custom_objects=custom_objects)
    for name, layer in _named_layers(model):  # Parents before children.
      if states and name in states:
        layer.trainable = states[name]
    return model

  def compile_from_config(self, config):
    """Keras' `compile_from_config` (loading a compiled `.keras` file), through this
    `compile`; a file saved before `compile` refused them may hold a loss or metrics the
    model never read: they are left out."""
    config = keras.saving.deserialize_keras_object(
        {key: value for key, value in config.items() if key not in NOT_COMPILED})
    self.compile(**config)
    if getattr(self, "optimizer", None) is not None and self.built:
      self.optimizer.build(self.trainable_variables)

  def checked_inputs(self, x, what: str = "x", training: bool = False) -> Any:
    """`x` as Keras gets it: concrete features checked (`checked_features`), a dataset of
    strings or raw text this call does not read refused; anything else as given.

    Args:
      x: what was passed to `predict`, `fit` or `evaluate`.
      what: its name in the messages.
      training: whether `fit` or `evaluate` takes it (a sentence encoder's pairs; what a
        refusal offers instead, `other_inputs`).
    """
    refuse_text_data(self, x, what)
    if is_text(x):
      raise ValueError(f"{type(self).__name__} reads raw text in predict only: pass {what} as "
                       f"features ({FEATURES_FORM}) packed from the texts"
                       f"{features_source(self)}")
    return checked_features(x, self.config, self.input_names, what,
                            other_inputs(self, training))

  def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
    """Keras' `predict` on checked inputs (features of 0 rows: outputs of 0 rows)."""
    return self._predict_checked(self.checked_inputs(x), batch_size, verbose, steps,
                                 callbacks)

  def _predict_checked(self, x, batch_size, verbose, steps, callbacks) -> Any:
    """Keras' `predict` on `x`, checked; no examples: one example's outputs, cut to 0 rows
    (no batch runs for the caller's `callbacks`, which see none)."""
    batch_size = checked_batch_size(batch_size)
    if example_count(x) == 0:
      row = {name: np.zeros((1,) + tuple(value.shape[1:]), np.asarray(value).dtype)
             for name, value in x.items()}
      outputs = self._predict_checked(row, None, 0, None, None)
      return keras.tree.map_structure(lambda value: value[:0], outputs)
    build_before_tracing(self)
    with graph_checks(self, "predict"):
      return _BatchCount.run(super().predict, self, "predict", x, batch_size=batch_size,
                             verbose=verbose, steps=steps, callbacks=callbacks)

  def fit(self, x=None, y=None, *args, validation_data=None, **kwargs):
    """Keras' `fit` on checked inputs (and `validation_data`'s), of at least one example;
    no sample or class weights (`refuse_weights`)."""
    refuse_weights(self, "fit", args, kwargs, validation_data)
    refuse_rate_setters(self, args, kwargs)
    if "batch_size" in kwargs:
      kwargs["batch_size"] = checked_batch_size(kwargs["batch_size"])
    x = refuse_no_examples(self, self.checked_inputs(x, training=True), "x", "fit")
    x = check_labels(self, x, y)
    validation_data = self._checked_validation_data(validation_data)
    build_before_tracing(self, optimizer=True)
    warn_uneven_micro_batches(self, x, args, kwargs)
    with graph_checks(self, "fit"):
      return _BatchCount.run(super().fit, self, "fit", x, y, *args,
                             validation_data=validation_data, **kwargs)

  def evaluate(self, x=None, y=None, *args, **kwargs):
    """Keras' `evaluate` on checked inputs, of at least one example; no sample weights
    (`refuse_weights`)."""
    refuse_weights(self, "evaluate", args, kwargs)
    if "batch_size" in kwargs:
      kwargs["batch_size"] = checked_batch_size(kwargs["batch_size"])
    x = refuse_no_examples(self, self.checked_inputs(x, training=True), "x", "evaluate")
    x = check_labels(self, x, y)
    build_before_tracing(self)
    with graph_checks(self, "evaluate"):
      return _BatchCount.run(super().evaluate, self, "evaluate", x, y, *args, **kwargs)

  def __call__(self, *args, **kwargs):
    """Keras' `__call__`; raw text refused, naming the call that reads it. A Python-level
    type check of the inputs only (`called_on_text`): no op is added to a traced step."""
    features = args[0] if args else kwargs.get("features")
    if called_on_text(features):
      refuse_batch_text(self, features, "__call__")
    return super().__call__(*args, **kwargs)

  def predict_step(self, data):
    """Keras' `predict_step`, a batch's features checked at trace time (`check_specs`)."""
    check_specs(keras.utils.unpack_x_y_sample_weight(data)[0], self.config, self.input_names,
                "x")
    return super().predict_step(data)

  def predict_on_batch(self, x):
    """Keras' `predict_on_batch`; raw text refused, naming the call that reads it."""
    refuse_batch_text(self, x, "predict_on_batch")
    return super().predict_on_batch(x)

  def train_on_batch(self, x, y=None, *args, **kwargs):
    """Keras' `train_on_batch`; raw text refused, naming the call that reads it, and label
    values checked first (`check_labels`)."""
    refuse_batch_text(self, x, "train_on_batch")
    check_labels(self, x, y)
    build_before_tracing(self, optimizer=True)
    return super().train_on_batch(x, y, *args, **kwargs)

  def test_on_batch(self, x, y=None, *args, **kwargs):
    """Keras' `test_on_batch`; raw text refused, naming the call that reads it, and label
    values checked first (`check_labels`)."""
    refuse_batch_text(self, x, "test_on_batch")
    check_labels(self, x, y)
    return super().test_on_batch(x, y, *args, **kwargs)

  def _checked_validation_data(self, validation_data) -> Any:
    refuse_unlabelled_validation(validation_data)
    if isinstance(validation_data, (tuple, list)) and len(validation_data) in (2, 3):
      what = "validation_data[0]"
      x = refuse_no_examples(self, self.checked_inputs(validation_data[0], what,
                                                       training=True), what, "fit")
      check_labels(self, x, validation_data[1], "validation_data[1]")
      return type(validation_data)([x, *validation_data[1:]])
    refuse_text_data(self, validation_data, "validation_data")
    return check_labels(self, validation_data, None, "validation_data")


def warn_uneven_micro_batches(model, x, args: Sequence, kwargs: Mapping) -> None:
  """Says when `fit` of arrays under gradient accumulation ends each epoch on a smaller
  batch: each micro-batch's loss is its own mean, so k micro-batches equal one batch of
  k * batch_size only when each holds batch_size examples; the last one's examples weigh
  more (4 examples at batch_size 3 and k 2: 8.4e-3 away from the big batch, sweep 33,
  B104). A dataset's batches are its own (unknown here)."""
  # (tfbert.training imports the models' modules: read here, where it is loaded.)
  from tfbert.training import accumulation  # pylint: disable=import-outside-toplevel
  accumulator = accumulation.find_accumulator(getattr(model, "optimizer", None))
  ids = x.get("input_ids") if isinstance(x, dict) else x
  if accumulator is None or accumulator.steps <= 1 or not hasattr(ids, "shape"):
    return
  batch_size = kwargs.get("batch_size", args[0] if args else None) or 32  # Keras' default.
  count = ids.shape[0]
  if isinstance(count, int) and isinstance(batch_size, int) and count % batch_size:
    logging.warning(
        "fit: %d examples at batch_size %d end each epoch on a batch of %d, and gradient "
        "accumulation (%d micro-batches a step) averages micro-batch means: that batch's "
        "examples weigh %d/%d as much as the others'. Give a multiple of batch_size "
        "examples, or a tf.data dataset batched with drop_remainder=True",
        count, batch_size, count % batch_size, accumulator.steps, batch_size,
        count % batch_size)


class RawTextPredict(CheckedInputs):
  """Mixin: `predict` on raw text (see the module docstring)."""

  def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
    """Keras' `predict`; raw text is packed into the model's features first (no texts:
    outputs of zero rows, shaped as one text's)."""
    if text_input(x, "x"):
      x = implementation(self).features_of_texts(self, x, "x")
      return self._predict_checked(self.checked_inputs(x, "x (packed from its texts)"),
                                   batch_size, verbose, steps, callbacks)
    return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps,
                           callbacks=callbacks)


class RawTextFit(RawTextPredict):
  """Mixin: `predict`, `fit` and `evaluate` on raw text with labels by name."""

  def _text_data(self, x, y, what: str = "x", labels_what: str = "labels"
                 ) -> tuple[Any, Any]:
    """(features, class ids) of raw text `x` and its labels `y`; anything else as given.

    Raises:
      ValueError: no texts, no labels, or as many labels as texts (named by `what`).
    """
    if not text_input(x, what):
      return x, y
    if y is None:
      raise ValueError(f"{type(self).__name__} on raw text needs its labels (y)")
    features = implementation(self).features_of_texts(self, x, what)
    count = len(features["input_ids"])
    if not count:
      raise ValueError(f"no texts in {what}: {type(self).__name__} trains and evaluates on "
                       "at least one")
    labels = implementation(self).class_ids(self, y, labels_what)
    if len(labels) != count:
      where = "" if what == "x" else f" in {what}"
      raise ValueError(f"{count} texts{where} but {len(labels)} {labels_what}")
    return self.checked_inputs(features, f"{what} (packed from its texts)"), labels

  def _validation_data(self, validation_data) -> Any:
    """`validation_data` (x, y[, sample_weight]), a tuple or list, with raw text packed."""
    refuse_unlabelled_validation(validation_data)
    if (isinstance(validation_data, (tuple, list)) and len(validation_data) in (2, 3)
        and is_text(validation_data[0])):
      x, y = self._text_data(validation_data[0], validation_data[1], "validation_data[0]",
                             "validation_data[1]")
      return (x, y) + tuple(validation_data[2:])
    return validation_data

  def fit(self, x=None, y=None, *args, validation_data=None, **kwargs):
    """Keras' `fit`; raw text (and `validation_data=(texts, labels)`, a tuple or list) is
    packed first and its labels matched to the model's by name."""
    refuse_weights(self, "fit", args, kwargs, validation_data)  # Before packing any text.
    texts = x if text_input(x, "x") else None
    x, y = self._text_data(x, y)
    if texts is not None:  # What it trains on is what it reads (before validation_data).
      implementation(self).record_arity(self, texts)
    validation_data = self._validation_data(validation_data)
    return super().fit(x, y, *args, validation_data=validation_data, **kwargs)

  def evaluate(self, x=None, y=None, *args, **kwargs):
    """Keras' `evaluate`; raw text is packed first and its labels matched by name."""
    refuse_weights(self, "evaluate", args, kwargs)  # Before packing any text.
    x, y = self._text_data(x, y)
    return super().evaluate(x, y, *args, **kwargs)


# The call of a model's Keras *_on_batch calls that reads raw text instead.
_TEXT_CALLS = {"predict_on_batch": "predict(texts)", "train_on_batch": "fit(texts, labels)",
               "test_on_batch": "evaluate(texts, labels)", "__call__": "predict(texts)"}
_FRONT_DOORS = ("classify", "tag", "answer", "fill_mask", "encode")  # The models' text calls.


def refuse_batch_text(model, x: Any, call: str) -> None:
  """Refuses raw text given to Keras' `predict_on_batch`, `train_on_batch`,
  `test_on_batch` or to calling the model (`__call__`), which take features only, naming the
  call that reads it (`predict(texts)`, a classifier's `fit(texts, labels)`, ...) where the
  model has one.

  Raises:
    TypeError: `x` is raw text.
  """
  if not is_text(x):
    return
  kind = type(model).__name__
  predicting = call in ("predict_on_batch", "__call__")
  name = f"{kind}(...)" if call == "__call__" else f"{kind}.{call}"
  start = f"{name} takes features, {FEATURES_FORM}, not raw text"
  if isinstance(model, RawTextFit) or (isinstance(model, RawTextPredict) and predicting):
    doors = [f"{door}(texts)" for door in _FRONT_DOORS
             if predicting and callable(getattr(model, door, None))]
    also = f" (or {doors[0]})" if doors else ""
    raise TypeError(f"{start}: raw text goes through {kind}.{_TEXT_CALLS[call]}{also}")
  raise TypeError(f"{start}{other_inputs(model, not predicting)}")


def called_on_text(x: Any) -> bool:
  """Whether `x`, given to a model's `__call__`, is raw text: a str, or a list or tuple
  holding a str or a (text_a, text_b) pair. Python type checks only (no tensor is read, no op
  made), as `__call__` runs inside traced steps; such inputs are never features."""
  return isinstance(x, str) or (isinstance(x, (list, tuple))
                                and any(_text_item(item) for item in x))


def check_labels(model, x: Any, y: Any, what: str = "y") -> Any:
  """`x`, the values of its labels `y` known before a Keras call runs checked by the
  model's `check_label_values` (the fine-tuning models': class ids, tag ids and positions
  in range; a dataset of (x, y) gets the check as a `map`, returned); `x` as it is for a
  model without one."""
  checker = getattr(model, "check_label_values", None)
  return x if checker is None else checker(x, y, what)


def checked_batch_size(batch_size: Any) -> Optional[int]:
  """`batch_size` of fit, evaluate or predict as a plain int >= 1, or None (Keras' default):
  Keras took 0 for "its default" without a word, where `classify(batch_size=0)` is refused
  (sweep 19, S2).

  Raises:
    ValueError: "batch_size must be an int >= 1, got <value!r>".
  """
  return None if batch_size is None else validation.plain_int("batch_size", batch_size)


def refuse_unlabelled_validation(validation_data: Any) -> None:
  """Refuses `validation_data=(x,)`: fit scores it against labels, and Keras said only
  "Unrecognized data type" of its x (sweep 19, P2).

  Raises:
    ValueError: naming what to pass.
  """
  if isinstance(validation_data, (tuple, list)) and len(validation_data) == 1:
    raise ValueError("validation_data holds no labels (a 1-tuple): pass validation_data=(x, "
                     "y), the held-out inputs and their labels, as fit takes x and y")


def features_source(model) -> str:
  """"; <how to build the features>" of `model`'s fit and evaluate (its class's
  `FEATURES_SOURCE`), or "" for a model without one."""
  source = getattr(type(model), "FEATURES_SOURCE", "")
  return f"; {source}" if source else ""


def other_inputs(model, training: bool) -> str:
  """The end of the message refusing `x` that is neither features nor ids
  (`feature_checks.checked_features`): raw text where this call reads it (`predict` of a
  `RawTextPredict` model, also `fit` and `evaluate` of a `RawTextFit` one); else, for
  `fit` and `evaluate`, that raw text is predict's and where the features come from."""
  if isinstance(model, RawTextFit) or (isinstance(model, RawTextPredict) and not training):
    return ", or raw texts as a list of str"
  if not isinstance(model, RawTextPredict):
    return ""
  return (f"; {type(model).__name__} reads raw text in predict only, not in fit or evaluate"
          f"{features_source(model)}")


def example_count(x: Any) -> Optional[int]:
  """The examples in checked features `x` when known before Keras runs: the rows of their
  `input_ids` (of a sentence encoder's pairs, the first part's); None for a dataset, a
  generator or an unknown batch dimension."""
  if isinstance(x, Mapping) and "input_ids" not in x and x:
    x = next(iter(x.values()))  # {"anchor": features, "positive": features, ...}
  if not isinstance(x, Mapping) or "input_ids" not in x:
    return None
  shape = getattr(x["input_ids"], "shape", None)
  return shape[0] if shape is not None and len(shape) else None


def refuse_no_examples(model, x: Any, what: str, call: str) -> Any:
  """`x`, checked features, unless they hold no example (0 rows).

  Raises:
    ValueError: naming `what` and the call (`fit`, `evaluate`), which Keras would run on
      nothing without a word.
  """
  if example_count(x) == 0:
    raise ValueError(f"no examples in {what}: its input_ids have 0 rows, and "
                     f"{type(model).__name__}.{call} needs at least one")
  return x


def build_before_tracing(model: keras.Model, optimizer: bool = False) -> None:
  """Builds `model` (and with `optimizer`, its optimizer's variables) before Keras traces
  the step of `fit`, `evaluate` or `predict`.

  Without a strategy, Keras defers building to the first trace of the step, where the
  model's first call made its weights and the training step's first use of the optimizer
  (`tfbert.models.step_number`) its slots; a `tf.function` whose first trace makes
  variables is traced twice (once to make them, once more to run), so `fit` traced its
  whole step twice and `evaluate` of an unbuilt model its test step twice (measured: a
  3-step fit of a 2-layer model took 8 to 11 s, 4 s traced once). The same variables,
  names and values as there (`step_number`'s name scope); under a strategy Keras builds
  them itself (`_maybe_symbolic_build`)."""
  if getattr(model, "_distribute_strategy", None) is not None or tf.distribute.has_strategy():
    return
  if optimizer and getattr(model, "optimizer", None) is not None:
    build_optimizer(model)
  elif not model.built:
    model.build()


def build_optimizer(model: keras.Model) -> None:
  """Builds `model` if it is not, then its optimizer's variables if they are not, named in
  the optimizer's scope (as Keras' own `apply` names them): the one place that builds them
  ahead of Keras, before a trace (`build_before_tracing`) and in a step's first use
  (`tfbert.models.step_number`)."""
  if not model.built:
    model.build()
  optimizer = model.optimizer
  if not optimizer.built:
    with keras.name_scope(optimizer.name, caller=optimizer):
      optimizer.build(model.trainable_variables)


RATE_SETTERS = (keras.callbacks.ReduceLROnPlateau, keras.callbacks.LearningRateScheduler)


def refuse_rate_setters(model: keras.Model, args: tuple, kwargs: dict) -> None:
  """Refuses, before any training, a callback that sets the learning rate (`RATE_SETTERS`)
  when the optimizer's follows a schedule (`tfbert.create_optimizer`'s warmup and decay):
  Keras trained an epoch and then failed with "TypeError: This optimizer was created with a
  `LearningRateSchedule` object as its `learning_rate` constructor argument, hence its
  learning rate is not settable" (sweep 31, B19).

  Args:
    model: the compiled model.
    args: `fit`'s positional arguments after x and y (callbacks is the fourth).
    kwargs: its keyword arguments.
  """
  callbacks = kwargs.get("callbacks", args[3] if len(args) > 3 else None)
  setters = [type(c).__name__ for c in callbacks or () if isinstance(c, RATE_SETTERS)]
  optimizer = getattr(model, "optimizer", None)
  while getattr(optimizer, "inner_optimizer", None) is not None:  # Loss scale, accumulation.
    optimizer = optimizer.inner_optimizer
  rate = getattr(optimizer, "_learning_rate", None)
  if setters and isinstance(rate, keras.optimizers.schedules.LearningRateSchedule):
    raise ValueError(
        f"{type(model).__name__}.fit: {', '.join(setters)} sets the learning rate, but the "
        f"optimizer's follows a schedule ({type(rate).__name__}), which it cannot change: "
        "drop the callback, or compile with an optimizer of a constant learning rate "
        "(learning_rate=<float>)")


class _BatchCount(keras.callbacks.Callback):
  """Counts the batches one Keras call (`run`) runs, to refuse a call that ran none: a
  dataset or generator that gave no batch, on which Keras' `predict` fails in its own code
  and its `fit` and `evaluate` return without a word."""

  async_safe = True  # It only counts: Keras may call it from its callback thread.

  def __init__(self, call: str):
    super().__init__()
    self._call = call
    self.batches = 0
    self.ran = call != "fit"  # A `fit` runs its data once an epoch begins.

  def on_epoch_begin(self, epoch, logs=None):
    self.ran = True

  def on_train_batch_end(self, batch, logs=None):
    self.batches += self._call == "fit"

  def on_test_batch_end(self, batch, logs=None):  # Also `fit`'s validation: not counted.
    self.batches += self._call == "evaluate"

  def on_predict_batch_end(self, batch, logs=None):
    self.batches += self._call == "predict"

  @classmethod
  def run(cls, method, model, call: str, *args, **kwargs) -> Any:
    """`method(*args, **kwargs)`, Keras' `fit`, `evaluate` or `predict` (named `call`), with
    a count added to its callbacks (given by keyword or in their place). Called with Keras'
    own `CallbackList` (`fit` runs its validation `evaluate` so), it runs as it is.

    Raises:
      ValueError: no batch ran (in a `fit`: while an epoch ran; none runs when
        `initial_epoch` >= `epochs`), naming the model and the call.
    """
    bound = inspect.signature(method).bind(*args, **kwargs)
    callbacks = bound.arguments.get("callbacks")
    if isinstance(callbacks, keras.callbacks.CallbackList):
      return method(*args, **kwargs)
    count = cls(call)
    bound.arguments["callbacks"] = [*(callbacks or ()), count]
    try:
      result = method(*bound.args, **bound.kwargs)
    except UnboundLocalError:  # Keras' `predict` after no batch ("... 'batch_outputs'").
      if count.batches:
        raise
      result = None
    if count.ran and not count.batches:
      raise ValueError(f"x gave no batch (an empty dataset or generator): "
                       f"{type(model).__name__}.{call} needs at least one example")
    return result


def array_like(x: Any) -> Optional[np.ndarray]:
  """`np.asarray(x)` of a container NumPy reads (`__array__`) that is neither a NumPy array
  nor a tensor nor a mapping: a pandas Series, Index or DataFrame (tfbert does not import
  pandas); None for anything else."""
  if (isinstance(x, (np.ndarray, str, bytes, Mapping, tf.Variable)) or tf.is_tensor(x)
      or not hasattr(x, "__array__")):
    return None
  try:
    return np.asarray(x)
  except Exception:  # pylint: disable=broad-except  # Not an array after all: not text.
    return None


def _text_item(item: Any, *also: type) -> bool:
  """Whether `item`, of a container, is a text (a str, or of type `also`) or a
  (text_a, text_b) pair of str."""
  return isinstance(item, (str, *also)) or (
      isinstance(item, (list, tuple)) and len(item) == 2
      and all(isinstance(t, str) for t in item))


def is_text(x: Any) -> bool:
  """Whether `x` is raw text, for the raw-text calls to read or to refuse by name: a str,
  strs, (text, text) pairs, an empty list (no texts), a string tensor or array, an array-like
  of strs (`array_like`: a pandas Series; 1-D, or refused as such), or an unordered
  collection of strs (a set, dict keys: refused as such). A list or object array holding
  any text is text, whatever its other items (`text_input` names them): a missing text
  first (None, NaN) does not make texts token ids."""
  if isinstance(x, str):
    return True
  array = array_like(x)
  if array is not None:
    if array.ndim == 1 and not array.size:
      return True  # No texts, as an empty list.
    x = array
  dtype = getattr(x, "dtype", None)
  if dtype is not None:
    kind = getattr(dtype, "kind", None)  # NumPy's; TensorFlow's dtypes have `name`.
    return kind in ("U", "S") or getattr(dtype, "name", "") == "string" or (
        kind == "O" and any(_text_item(item, bytes) for item in x.flat))
  if isinstance(x, (list, tuple)):
    # No texts (which the calls name) are never Keras' own empty input.
    return not x or any(_text_item(item) for item in x)
  if isinstance(x, Collection) and not isinstance(x, (Mapping, Sequence)):
    return isinstance(next(iter(x), None), str)  # A set, dict keys: never Keras' input.
  return False


# How many bad items of a list of texts a text call names (then how many more).
NAMED_ITEMS = 10


def refuse_items(problems: Sequence[Exception], what: str) -> None:
  """Raises for every bad item of the texts `what` at once, each named by its own message
  (`problems`, in item order): the one error itself when there is one, else one error of
  the first NAMED_ITEMS messages and how many more, so a list with several bad items is
  fixed in one pass, not one item per call. A TypeError when any item is of the wrong
  type, else a ValueError; the raised error keeps `problems` as its `items`.
  """
  if not problems:
    return
  if len(problems) == 1:
    error = problems[0]
  else:
    kind = TypeError if any(isinstance(p, TypeError) for p in problems) else ValueError
    more = (f"; and {len(problems) - NAMED_ITEMS} more"
            if len(problems) > NAMED_ITEMS else "")
    error = kind(f"{len(problems)} items of {what} are not texts it can read: "
                 + "; ".join(str(p) for p in problems[:NAMED_ITEMS]) + more)
  error.items = list(problems)
  raise error


def text_input(x: Any, what: str) -> bool:
  """`is_text(x)`, with every item of texts that is not one (not a str, bytes or a pair)
  named by index and value: a missing text (None, NaN) among texts is refused as such, not
  read as token ids.

  Raises:
    TypeError: naming each item of `what` that is not a text.
  """
  if not is_text(x) or isinstance(x, str):
    return is_text(x)
  array = array_like(x)
  items = x if array is None else array
  if getattr(getattr(items, "dtype", None), "kind", "O") != "O" or tf.is_tensor(items):
    return True  # A string array or tensor: texts throughout.
  items = items.flat if isinstance(items, np.ndarray) else items
  bad = [(i, item) for i, item in enumerate(items)
         if not isinstance(item, (str, bytes, list, tuple, np.ndarray))]
  if bad:
    named = ", ".join(f"{what}[{i}] is {item!r} ({type(item).__name__})"
                      for i, item in bad[:NAMED_ITEMS])
    more = f", and {len(bad) - NAMED_ITEMS} more" if len(bad) > NAMED_ITEMS else ""
    raise TypeError(f"{what} holds texts, but not only: {named}{more}, not a str; pass every "
                    "item as a text (drop the missing ones, or give '')")
  return True


def refuse_text_data(model, x, what: str) -> None:
  """Raises TypeError when `x` is a `tf.data.Dataset` of strings (as its features): raw text
  is packed only from a list of texts (a dataset's strings would reach the encoder)."""
  if not isinstance(x, tf.data.Dataset):
    return
  spec = x.element_spec
  spec = spec[0] if isinstance(spec, tuple) else spec  # The features of (x, y[, weights]).
  if any(getattr(spec, "dtype", None) == tf.string for spec in tf.nest.flatten(spec)):
    raise TypeError(
        f"{what} is a tf.data.Dataset of strings: {type(model).__name__} packs raw text only "
        "from a list of texts (model.predict(texts), a classifier's fit(texts, labels)); a "
        f"dataset must hold features, {FEATURES_FORM}")
