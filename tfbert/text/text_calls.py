"""Raw text into the model classes: Keras' `predict` (and a classifier's `fit` and
`evaluate`) on strings, and the entry point of each model's text calls.

keras-hub's convention: a model whose preprocessing travels with it takes strings where it
takes features. A tfbert model with text settings (`tfbert.load`, or
`tfbert.inference.text_settings.attach_text`) packs strings with its raw-text signature's
packing and then runs Keras' own method on the features, so `model.predict(["text"])`
returns what `model.predict(features)` does. A classifier's `fit(texts, labels)` takes
labels by name (or class ids; regression scores). Anything else goes to Keras untouched.

The model classes mix these in, and `tfbert.inference.raw_text` implements the calls. It
imports the models, so the models cannot import it: it registers itself here when imported
(`register`), which attaching text settings to a model always does first
(`tfbert.inference.text_settings.attach`). A model without them is told how to get them.
"""

from typing import Any

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
    """Keras' `predict`; raw text is packed into the model's features first."""
    if is_text(x):
      x = implementation(self).features_of_texts(self, x)
    return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps,
                           callbacks=callbacks)


class RawTextFit(RawTextPredict):
  """Mixin: `predict`, `fit` and `evaluate` on raw text with labels by name."""

  def _text_data(self, x, y) -> tuple[Any, Any]:
    if not is_text(x):
      return x, y
    if y is None:
      raise ValueError(f"{type(self).__name__} on raw text needs its labels (y)")
    features = implementation(self).features_of_texts(self, x)
    labels = implementation(self).class_ids(self, y)
    if len(labels) != len(features["input_ids"]):
      raise ValueError(f"{len(features['input_ids'])} texts but {len(labels)} labels")
    return features, labels

  def fit(self, x=None, y=None, *args, validation_data=None, **kwargs):
    """Keras' `fit`; raw text (and `validation_data=(texts, labels)`) is packed first and
    its labels matched to the model's by name."""
    x, y = self._text_data(x, y)
    if isinstance(validation_data, tuple) and len(validation_data) == 2:
      validation_data = self._text_data(*validation_data)
    return super().fit(x, y, *args, validation_data=validation_data, **kwargs)

  def evaluate(self, x=None, y=None, *args, **kwargs):
    """Keras' `evaluate`; raw text is packed first and its labels matched by name."""
    x, y = self._text_data(x, y)
    return super().evaluate(x, y, *args, **kwargs)


def is_text(x: Any) -> bool:
  """Whether `x` is raw text: a str, strs, (text, text) pairs, or a string tensor/array."""
  if isinstance(x, str):
    return True
  dtype = getattr(x, "dtype", None)
  if dtype is not None:
    kind = getattr(dtype, "kind", None)  # NumPy's; TensorFlow's dtypes have `name`.
    return kind in ("U", "S") or getattr(dtype, "name", "") == "string" or (
        kind == "O" and getattr(x, "size", 0) > 0 and isinstance(x.flat[0], (str, bytes)))
  if isinstance(x, (list, tuple)) and x:
    first = x[0]
    return isinstance(first, str) or (isinstance(first, (list, tuple)) and len(first) == 2 and
                                      all(isinstance(t, str) for t in first))
  return False

