"""Tests for tfbert.text.text_calls: Keras' predict and a classifier's fit/evaluate take raw
text (packed as the tools pack it; labels by name; validation data as a tuple or a list; no
texts: zero rows or a refusal), features are checked before Keras sees them (a dataset's in
the graph of Keras' calls, never under XLA), and a model without text settings says how to
get them."""

import numpy as np
import pytest
import tensorflow as tf

from tests.inference import tiny_models
from tfbert import BertClassifier, BertTokenClassifier, with_gradient_accumulation
from tfbert.classifier import classifier_features, glue_data
from tfbert.config import BertConfig
from tfbert.inference import raw_text, text_settings
from tfbert.text import text_calls

PAIRS = tiny_models.PAIRS


@pytest.mark.parametrize("x, expected", [
    ("a text", True), (["a", "b"], True), ([("a", "b")], True), (np.array(["a"]), True),
    (np.array([b"a"], dtype=object), True), (tf.constant(["a"]), True),
    ({"input_ids": np.zeros((1, 3))}, False), (np.zeros((2, 3), np.int32), False),
    ([1, 2], False), ([], True), (tf.zeros([2, 3], tf.int32), False),
    # Texts with a missing one first are texts; ids stay ids.
    ([None, "good"], True), (np.array([np.nan, "good"], dtype=object), True),
    (np.array([[1, 2]], dtype=object), False), ([[1, 2], [3, 4]], False)])
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


@pytest.mark.slow  # ~4 s: three fits.
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
  # Of unknown arity before, trained on single texts it reads single texts from now on
  # (it took pairs in predict and in a later fit without a word: sweep 26, B6).
  assert text_settings.settings_of(model).is_pair is False
  with pytest.raises(ValueError, match="reads single texts: pass x as"):
    model.predict([("good", "bad")], verbose=0)
  pairs = _compiled()
  pairs.fit([("good", "fun")], ["1"], verbose=0)
  assert text_settings.settings_of(pairs).is_pair is True
  with pytest.raises(ValueError, match="reads sentence pairs"):
    pairs.fit(["good"], ["1"], verbose=0)


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_validation_data_without_labels_and_a_batch_size_below_1_are_refused():
  """Sweep 19: `validation_data=(texts,)` got Keras' "Unrecognized data type" of its x
  (P2), and `predict(batch_size=0)` ran at Keras' default while `classify(batch_size=0)` is
  refused (S2); both are refused naming what to pass, for raw text and features alike."""
  model = _compiled()
  features = raw_text.features_of_texts(model, ["ok"])
  for unlabelled in ((["ok"],), [features]):
    with pytest.raises(ValueError, match=r"^validation_data holds no labels \(a 1-tuple\): "
                                         r"pass validation_data=\(x, y\)"):
      model.fit(["good"], ["1"], validation_data=unlabelled, verbose=0)
  for x in (["good"], features):
    for call in (lambda **kw: model.predict(x, verbose=0, **kw),
                 lambda **kw: model.evaluate(x, [0], verbose=0, **kw)):
      with pytest.raises(ValueError, match=r"^batch_size must be an int >= 1, got 0$"):
        call(batch_size=0)
  assert model.predict(features, batch_size=np.int64(1), verbose=0)["logits"].shape == (1, 2)


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


def test_a_dataset_of_strings_is_refused_naming_the_list_of_texts_it_takes():
  """Sweep 6 A35: "argument of type 'SymbolicTensor' is not iterable" from the encoder."""
  classifier = _compiled()
  data = tf.data.Dataset.from_tensor_slices((["good", "bad"], [1, 0])).batch(2)
  for call in (classifier.evaluate, classifier.fit, classifier.predict):
    with pytest.raises(TypeError, match=r"x is a tf.data.Dataset of strings: BertClassifier "
                                        r"packs raw text only from a list of texts"):
      call(data, verbose=0)
  with pytest.raises(TypeError, match="validation_data is a tf.data.Dataset of strings"):
    classifier.fit({"input_ids": np.full((2, 5), 1037, np.int32)}, np.zeros(2, np.int32),
                   validation_data=data, verbose=0)



