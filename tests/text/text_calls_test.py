"""Tests for tfbert.text.text_calls: Keras' predict and a classifier's fit/evaluate take raw
text (packed as the tools pack it; labels by name; validation data as a tuple or a list; no
texts: zero rows or a refusal), features are checked before Keras sees them (a dataset's in
the graph of Keras' calls, never under XLA), and a model without text settings says how to
get them."""

import numpy as np
import pytest
import tensorflow as tf

from tests.inference import tiny_models
from tfbert import BertClassifier, BertTokenClassifier
from tfbert.classifier import classifier_features, glue_data
from tfbert.config import BertConfig
from tfbert.inference import raw_text
from tfbert.text import text_calls

PAIRS = tiny_models.PAIRS


@pytest.mark.parametrize("x, expected", [
    ("a text", True), (["a", "b"], True), ([("a", "b")], True), (np.array(["a"]), True),
    (np.array([b"a"], dtype=object), True), (tf.constant(["a"]), True),
    ({"input_ids": np.zeros((1, 3))}, False), (np.zeros((2, 3), np.int32), False),
    ([1, 2], False), ([], True), (tf.zeros([2, 3], tf.int32), False)])
def test_what_counts_as_raw_text(x, expected):
  assert text_calls.is_text(x) is expected


def test_predict_on_raw_text_equals_predict_on_the_tools_features():
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 3), 17)
  features = classifier_features.examples_to_features(
      [glue_data.InputExample(str(i), i, i + 1, a, b or None) for i, (a, b) in enumerate(PAIRS)],
      raw_text.tokenizer_of(model), 17, is_pair=True)
  np.testing.assert_array_equal(model.predict(PAIRS, verbose=0)["logits"],
                                model.predict(features, verbose=0)["logits"])


@pytest.mark.slow  # ~4 s: 30 training steps.
def test_fit_on_text_label_pairs_learns_them_with_labels_by_name():
  import keras  # pylint: disable=import-outside-toplevel
  model = tiny_models.with_text(BertClassifier(
      BertConfig(**tiny_models.TINY), 2, labels=("negative", "positive"), dropout_rate=0.0), 9)
  texts = ["good fun film", "awful dull film", "good great", "dull awful"] * 2
  labels = ["positive", "negative", "positive", "negative"] * 2
  model.compile(optimizer=keras.optimizers.Adam(3e-3))
  model.fit(texts, labels, batch_size=4, epochs=15, verbose=0)
  assert [r["label"] for r in model.classify(texts[:4])] == labels[:4]
  # Ids are labels too; evaluate reads the same way.
  assert model.evaluate(texts, [1, 0, 1, 0] * 2, verbose=0, return_dict=True)["accuracy"] == 1.0
  with pytest.raises(ValueError, match=r"labels\[1\] 'neutral' is not one of the model's "
                                       r"labels \['negative', 'positive'\]"):
    model.fit(texts[:2], ["positive", "neutral"], verbose=0)
  with pytest.raises(ValueError, match="2 texts but 3 labels"):
    model.fit(texts[:2], labels[:3], verbose=0)


def test_a_model_without_text_settings_says_how_to_give_it_some():
  model = BertClassifier(BertConfig(**tiny_models.TINY), 2)
  with pytest.raises(ValueError, match="BertClassifier has no vocabulary attached.*tfbert.load"):
    raw_text.classify(model, ["a"])


def _compiled(num_classes=2):
  import keras  # pylint: disable=import-outside-toplevel
  model = tiny_models.with_text(BertClassifier(
      BertConfig(**tiny_models.TINY), num_classes,
      labels=("0", "1") if num_classes > 1 else None), 9)
  model.compile(optimizer=keras.optimizers.Adam(1e-3))
  return model


def test_validation_data_of_raw_text_is_packed_given_as_a_tuple_or_a_list():
  model = _compiled()
  history = model.fit(["good", "bad"], ["1", "0"], validation_data=[["ok"], ["1"]], verbose=0)
  assert "val_loss" in history.history
  for wrap in (tuple, list):
    with pytest.raises(ValueError, match=r"validation_data\[1\]\[0\] 'maybe' is not one of "
                                         "the model's labels"):
      model.fit(["good"], ["1"], validation_data=wrap([["ok"], ["maybe"]]), verbose=0)
    with pytest.raises(ValueError, match=r"no texts in validation_data\[0\]"):
      model.fit(["good"], ["1"], validation_data=wrap([[], []]), verbose=0)


