"""Tests for tfbert.text.feature_checks: a model's features checked against its config
before Keras sees them and where the model runs (sweep 6 of issue 47)."""

import numpy as np
import pytest
import tensorflow as tf

from tests.inference import tiny_models
from tfbert import BertClassifier, BertTokenClassifier
from tfbert.config import BertConfig
from tfbert.text import feature_checks


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
    ({**_features(), "input_ids": np.where(np.arange(10).reshape(2, 5) == 7, 5.7,
                                            1037).astype(np.float32)}, TypeError,
     # The first value that is cut, where it is: the message quoted a made-up "1037.7
     # read as 1037" that read like the caller's data (sweep 33, A38).
     r"x\['input_ids'\] is float32: token ids are integers .*cut off \(e\.g\. 5\.7 at "
     r"\[1, 2\] would be read as 5\)"),
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
    ([[]], ValueError, r"x \(read as input_ids\) has sequence length 0 \(shape \[1, 0\]\): a "
     "sequence needs at least one token"),
    ({"input_ids": [[], []], "input_mask": [[], []]}, ValueError, r"x\['input_ids'\] has "
     r"sequence length 0 \(shape \[2, 0\]\)"),
    ({"input_ids": np.zeros((2, 0), np.int32)}, ValueError, r"x\['input_ids'\] has sequence "
     "length 0"),
], ids=["float_ids", "beyond_positions", "beyond_vocab", "negative_id", "token_type",
        "mask_value", "mask_shape", "rank_3", "hugging_face_name", "unknown_name",
        "ragged_in_dict", "ragged_ids", "flat_ids", "list_of_dicts", "empty_row",
        "empty_rows_in_dict", "empty_array"])
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


def test_a_dataset_of_ragged_ids_says_to_pad_them(classifier):
  """Sweep 30, B32: TensorFlow's "Failed to convert elements of tf.RaggedTensor" from inside
  the encoder named neither the feature nor the fix."""
  ids = tf.ragged.constant([[5, 6, 7], [8, 9]], dtype=tf.int32)
  data = tf.data.Dataset.from_tensor_slices({"input_ids": ids}).batch(2)
  with pytest.raises(TypeError, match=r"x\['input_ids'\] is ragged \(rows of different "
                                      r"lengths\): pad every row to one length S"):
    classifier.predict(data, verbose=0)


def test_a_dataset_longer_than_the_positions_is_refused_naming_the_config_field(classifier):
  """Batches of S 5, then 70: the second is traced with S unknown, checked in the graph."""
  def rows():
    yield _features(length=5)
    yield _features(length=70)

  data = tf.data.Dataset.from_generator(rows, output_signature={
      name: tf.TensorSpec([None, None], tf.int32) for name in feature_checks.FEATURE_NAMES})
  with pytest.raises(ValueError, match=r"BertClassifier.predict: a batch's input_ids has "
                                       r"sequence length 70, beyond the 64 positions of the "
                                       r"model \(max_position_embeddings in the config\)"):
    classifier.predict(data, verbose=0)


def test_a_dataset_of_empty_sequences_is_refused_by_the_graphs_checks(classifier):
  """Issue 47: a batch of S 0 (traced with S unknown) is asserted in the graph, naming
  sequence length 0, as the concrete inputs are before Keras sees them."""
  def rows():
    yield _features(length=5)
    yield _features(length=0)

  data = tf.data.Dataset.from_generator(rows, output_signature={
      name: tf.TensorSpec([None, None], tf.int32) for name in feature_checks.FEATURE_NAMES})
  with pytest.raises(ValueError, match=r"BertClassifier.predict: a batch's input_ids has "
                                       r"sequence length 0: a sequence needs at least one "
                                       r"token"):
    classifier.predict(data, verbose=0)


@pytest.mark.parametrize("changes, message", [
    (dict(input_ids=((0, 0), 40000)), r"features\['input_ids'\] holds 40000 at \[0, 0\], "
     r"outside the vocabulary \[0, 30522\) \(vocab_size in the config\)"),
    (dict(segment_ids=((1, 2), 16)), r"features\['segment_ids'\] holds 16 at \[1, 2\], outside "
     r"the token types \[0, 16\) \(type_vocab_size in the config\)")])