def _shapes(outputs, rows=None):
  """The outputs' structure of (shape, with its rows replaced by `rows` when given; dtype)."""
  import keras  # pylint: disable=import-outside-toplevel
  return keras.tree.map_structure(lambda value: (
      value.shape if rows is None else (rows,) + value.shape[1:], value.dtype), outputs)


def test_predict_on_features_of_no_rows_returns_outputs_of_no_rows():
  """Sweep 7 A31: Keras' UnboundLocalError "cannot access local variable 'batch_outputs'".
  An encoder: outputs of two ranks and a list, each shaped and typed as one example's."""
  from tfbert import BertEncoder  # pylint: disable=import-outside-toplevel
  model = BertEncoder(BertConfig(**tiny_models.TINY))
  one = model.predict({"input_ids": np.ones((1, 16), np.int64)}, verbose=0)
  for x in ({"input_ids": np.zeros((0, 16), np.int64)}, tf.zeros([0, 16], tf.int64)):
    assert _shapes(model.predict(x, verbose=0)) == _shapes(one, rows=0)


def test_fit_and_evaluate_on_features_of_no_rows_are_refused_naming_the_input():
  """Keras ran them on nothing without a word (evaluate returned [])."""
  model = _compiled()
  empty, one = {"input_ids": np.zeros((0, 5), np.int32)}, {"input_ids": np.ones((1, 5), np.int32)}
  for call in (model.fit, model.evaluate):
    with pytest.raises(ValueError, match=r"no examples in x: its input_ids have 0 rows, and "
                                         rf"BertClassifier.{call.__name__} needs at least one"):
      call(empty, np.zeros(0, np.int32), verbose=0)
  with pytest.raises(ValueError, match=r"no examples in validation_data\[0\]"):
    model.fit(one, np.ones(1, np.int32), validation_data=(empty, np.zeros(0, np.int32)),
              verbose=0)


def _no_batch(call, model, data):
  data = data.filter(lambda *_: True).batch(2)  # Keras cannot know it is empty beforehand.
  with pytest.raises(ValueError, match=r"x gave no batch \(an empty dataset or generator\): "
                                       rf"BertClassifier.{call} needs at least one example"):
    getattr(model, call)(data, verbose=0)


_EMPTY = {"input_ids": np.zeros((0, 5), np.int32)}


def test_a_dataset_that_gives_no_batch_is_refused_by_predict_and_evaluate():
  """predict failed in Keras' own code; evaluate returned [] without a word."""
  import keras  # pylint: disable=import-outside-toplevel
  model = _compiled()
  _no_batch("predict", model, tf.data.Dataset.from_tensor_slices(_EMPTY))
  _no_batch("evaluate", model, tf.data.Dataset.from_tensor_slices(
      (_EMPTY, np.zeros(0, np.int32))))
  # Callbacks given in their place reach Keras with the count; no epoch left runs nothing.
  one = tf.data.Dataset.from_tensors(({"input_ids": np.ones((1, 5), np.int32)},
                                      np.ones(1, np.int32)))
  seen = []
  model.evaluate(one, None, None, 0, None, None, [keras.callbacks.LambdaCallback(
      on_test_batch_end=lambda batch, logs: seen.append(batch))])
  assert seen == [0]
  model.fit(one, epochs=1, initial_epoch=1, verbose=0)