def test_no_texts_are_refused_by_fit_and_evaluate_and_predict_as_zero_rows():
  model = _compiled()
  for call in (model.fit, model.evaluate):
    with pytest.raises(ValueError, match="no texts in x"):
      call([], [], verbose=0)
  outputs = model.predict([], verbose=0)
  assert outputs["logits"].shape == (0, 2) and outputs["logits"].dtype == np.float32
  tagger = tiny_models.with_text(BertTokenClassifier(BertConfig(**tiny_models.TINY),
                                                     tiny_models.TAGS), 7)
  assert tagger.predict([], verbose=0)["logits"].shape == (0, 7, len(tiny_models.TAGS))


# --- features checked before Keras sees them (issue 47) -------------------------------------

@pytest.fixture(scope="module")
def classifier():
  """A tiny classifier (64 positions, vocab 30522, 16 token types), never trained."""
  import keras  # pylint: disable=import-outside-toplevel
  model = BertClassifier(BertConfig(**tiny_models.TINY), 2)
  model.build()
  model.compile(optimizer=keras.optimizers.Adam(1e-3))
  return model


def _features(batch=2, length=5, **changes):
  features = {"input_ids": np.full((batch, length), 1037, np.int32),
              "input_mask": np.ones((batch, length), np.int32),
              "segment_ids": np.zeros((batch, length), np.int32)}
  for name, (position, value) in changes.items():
    features[name][position] = value
  return features


@pytest.mark.parametrize("x, error, message", [
    ({**_features(), "input_ids": np.full((2, 5), 1037.7, np.float32)}, TypeError,
     r"x\['input_ids'\] is float32: token ids are integers .*1037.7 read as 1037"),
    (_features(length=100), ValueError, r"x\['input_ids'\] has sequence length 100, outside "
     r"\[1, 64\]: the model has 64 positions \(max_position_embeddings in the config\)"),
    (_features(input_ids=((0, 1), 40000)), ValueError, r"x\['input_ids'\] holds 40000 at "
     r"\[0, 1\], outside the vocabulary \[0, 30522\) \(vocab_size in the config\)"),
    (_features(input_ids=((1, 4), -3)), ValueError, r"x\['input_ids'\] holds -3 at \[1, 4\]"),
    (_features(segment_ids=((0, 0), 16)), ValueError, r"x\['segment_ids'\] holds 16 at \[0, 0\], "
     r"outside the token types \[0, 16\) \(type_vocab_size in the config\)"),
    (_features(input_mask=((0, 0), 3)), ValueError, r"x\['input_mask'\] holds 3 .* mask values "
     "0 and 1"),
    ({**_features(), "input_mask": np.ones((2, 4), np.int32)}, ValueError,
     r"x\['input_mask'\] has shape \[2, 4\] but x\['input_ids'\] has \[2, 5\]"),
    ({"input_ids": np.ones((2, 5, 1), np.int32)}, ValueError,
     r"x\['input_ids'\] has shape \[2, 5, 1\]: features are \[B, S\]"),
    ({"input_ids": np.ones((2, 5), np.int32), "attention_mask": np.ones((2, 5), np.int32)},
     ValueError, r"x has attention_mask \(Hugging Face's name; tfbert's is input_mask\), which "
     "the model does not read"),
    ({**_features(), "label": np.zeros(2)}, ValueError, "x has label, which the model does "
     "not read: its features are input_ids, input_mask, segment_ids"),
    ({"input_ids": [[101, 2204, 102], [101, 102]]}, ValueError, r"x\['input_ids'\] has rows of "
     r"different lengths \[2, 3\]: pad them"),
    ([[101, 2204, 102], [101, 102]], ValueError, "x has rows of different lengths"),
    ([101, 2204, 102], TypeError, r"x is a list of int: one sequence's ids go as \[\[...\]\]"),
    ([{"input_ids": [[1]]}], TypeError, r"x is a list of dict; pass features as a dict"),
], ids=["float_ids", "beyond_positions", "beyond_vocab", "negative_id", "token_type",
        "mask_value", "mask_shape", "rank_3", "hugging_face_name", "unknown_name",
        "ragged_in_dict", "ragged_ids", "flat_ids", "list_of_dicts"])
def test_concrete_features_are_refused_before_keras_naming_the_input_and_the_limit(
    classifier, x, error, message):
  """Sweep 6 A29, A31, A32: a float id was truncated (1037.7 read as 1037), and S or an id
  beyond the model failed inside TensorFlow's gather ("Graph execution error")."""
  for call in (classifier.predict, classifier.evaluate):
    with pytest.raises(error, match=message):
      call(x, verbose=0)
  with pytest.raises(error, match=message):
    classifier.fit(x, np.zeros(2, np.int32), verbose=0)


