"""Raw text into the model classes: Keras' `predict` (and a classifier's `fit` and
`evaluate`) on strings, and the entry point of each model's text calls.

keras-hub's convention: a model whose preprocessing travels with it takes strings where it
takes features. A tfbert model with text settings (`tfbert.load`, or
`tfbert.inference.text_settings.attach_text`) packs strings with its raw-text signature's
packing and then runs Keras' own method on the features, so `model.predict(["text"])`
returns what `model.predict(features)` does. A classifier's `fit(texts, labels)` takes
labels by name (or class ids; regression scores). Every raw-text argument (`x`, and
`validation_data` as a tuple or list) is packed the same way, so no string reaches Keras; an
empty list is text without texts: `predict` returns zero rows, `fit` and `evaluate` refuse
it. Anything else goes to Keras untouched.

The model classes mix these in, and `tfbert.inference.raw_text` implements the calls. It
imports the models, so the models cannot import it: it registers itself here when imported
(`register`), which attaching text settings to a model always does first
(`tfbert.inference.text_settings.attach`). A model without them is told how to get them.
"""

from typing import Any

import keras
import numpy as np

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


class RawTextPredict:
  """Mixin: `predict` on raw text (see the module docstring)."""

  def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
    """Keras' `predict`; raw text is packed into the model's features first (no texts:
    outputs of zero rows, shaped as one text's)."""
    if is_text(x):
      x = implementation(self).features_of_texts(self, x, "x")
      if not len(x["input_ids"]):  # Keras predicts no empty input: one row's, none kept.
        row = {name: np.zeros((1,) + value.shape[1:], value.dtype) for name, value in x.items()}
        outputs = super().predict(row, batch_size=batch_size, verbose=0, callbacks=callbacks)
        return keras.tree.map_structure(lambda value: value[:0], outputs)
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
    if not is_text(x):
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
    return features, labels

  def _validation_data(self, validation_data) -> Any:
    """`validation_data` (x, y[, sample_weight]), a tuple or list, with raw text packed."""
    if (isinstance(validation_data, (tuple, list)) and len(validation_data) in (2, 3)
        and is_text(validation_data[0])):
      x, y = self._text_data(validation_data[0], validation_data[1], "validation_data[0]",
                             "validation_data[1]")
      return (x, y) + tuple(validation_data[2:])
    return validation_data

  def fit(self, x=None, y=None, *args, validation_data=None, **kwargs):
    """Keras' `fit`; raw text (and `validation_data=(texts, labels)`, a tuple or list) is
    packed first and its labels matched to the model's by name."""
    x, y = self._text_data(x, y)
    validation_data = self._validation_data(validation_data)
    return super().fit(x, y, *args, validation_data=validation_data, **kwargs)

  def evaluate(self, x=None, y=None, *args, **kwargs):
    """Keras' `evaluate`; raw text is packed first and its labels matched by name."""
    x, y = self._text_data(x, y)
    return super().evaluate(x, y, *args, **kwargs)


def is_text(x: Any) -> bool:
  """Whether `x` is raw text: a str, strs, (text, text) pairs, an empty list (no texts), or
  a string tensor/array."""
  if isinstance(x, str):
    return True
  dtype = getattr(x, "dtype", None)
  if dtype is not None:
    kind = getattr(dtype, "kind", None)  # NumPy's; TensorFlow's dtypes have `name`.
    return kind in ("U", "S") or getattr(dtype, "name", "") == "string" or (
        kind == "O" and getattr(x, "size", 0) > 0 and isinstance(x.flat[0], (str, bytes)))
  if isinstance(x, (list, tuple)):
    if not x:  # No texts (which the calls name), never Keras' own empty input.
      return True
    first = x[0]
    return isinstance(first, str) or (isinstance(first, (list, tuple)) and len(first) == 2 and
                                      all(isinstance(t, str) for t in first))
  return False