@pytest.mark.slow  # ~4 s: Keras builds the training step before it finds no batch.
def test_fit_on_a_dataset_that_gives_no_batch_is_refused():
  """Keras' fit trained nothing without a word (a warning that the input ran out)."""
  _no_batch("fit", _compiled(), tf.data.Dataset.from_tensor_slices(
      (_EMPTY, np.zeros(0, np.int32))))


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_keras_calls_and_the_text_calls_read_the_same_text_containers():
  """`predict(pd.Series(texts))` failed with AttributeError "'Series' object has no attribute
  'flat'" while `classify` refused it (sweep 8, K19): a 1-D array-like of str (a pandas
  Series or Index) is texts (or pairs) for both; what neither reads as one is refused by
  both with one message, never left to Keras."""
  pd = pytest.importorskip("pandas")  # Not a dependency: read through np.asarray.
  model = _compiled()
  texts = ["good fun", "awful dull", "so so"]
  logits = model.predict(texts, verbose=0)["logits"]
  scores = [row["probabilities"] for row in model.classify(texts)]
  for given in (pd.Series(texts, index=[7, 3, 5]), pd.Series(texts, dtype="string"),
                pd.Index(texts), np.array(texts, dtype=object)):
    assert text_calls.is_text(given)
    np.testing.assert_array_equal(model.predict(given, verbose=0)["logits"], logits)
    assert [row["probabilities"] for row in model.classify(given)] == scores
  pairs = pd.Series(PAIRS)
  np.testing.assert_array_equal(model.predict(pairs, verbose=0)["logits"],
                                model.predict(PAIRS, verbose=0)["logits"])
  assert model.predict(pd.Series([], dtype=object), verbose=0)["logits"].shape == (0, 2)
  refused = [(pd.DataFrame({"text": texts, "label": texts}),
              r"got a DataFrame of shape \(3, 2\) \(pass one column: a 1-D sequence\)$"),
             (set(texts), "got a set$"), (dict.fromkeys(texts).keys(), "got a dict_keys$")]
  for given, ending in refused:
    for call, what in ((model.predict, "x"), (model.classify, "texts")):
      with pytest.raises(TypeError, match=rf"^{what} must be a str or a list of str \(or of "
                                          rf"\(text_a, text_b\) pairs\), {ending}"):
        call(given, verbose=0)


def _every_model_kind():
  import keras  # pylint: disable=import-outside-toplevel

  from tfbert import BertPretrainer, BertSpanLabeler  # pylint: disable=import-outside-toplevel
  from tfbert.embeddings.sentence_encoder import BertSentenceEncoder  # pylint: disable=import-outside-toplevel
  config = BertConfig(**tiny_models.TINY)
  return keras, {"classifier": (BertClassifier(config, 2), "loss, accuracy"),
                 "pretrainer": (BertPretrainer(config), "loss, mlm_loss, mlm_accuracy"),
                 "span": (BertSpanLabeler(config), "loss"),
                 "tagger": (BertTokenClassifier(config, ("O", "B-x")), "loss"),
                 "encoder": (BertSentenceEncoder(config), "loss")}


def test_compile_refuses_a_loss_or_metrics_the_models_steps_would_ignore():
  keras, models = _every_model_kind()
  for kind, (model, reported) in models.items():
    for given, named in [({"loss": "mean_squared_error", "metrics": [keras.metrics.AUC()]},
                          "loss or metrics"),
                         ({"loss_weights": [1.0]}, "loss_weights"),
                         ({"weighted_metrics": ["accuracy"]}, "weighted_metrics")]:
      with pytest.raises(ValueError, match=(
          rf"{type(model).__name__}.compile takes no {named}: .* trains on its own loss and "
          rf"fit / evaluate report its own metrics \({reported}.*\).*compile\(optimizer=")):
        model.compile(optimizer="adam", **given)
      assert not model.compiled, kind
    model.compile(optimizer="adam", metrics=[], jit_compile=False)  # The README's: accepted.
    assert model.compiled, kind


def test_compile_refuses_keras_own_gradient_accumulation_and_names_tfberts():
  """Sweep 26 B3: every model compiled with keras.optimizers.Adam(gradient_accumulation_steps
  =2), which is wrong under tf.distribute and steps the schedule per micro-step, while
  tfbert.with_gradient_accumulation refused the same optimizer."""
  keras, models = _every_model_kind()
  for kind, (model, _) in models.items():
    builtin = keras.optimizers.Adam(gradient_accumulation_steps=2)
    for optimizer in (builtin, keras.optimizers.LossScaleOptimizer(builtin)):
      with pytest.raises(ValueError, match=(
          rf"{type(model).__name__}.compile: the optimizer .* accumulates with Keras' own "
          r"gradient_accumulation_steps=2.*tfbert\.with_gradient_accumulation\(optimizer, 2\)")):
        model.compile(optimizer=optimizer)
      assert not model.compiled, kind
    model.compile(optimizer=with_gradient_accumulation(keras.optimizers.Adam(), 2))
    assert model.compiled, kind