def test_equal_length_lists_of_ids_are_read_as_input_ids(classifier):
  """Sweep 6 A37: Keras' "Unrecognized data type" for a list of id lists."""
  ids = [[101, 2204, 102], [101, 2023, 102]]
  want = classifier.predict({"input_ids": np.array(ids, np.int32)}, verbose=0)["logits"]
  np.testing.assert_array_equal(classifier.predict(ids, verbose=0)["logits"], want)
  np.testing.assert_array_equal(classifier.predict(np.array(ids), verbose=0)["logits"], want)


def test_a_dataset_of_strings_is_refused_naming_the_list_of_texts_it_takes(classifier):
  """Sweep 6 A35: "argument of type 'SymbolicTensor' is not iterable" from the encoder."""
  data = tf.data.Dataset.from_tensor_slices((["good", "bad"], [1, 0])).batch(2)
  for call in (classifier.evaluate, classifier.fit, classifier.predict):
    with pytest.raises(TypeError, match=r"x is a tf.data.Dataset of strings: BertClassifier "
                                        r"packs raw text only from a list of texts"):
      call(data, verbose=0)
  with pytest.raises(TypeError, match="validation_data is a tf.data.Dataset of strings"):
    classifier.fit(_features(), np.zeros(2, np.int32), validation_data=data, verbose=0)


@pytest.mark.parametrize("change, message", [
    (dict(input_ids=((0, 1), 40000)), r"BertClassifier.{call}: a batch's input_ids holds "
     r"40000, outside the vocabulary \[0, 30522\) \(vocab_size in the config\)"),
    (dict(input_ids=((1, 0), -3)), r"BertClassifier.{call}: a batch's input_ids holds -3"),
    (dict(segment_ids=((0, 0), 16)), r"a batch's segment_ids holds 16, outside the token "
     r"types \[0, 16\)"),
], ids=["beyond_vocab", "negative", "token_type"])
def test_dataset_values_outside_the_model_are_refused_by_the_graphs_checks(
    classifier, change, message):
  """The values of a tf.data batch are asserted in the graph of Keras' calls: an id past
  the vocabulary failed in TensorFlow's gather, and a negative one read a row from the end
  of the table, silently (measured before the checks)."""
  features = _features(**change)
  for call, data in (("predict", features), ("evaluate", (features, np.zeros(2, np.int32)))):
    with pytest.raises(ValueError, match=message.format(call=call)):
      getattr(classifier, call)(tf.data.Dataset.from_tensors(data), verbose=0)


def test_a_dataset_longer_than_the_positions_is_refused_naming_the_config_field(classifier):
  """Batches of S 5, then 70: the second is traced with S unknown, checked in the graph."""
  def rows():
    yield _features(length=5)
    yield _features(length=70)

  data = tf.data.Dataset.from_generator(rows, output_signature={
      name: tf.TensorSpec([None, None], tf.int32) for name in text_calls.FEATURE_NAMES})
  with pytest.raises(ValueError, match=r"BertClassifier.predict: a batch's input_ids has "
                                       r"sequence length 70, beyond the 64 positions of the "
                                       r"model \(max_position_embeddings in the config\)"):
    classifier.predict(data, verbose=0)


def test_every_model_class_checks_its_features():
  from tfbert import BertEncoder, BertPretrainer, BertSpanLabeler  # pylint: disable=C0415
  from tfbert.embeddings.sentence_encoder import BertSentenceEncoder  # pylint: disable=C0415
  config = BertConfig(**tiny_models.TINY)
  for model in (BertEncoder(config), BertPretrainer(config), BertSpanLabeler(config),
                BertTokenClassifier(config, tiny_models.TAGS), BertSentenceEncoder(config)):
    with pytest.raises(ValueError, match=r"x\['input_ids'\] holds 30522 at \[0, 1\], outside "
                                         r"the vocabulary \[0, 30522\)"):
      model.predict(_features(input_ids=((0, 1), 30522)), verbose=0)


def test_xla_compiled_calls_carry_no_asserts(monkeypatch):
  """XLA drops asserts (logging "Ignoring Assert operator"): a model compiled with
  jit_compile runs its Keras calls without them; a plain one with them."""
  import keras  # pylint: disable=import-outside-toplevel
  seen = []
  real = text_calls.graph_checked

  def spy(encoder, features):
    seen.append(getattr(encoder, "_tfbert_graph_checks", False))
    return real(encoder, features)

  monkeypatch.setattr(text_calls, "graph_checked", spy)
  for jit_compile in (True, False):
    model = BertClassifier(BertConfig(**tiny_models.TINY), 2)
    model.build()
    model.compile(optimizer=keras.optimizers.Adam(1e-3), jit_compile=jit_compile)
    model.predict(_features(), verbose=0)
    assert seen and all(checked is not jit_compile for checked in seen)
    seen.clear()