def test_a_direct_eager_call_names_a_value_outside_the_model(classifier, changes, message):
  """`model(features)`, the call README shows, gave TensorFlow's GatherV2 error (sweep 21
  P1); a trace outside Keras' calls (a user's own step) still gets no assert op."""
  with pytest.raises(ValueError, match=message):
    classifier(_features(**changes))
  graph = tf.function(classifier).get_concrete_function(
      {name: tf.TensorSpec([None, None], tf.int32) for name in _features()}).graph
  assert not [op for op in graph.get_operations() if op.type == "Assert"]


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
  real = feature_checks.graph_checked

  def spy(encoder, features):
    seen.append(getattr(encoder, "_tfbert_graph_checks", False))
    return real(encoder, features)

  monkeypatch.setattr(feature_checks, "graph_checked", spy)
  for jit_compile in (True, False):
    model = BertClassifier(BertConfig(**tiny_models.TINY), 2)
    model.build()
    model.compile(optimizer=keras.optimizers.Adam(1e-3), jit_compile=jit_compile)
    model.predict(_features(), verbose=0)
    assert seen and all(checked is not jit_compile for checked in seen)
    seen.clear()


def test_an_object_array_of_features_is_named_as_such():
  config = BertConfig(**tiny_models.TINY)
  with pytest.raises(TypeError, match=r"x \(read as input_ids\) holds strings: raw text"):
    feature_checks.check_specs({"input_ids": np.array([[None, "a"]], dtype=object)}, config,
                               where={"input_ids": "x (read as input_ids)"})
  with pytest.raises(TypeError, match=r"input_ids'\] is an array of Python objects \(dtype "
                                      r"object\): token ids are integers.*astype\('int32'\)"):
    feature_checks.check_specs({"input_ids": np.array([[1, 2]], dtype=object)}, config)


def test_a_list_of_neither_ids_nor_features_offers_raw_text_only_when_the_caller_reads_it():
  """Sweep 16 P2: the hint offered raw text to every call, fit's included."""
  config = BertConfig(**tiny_models.TINY)
  with pytest.raises(TypeError, match=r"x is a list of list; pass features as .* or the ids "
                                      r"alone as .*\(or an int array \[B, S\]\)$"):
    feature_checks.checked_features([["a", "b", "c"]], config, feature_checks.FEATURE_NAMES)
  with pytest.raises(TypeError, match=r"\[B, S\]\), or raw texts as a list of str$"):
    feature_checks.checked_features([["a", "b", "c"]], config, feature_checks.FEATURE_NAMES,
                                    hint=", or raw texts as a list of str")


def test_next_sentence_labels_outside_0_and_1_are_named():
  """Sweep 25 P1: BertPretrainer.fit with a next_sentence_labels of 2 ended in TensorFlow's
  SparseSoftmaxCrossEntropyWithLogits error, while its masked_lm_ids were named; [B] labels,
  one per sequence, pass the [B, S] rank check of the features."""
  config = BertConfig(vocab_size=19, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=9, max_position_embeddings=16)
  ids = np.ones([3, 5], np.int32)
  features = {"input_ids": ids, "next_sentence_labels": np.array([0, 1, 1], np.int32)}
  feature_checks.check_specs(features, config, None, "x")
  feature_checks.check_values(features, config, {"input_ids": "x['input_ids']",
                                                 "next_sentence_labels": "x['nsl']"})
  features["next_sentence_labels"] = np.array([0, 2, 1], np.int32)
  with pytest.raises(ValueError, match=r"^x\['nsl'\] holds 2 at \[1\], outside the "
                                       r"next-sentence labels 0 \(B follows A\) and 1"):
    feature_checks.check_values(features, config, {"input_ids": "x['input_ids']",
                                                   "next_sentence_labels": "x['nsl']"})