def test_a_compiled_model_loads_compiled_with_its_optimizer(tmp_path):
  import keras  # pylint: disable=import-outside-toplevel
  model = BertClassifier(BertConfig(**tiny_models.TINY), 2)
  model.build()
  model.compile(optimizer=keras.optimizers.SGD(0.25))
  model.save(tmp_path / "model.keras")
  loaded = keras.saving.load_model(tmp_path / "model.keras")
  assert loaded.compiled
  assert isinstance(loaded.optimizer, keras.optimizers.SGD)
  assert float(loaded.optimizer.learning_rate) == 0.25


@pytest.mark.parametrize("x", [np.array([None, "good", 3.5], dtype=object),
                               [None, "good", 3.5]])
def test_texts_with_other_items_are_refused_naming_each_by_index_and_value(x):
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  with pytest.raises(TypeError, match=r"x holds texts, but not only: x\[0\] is None \(NoneType\), "
                                      r"x\[2\] is 3.5 \(float\), not a str"):
    model.predict(x, verbose=0)
  model.compile(optimizer="adam")
  with pytest.raises(TypeError, match=r"x\[0\] is None \(NoneType\), x\[2\] is 3.5"):
    model.fit(x, ["0", "1", "0"], verbose=0)


WEIGHTS_REFUSED = (r"{kind} takes no sample_weight or class_weight \(got {given}\): {kind} "
                   r"trains and evaluates on the plain mean of its own per-example loss, so "
                   r"Keras' weights would be ignored")


def test_fit_and_evaluate_refuse_sample_and_class_weights_before_anything_runs():
  """Sweep 10 c150/c151: the steps dropped them (Keras makes sample weights of a
  class_weight too), so a fit with weights 0 trained as the plain one."""
  _, models = _every_model_kind()
  features = {"input_ids": np.ones((2, 3), np.int32)}
  for model, _ in models.values():
    kind = type(model).__name__
    model.compile(optimizer="adam")
    for call, kwargs, given in (
        (model.fit, {"sample_weight": np.zeros(2)}, r"fit\(sample_weight=...\)"),
        (model.fit, {"class_weight": {0: 0.0, 1: 1.0}}, r"fit\(class_weight=...\)"),
        (model.fit, {"validation_data": (features, np.zeros(2), np.ones(2))},
         r"validation_data\[2\] \(sample weights\)"),
        (model.evaluate, {"sample_weight": np.zeros(2)}, r"evaluate\(sample_weight=...\)")):
      with pytest.raises(ValueError, match=WEIGHTS_REFUSED.format(kind=kind, given=given)):
        call(features, np.zeros(2, np.int32), verbose=0, **kwargs)
    with pytest.raises(ValueError, match=r"got evaluate\(sample_weight=...\)"):
      model.evaluate(features, np.zeros(2, np.int32), None, 0, np.ones(2))  # By position.
    assert not model.optimizer.built, kind


def test_raw_text_fit_and_evaluate_refuse_weights_before_packing():
  model = _compiled()
  before = [w.numpy() for w in model.weights]
  texts, labels = ["good", "bad"], ["1", "0"]
  for call, kwargs, given in (
      (model.fit, {"sample_weight": [0.0, 0.0]}, r"fit\(sample_weight=...\)"),
      (model.fit, {"class_weight": {0: 0.0, 1: 0.0}, "sample_weight": [1.0, 1.0]},
       r"fit\(sample_weight=...\) and fit\(class_weight=...\)"),
      (model.fit, {"validation_data": [texts, labels, [1.0, 0.0]]},
       r"validation_data\[2\] \(sample weights\)"),
      (model.evaluate, {"sample_weight": [0.0, 0.0]}, r"evaluate\(sample_weight=...\)")):
    with pytest.raises(ValueError, match=WEIGHTS_REFUSED.format(kind="BertClassifier",
                                                                given=given)):
      call(texts, labels, verbose=0, **kwargs)
  for w, w0 in zip(model.weights, before):
    np.testing.assert_array_equal(w.numpy(), w0)


WORDS = [["bob", "smith", "runs"]]
TAGS = [["B-PER", "I-PER", "O"]]
NEITHER = r"^x is a list of list; pass features as a dict .* or the ids alone as .*\[B, S\]\)"


def test_what_x_may_be_is_told_per_call_never_an_input_the_call_refuses():
  """Sweep 16 P2: a tagger's fit on word lists was told to pass "raw texts as a list of str",
  which its fit then refused (raw text is read by its predict only)."""
  import keras  # pylint: disable=import-outside-toplevel
  tagger = tiny_models.with_text(BertTokenClassifier(BertConfig(**tiny_models.TINY),
                                                     ("O", "B-PER", "I-PER")), 9)
  tagger.compile(optimizer=keras.optimizers.Adam(1e-3))
  fit_hint = (r"; BertTokenClassifier reads raw text in predict only, not in fit or evaluate; "
              r"build x and y from words and tags .*tagging_features.make_features: x=its "
              r"\.inputs, y=\{'logits': its \.label_ids\}; or train on a CoNLL file with "
              r"tools/run_ner.py$")
  for call in (tagger.fit, tagger.evaluate):
    with pytest.raises(TypeError, match=NEITHER + fit_hint):
      call(WORDS, TAGS, verbose=0)
  with pytest.raises(TypeError, match=NEITHER.replace("^x", r"^validation_data\[0\]")
                     + fit_hint):
    tagger.fit(np.zeros((1, 3), np.int32), np.zeros((1, 3), np.int32),
               validation_data=(WORDS, TAGS), verbose=0)
  with pytest.raises(ValueError, match=r"reads raw text in predict only: .* packed from the "
                                       r"texts; build x and y from words and tags"):
    tagger.fit(["bob smith runs"], TAGS, verbose=0)
  texts = NEITHER + r", or raw texts as a list of str$"
  with pytest.raises(TypeError, match=texts):
    tagger.predict(WORDS, verbose=0)
  classifier = _compiled()  # Its fit and evaluate read raw text, as its predict does.
  for call in (classifier.fit, classifier.evaluate, classifier.predict):
    with pytest.raises(TypeError, match=texts):
      call(WORDS, *([] if call == classifier.predict else [[0]]), verbose=0)


def test_fit_of_a_model_without_a_features_builder_does_not_offer_raw_text():
  import keras  # pylint: disable=import-outside-toplevel

  from tfbert import BertSpanLabeler  # pylint: disable=import-outside-toplevel
  model = BertSpanLabeler(BertConfig(**tiny_models.TINY))
  model.compile(optimizer=keras.optimizers.Adam(1e-3))
  with pytest.raises(TypeError, match=NEITHER + r"; BertSpanLabeler reads raw text in predict "
                                                r"only, not in fit or evaluate$"):
    model.fit(WORDS, verbose=0)


def test_the_on_batch_calls_refuse_raw_text_naming_the_call_that_reads_it():
  """Sweep 22 P3: predict_on_batch / train_on_batch / test_on_batch said "x must be a dict
  ...; got a list" of a text model's texts, not that predict / fit / evaluate read them."""
  classifier = _compiled()
  texts, start = ["good", "bad"], r"^BertClassifier\.{} takes features, a dict .*, not raw text"
  for call, reads in (("predict_on_batch", r"predict\(texts\) \(or classify\(texts\)\)$"),
                      ("train_on_batch", r"fit\(texts, labels\)$"),
                      ("test_on_batch", r"evaluate\(texts, labels\)$")):
    args = (texts,) if call == "predict_on_batch" else (texts, ["1", "0"])
    with pytest.raises(TypeError, match=start.format(call) + ": raw text goes through "
                                        r"BertClassifier\." + reads):
      getattr(classifier, call)(*args)
  tagger = tiny_models.with_text(BertTokenClassifier(BertConfig(**tiny_models.TINY),
                                                     ("O", "B-PER")), 9)
  with pytest.raises(TypeError, match=r"predict\(texts\) \(or tag\(texts\)\)$"):
    tagger.predict_on_batch(texts)
  with pytest.raises(TypeError, match=r"^BertTokenClassifier\.train_on_batch takes features, "
                                      r".*, not raw text; BertTokenClassifier reads raw text "
                                      r"in predict only, not in fit or evaluate; build x"):
    tagger.train_on_batch(texts, np.zeros((2, 9), np.int32))


def test_calling_a_model_on_raw_text_names_the_call_that_reads_it():
  """Sweep 24 P2 (r108): model(["text"]) got Keras' "should be passed as a keyword argument"
  of the text; the check is a Python type check only, features still run."""
  classifier = _compiled()
  reads = (r"^BertClassifier\(\.\.\.\) takes features, a dict .*, not raw text: raw text goes "
           r"through BertClassifier\.predict\(texts\) \(or classify\(texts\)\)$")
  for texts in (["good", "bad"], "good", [("good", "bad")]):
    with pytest.raises(TypeError, match=reads):
      classifier(texts)
  with pytest.raises(TypeError, match=reads):
    classifier(features=["good"])
  outputs = classifier({"input_ids": np.ones((1, 4), np.int32)})
  assert tuple(outputs["logits"].shape) == (1, 2)


def test_a_callback_setting_the_learning_rate_of_a_schedule_is_refused_before_training():
  """Sweep 31, B19: ReduceLROnPlateau with create_optimizer's schedule trained an epoch, then
  Keras failed ("its learning rate is not settable"). Refused first, through the loss-scale
  and accumulation wrappers too; with a constant rate it is Keras' as before."""
  import keras  # pylint: disable=import-outside-toplevel

  import tfbert  # pylint: disable=import-outside-toplevel
  model = BertClassifier(BertConfig(**tiny_models.TINY), 2)
  model.build()
  features = {"input_ids": np.ones((2, 5), np.int32)}
  labels = np.array([0, 1], np.int32)
  before = [w.numpy() for w in model.weights]
  scheduled = tfbert.create_optimizer({"learning_rate": 1e-3, "num_train_steps": 10})
  for optimizer in (scheduled, keras.optimizers.LossScaleOptimizer(tfbert.create_optimizer(
      {"learning_rate": 1e-3, "num_train_steps": 10, "gradient_accumulation_steps": 2}))):
    model.compile(optimizer=optimizer)
    for callback in (keras.callbacks.ReduceLROnPlateau(), keras.callbacks.LearningRateScheduler(
        lambda epoch, rate: rate)):
      with pytest.raises(ValueError, match=rf"BertClassifier.fit: {type(callback).__name__} "
                                           r"sets the learning rate, but the optimizer's follows "
                                           r"a schedule \(.*\), which it cannot change"):
        model.fit(features, labels, epochs=2, verbose=0, callbacks=[callback])
  for w, w0 in zip(model.weights, before):
    np.testing.assert_array_equal(w.numpy(), w0)
  model.compile(optimizer=keras.optimizers.SGD(0.0))
  model.fit(features, labels, epochs=1, verbose=0, callbacks=[keras.callbacks.ReduceLROnPlateau(
      monitor="loss")])


@pytest.mark.slow  # About 4 s: a 2-step fit, an evaluate and a predict of a 1-layer model.
def test_fit_evaluate_and_predict_trace_their_step_once(monkeypatch):
  """Without a strategy Keras made the optimizer's slots (and an unbuilt model's weights) in
  the first trace of the step, and a tf.function whose first trace makes variables traces
  again: every fit traced train_step twice (a 3-step fit of a 2-layer model took 8-11 s for
  4 s), evaluate of an unbuilt model its test_step twice. Built first, once each, with the
  optimizer's variables named as the step names them."""
  import keras  # pylint: disable=import-outside-toplevel
  traces = {"train_step": 0, "test_step": 0, "predict_step": 0}
  for name in traces:
    original = getattr(BertClassifier, name)

    def counted(self, data, name=name, original=original):
      traces[name] += 1
      return original(self, data)

    monkeypatch.setattr(BertClassifier, name, counted)
  features = {"input_ids": np.ones((4, 5), np.int32)}
  labels = np.array([0, 1, 0, 1], np.int32)
  model = BertClassifier(BertConfig(**{**tiny_models.TINY, "num_hidden_layers": 1}), 2)
  model.compile(optimizer=keras.optimizers.Adam(1e-3))  # Unbuilt: built by the calls.
  model.evaluate(features, labels, batch_size=2, verbose=0)
  model.fit(features, labels, batch_size=2, epochs=1, verbose=0)
  model.predict(features, batch_size=2, verbose=0)
  assert traces == {"train_step": 1, "test_step": 1, "predict_step": 1}
  slots = [v.path for v in model.optimizer.variables]
  name = model.optimizer.name  # "adam", or "adam_<n>" after other tests' Adams.
  assert any(path.startswith(f"{name}/") and "word_embeddings" in path for path in slots), slots
