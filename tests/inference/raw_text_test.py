"""Tests for tfbert.inference.raw_text: every task model's raw-text call gives what its
SavedModel's raw-text signature gives on the same inputs (the export loaded back through
`tfbert.load`), the shipped MiniLM's `encode` gives the published similarities, fill-mask
reads the MLM head at the masks, and Keras' predict/fit take raw text with labels by name,
each label checked; a classifier of known arity (`is_pair`) refuses the other, as its export.

Tiny random models (1 layer, H 32) over the real uncased vocabulary: the property is the
code path (packing, chunking, windows, postprocessing), which any weights exercise."""

import re

import numpy as np
import pytest
import tensorflow as tf

import tfbert
from tests.inference import tiny_models
from tfbert import BertClassifier, BertPretrainer
from tfbert.checkpoints import pretrained
from tfbert.classifier import classifier_features, glue_data
from tfbert.config import BertConfig
from tfbert.embeddings import embedding_inference
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.inference import raw_text, text_settings
from tfbert.serving import export
from tfbert.text import tokenization

TEXTS, PAIRS, LABELS = tiny_models.TEXTS, tiny_models.PAIRS, tiny_models.LABELS
TINY, _with_text = tiny_models.TINY, tiny_models.with_text


@pytest.mark.slow  # The five exports (~18 s, built once: conftest.py).
def test_classify_equals_the_classify_text_signature(models, exports):
  mine = models["classifier"].classify(PAIRS, batch_size=2)
  theirs = exports["classifier"].classify(PAIRS)
  assert [r["label"] for r in mine] == [r["label"] for r in theirs]
  assert sorted(mine[0]["probabilities"]) == sorted(LABELS)
  for a, b in zip(mine, theirs):
    np.testing.assert_allclose([a["probabilities"][k] for k in LABELS],
                               [b["probabilities"][k] for k in LABELS], atol=1e-6)
    assert a["score"] == max(a["probabilities"].values())
  # The label is the most probable class of the model's own logits on the tool's packing.
  features = classifier_features.examples_to_features(
      [glue_data.InputExample(str(i), i, i + 1, a, b or None) for i, (a, b) in enumerate(PAIRS)],
      raw_text.tokenizer_of(models["classifier"]), 17, is_pair=True)
  logits = models["classifier"](features)["logits"].numpy()
  assert [r["label"] for r in mine] == [LABELS[i] for i in logits.argmax(1)]


def test_a_batch_of_short_texts_runs_at_its_length_bucket_with_the_outputs_of_s(
    models, monkeypatch):
  """The raw-text path runs the model on the batch cut to the bucket of its longest text
  (multiples of `export.TEXT_LENGTH_BUCKET`, or S), seen at the model's input with functions
  run eagerly: short pairs at 8 or 16 of S 17, a pair cut to S at 17. The probabilities
  equal those of the model on the same pairs padded to S (float32 sums of another length:
  within 1e-6)."""
  model = models["classifier"]
  seen = []
  served = type(model).served_outputs

  def spy(self, features):
    seen.append(tuple(features["input_ids"].shape))
    return served(self, features)

  monkeypatch.setattr(type(model), "served_outputs", spy)
  tf.config.run_functions_eagerly(True)
  try:
    short = model.classify([("x", "y z")])              # [CLS] x [SEP] y z [SEP]: 6.
    middle = model.classify(PAIRS[:2])                  # 11 and 6 tokens.
    model.classify([("word " * 40, "")])                # Truncated to S.
  finally:
    tf.config.run_functions_eagerly(False)
  assert seen == [(1, 8), (2, 16), (1, 17)] and export.TEXT_LENGTH_BUCKET == 8
  pairs = [("x", "y z"), *PAIRS[:2]]
  features = classifier_features.examples_to_features(
      [glue_data.InputExample(str(i), i, i + 1, a, b or None) for i, (a, b) in enumerate(pairs)],
      raw_text.tokenizer_of(model), 17, is_pair=True)
  assert features["input_ids"].shape == (3, 17)
  padded = tf.nn.softmax(model(features)["logits"]).numpy()
  cut = [[row["probabilities"][k] for k in LABELS] for row in short + middle]
  np.testing.assert_allclose(cut, padded, atol=1e-6)


@pytest.mark.slow  # The five exports (~18 s, built once: conftest.py).
def test_a_regression_classifier_gives_scores_as_its_signature(models, exports):
  mine = models["regression"].classify(PAIRS)
  theirs = exports["regression"].classify(PAIRS)
  assert list(mine[0]) == ["score"]
  np.testing.assert_allclose([r["score"] for r in mine], [r["score"] for r in theirs],
                             atol=1e-6)


@pytest.mark.slow  # The five exports (~18 s, built once: conftest.py).
def test_tag_equals_the_tag_text_signature(models, exports):
  mine = models["tagger"].tag(TEXTS, batch_size=3)
  assert mine == exports["tagger"].tag(TEXTS)
  assert any(mine)  # Some entity, so the offsets below are checked at all.
  for text, found in zip(TEXTS, mine):
    for entity in found:
      assert text[entity["start"]:entity["end"]] == entity["word"] != ""
      assert entity["entity_group"] in ("per", "loc")
  assert models["tagger"].tag("née café au lait") == mine[2]  # One text: its list.


@pytest.mark.slow  # The five exports (~18 s, built once: conftest.py).
def test_answer_equals_the_answer_question_signature_within_one_window(models, exports):
  questions = ["Who met?", "Where?", "What sat?"]
  contexts = ["Mira met Zyxwar in Oslo.", "née café au lait", "The cat sat on the mat!"]
  mine = models["span_labeler"].answer(questions, contexts)
  theirs = exports["span_labeler"].answer(list(zip(questions, contexts)))
  assert [r["answer"] for r in mine] == [r["answer"] for r in theirs]
  np.testing.assert_allclose([r["score"] for r in mine], [r["score"] for r in theirs],
                             rtol=1e-5)
  for context, row in zip(contexts, mine):
    assert context[row["start"]:row["end"]] == row["answer"] != ""


def test_a_long_context_is_answered_over_its_windows_with_offsets_into_it(models):
  context = " ".join(f"word{i} is here." for i in range(40))  # Many windows of S 20.
  model = models["span_labeler"]
  windows = raw_text.squad_features.convert_examples_to_features(
      [raw_text.squad_data.SquadExample("0", "Who?", context, ())],
      raw_text.tokenizer_of(model), raw_text.squad_features.FeatureConfig(20, 128, 5),
      log_every=0).features
  assert len(windows) > 5
  row = model.answer("Who?", context)
  assert context[row["start"]:row["end"]] == row["answer"] != ""
  # The best span over every window, found by brute force on the Keras model's logits
  # (each position scored in the window where it has the most context).
  best = -np.inf
  for window in windows:
    out = model({k: window_array(window, k) for k in ("input_ids", "input_mask",
                                                      "segment_ids")})
    start, end = (out[k].numpy()[0] for k in ("start_logits", "end_logits"))
    inside = np.flatnonzero((window.token_start_chars >= 0) & (window.token_is_max_context == 1))
    for s in inside:
      for e in inside[(inside >= s) & (inside < s + 30)]:
        if start[s] + end[e] > best:
          best, chars = start[s] + end[e], (int(window.token_start_chars[s]),
                                            int(window.token_end_chars[e]))
  assert (row["start"], row["end"]) == chars
  assert row["score"] == pytest.approx(best, rel=1e-5)


def test_a_blank_question_is_refused_naming_it(models):
  """Sweep 33, A63: answer("", context) gave a span and a score, where the SQuAD reader
  skips a blank question. Blank is no wordpiece: white space, zero-width spaces."""
  model = models["span_labeler"]
  with pytest.raises(ValueError, match=r"^the question is blank \(' '"):
    model.answer(" ", "The cat sat.")
  with pytest.raises(ValueError) as raised:
    model.answer(["Who?", "", "\u200b"], ["The cat sat."] * 3)
  assert re.search(r"questions\[1\] is blank \(''.*questions\[2\] is blank \('\\u200b'",
                   str(raised.value)), str(raised.value)
  with pytest.raises(ValueError, match=r"^questions\[1\]\[0\] is blank .*nothing to ask"):
    model.answer([("Who?", "The cat sat."), ("\t", "The cat sat.")])


def window_array(window, name):
  return np.asarray(getattr(window, name))[None]


@pytest.mark.slow  # The five exports (~18 s, built once: conftest.py).
def test_encode_equals_the_embed_text_signature(models, exports):
  mine = models["sentence_encoder"].encode(TEXTS, batch_size=3)
  np.testing.assert_allclose(mine, exports["sentence_encoder"].encode(TEXTS), atol=1e-6)
  assert mine.shape == (4, 32) and mine.dtype == np.float32
  np.testing.assert_allclose(models["sentence_encoder"].encode(TEXTS[0]), mine[0], atol=1e-7)


@pytest.mark.slow  # 3.5 s or more in the suite's profile (tracing, a run).
def test_the_shipped_minilm_encodes_as_embed_texts_and_the_published_similarities():
  # sentence-transformers' README quick start, all-MiniLM-L6-v2 in PyTorch, to 4 decimals.
  sentences = ["The weather is lovely today.", "It's so sunny outside!",
               "He drove to the stadium."]
  model = tfbert.load(pretrained.minilm_dir())
  assert isinstance(model, BertSentenceEncoder)
  settings = text_settings.settings_of(model)
  assert (settings.max_seq_length, settings.do_lower_case) == (256, True)
  embeddings = model.encode(sentences)
  published = np.array([[1.0, 0.6660, 0.1046], [0.6660, 1.0, 0.1411], [0.1046, 0.1411, 1.0]])
  np.testing.assert_allclose(model.similarity(embeddings, embeddings), published, atol=6e-5)
  direct = embedding_inference.embed_texts(
      model, tokenization.WordPieceTokenizer(settings.vocab_file, True), sentences, 256)
  np.testing.assert_allclose(embeddings, direct, atol=2e-6)


def test_fill_mask_ranks_the_mlm_heads_probabilities_at_each_mask():
  model = _with_text(BertPretrainer(BertConfig(**TINY)), 15)
  texts = ["Paris is the [MASK] of France.", "[MASK] and [MASK] ."]
  found = model.fill_mask(texts, top_k=3)
  assert [len(masks) for masks in found] == [1, 2]
  tokenizer = raw_text.tokenizer_of(model)
  vocab = tokenization.load_vocab(pretrained.minilm_vocab_file())
  # The masks by hand: [CLS] paris is the [MASK] of france . [SEP] and [CLS] [MASK] and
  # [MASK] . [SEP].
  rows = [["[CLS]", "paris", "is", "the", "[MASK]", "of", "france", ".", "[SEP]"],
          ["[CLS]", "[MASK]", "and", "[MASK]", ".", "[SEP]"]]
  ids = [[vocab.index(t) for t in row] + [0] * (15 - len(row)) for row in rows]
  logits = model({"input_ids": tf.constant(ids), "input_mask": tf.constant(
      [[1] * len(r) + [0] * (15 - len(r)) for r in rows]),
      "segment_ids": tf.zeros([2, 15], tf.int32)})["mlm_logits"].numpy().astype(np.float64)
  for row, positions in ((0, [4]), (1, [1, 3])):
    for mask, position in enumerate(positions):
      p = np.exp(logits[row, position] - logits[row, position].max())
      p /= p.sum()
      top = np.argsort(-p, kind="stable")[:3]
      assert [c["token"] for c in found[row][mask]] == top.tolist()
      assert [c["token_str"] for c in found[row][mask]] == [vocab[t] for t in top]
      np.testing.assert_allclose([c["score"] for c in found[row][mask]], p[top], rtol=1e-4)
  assert tokenizer.mask_id == vocab.index("[MASK]")
  with pytest.raises(ValueError, match=r"texts\[1\] has no \[MASK\]"):
    model.fill_mask(["a [MASK]", "no mask here"])


@pytest.mark.parametrize("call, error, message", [
    (lambda m: m.classify(None), TypeError, "texts must be a str or a list of str .*NoneType"),
    (lambda m: m.classify({"text": "a"}), TypeError, "got a dict"),
    (lambda m: m.classify([b"ok", b"\xff\xfe"]), ValueError, r"texts\[1\] is not UTF-8 text"),
    (lambda m: m.classify(["a", 3]), TypeError, r"texts\[1\] is a int, not a str"),
    (lambda m: m.classify(["a"], batch_size=0), ValueError, "batch_size must be an int >= 1"),
    # Sweep 6 A17: TensorFlow's "Error converting unicode string", naming no text.
    (lambda m: m.classify("bad \ud800 text"), ValueError, r"texts is not valid Unicode: "
     r"character 4, '\\ud800', is a lone surrogate \(in 'bad \\ud800 text'\); remove or "
     r"replace it"),
    (lambda m: m.classify(["ok", "x\udc00"]), ValueError, r"texts\[1\] is not valid Unicode: "
     r"character 1, '\\udc00'"),
    (lambda m: m.classify([("a", "b"), ("c", "\udc00y")]), ValueError, r"texts\[1\]\[1\] is "
     r"not valid Unicode: character 0"),
    (lambda m: m.predict(["ok", "x\ud800"], verbose=0), ValueError, r"x\[1\] is not valid "
     "Unicode"),
], ids=["none", "dict", "not_utf8", "not_str", "zero_batch", "surrogate", "surrogate_in_list",
        "surrogate_in_pair", "surrogate_in_predict"])
def test_inputs_that_are_not_texts_are_named(models, call, error, message):
  with pytest.raises(error, match=message):
    call(models["classifier"])


def test_fill_mask_takes_an_int_top_k():
  """Sweep 7 A11: NumPy's integers were refused ("top_k must be an int >= 1, got
  np.int64(2)")."""
  model = _with_text(BertPretrainer(BertConfig(**TINY)), 9)
  for top_k in (2.5, 2.0, True, "2", None):
    with pytest.raises(ValueError, match=rf"top_k must be an int >= 1, got {top_k!r}"):
      model.fill_mask("a [MASK]", top_k=top_k)
  assert model.fill_mask("a [MASK]", top_k=np.int64(2)) == model.fill_mask("a [MASK]", top_k=2)


def test_every_batch_size_is_an_int_numpy_integers_too(models):
  """Sweep 7 A10: classify(texts, batch_size=np.int64(2)) was refused, as every call's."""
  classifier = models["classifier"]
  assert (classifier.classify(TEXTS, batch_size=np.int64(2), verbose=0)
          == classifier.classify(TEXTS, batch_size=2, verbose=0))
  assert [(s.start, s.stop) for s in raw_text.batches(5, np.uint8(2), 0)] == [
      (0, 2), (2, 4), (4, 5)]
  for batch_size in (2.0, True, np.bool_(True), "2", np.float64(2), 0, np.int64(-1)):
    with pytest.raises(ValueError, match=rf"batch_size must be an int >= 1, got "
                                         rf"{re.escape(repr(batch_size))}"):
      list(raw_text.batches(5, batch_size))


@pytest.mark.parametrize("labels, message", [
    ([0.5, float("nan")], r"labels\[1\] nan is not a finite real number: this classifier is a "
                          r"regression \(one output\)"),
    ([float("inf")], r"labels\[0\] inf is not a finite"),
    (["high", "low"], r"labels\[0\] 'high' is not a finite real number"),
    ([b"0.5"], r"labels\[0\] '0.5' is not a finite"),
    ([1.0, True], r"labels\[1\] True is not a finite"),
    ([None], r"labels\[0\] None is not a finite"),
    (np.array([[0.5], [np.nan]]), r"labels\[1\] nan is not a finite"),
], ids=["nan", "inf", "str", "bytes", "bool", "none", "array_nan"])
def test_regression_labels_are_finite_real_numbers_named_by_index(models, labels, message):
  with pytest.raises(ValueError, match=message):
    raw_text.class_ids(models["regression"], labels)


@pytest.mark.parametrize("labels, message", [
    (["entailment", float("nan")], r"labels\[1\] nan is neither one of the model's labels"),
    ([None], r"labels\[0\] None is neither"), ([1.5], r"labels\[0\] 1.5 is neither"),
    ([3], r"labels\[0\] 3 is neither .* nor a class id in \[0, 3\)"),
    (["maybe"], r"labels\[0\] 'maybe' is not one of the model's labels"),
    # Sweep 28, B106: True trained as the second label name.
    (["neutral", True], r"labels\[1\] True is a bool, and the model's labels are "
                        r"\['contradiction', 'entailment', 'neutral'\]: pass each label as its "
                        "name"),
    (np.array([False]), r"labels\[0\] False is a bool"),
], ids=["nan", "none", "fraction", "out_of_range", "unknown_name", "bool", "numpy_bool"])
def test_class_labels_are_names_or_class_ids_named_by_index(models, labels, message):
  with pytest.raises(ValueError, match=message):
    raw_text.class_ids(models["classifier"], labels)


def test_labels_are_one_per_text_in_any_sequence_form(models):
  regression, classifier = models["regression"], models["classifier"]
  for labels in ([0.5, 2], np.array([0.5, 2.0]), np.array([[0.5], [2.0]]),
                 tf.constant([0.5, 2.0]), [np.float32(0.5), np.int64(2)]):
    np.testing.assert_array_equal(raw_text.class_ids(regression, labels), [[0.5], [2.0]])
  for labels in (["neutral", 0], [b"neutral", 0.0], np.array(["neutral", "contradiction"]),
                 tf.constant(["neutral", "contradiction"])):
    np.testing.assert_array_equal(raw_text.class_ids(classifier, labels), [2, 0])
  for labels in ("neutral", 1.0):
    with pytest.raises(TypeError, match="labels must be a sequence of labels, one per text"):
      raw_text.class_ids(classifier, labels)


def test_fitting_a_regression_on_a_label_that_is_not_a_number_is_refused(models):
  import keras  # pylint: disable=import-outside-toplevel
  model = _with_text(BertClassifier(BertConfig(**TINY), 1), 9)
  model.compile(optimizer=keras.optimizers.Adam(1e-3))
  for labels in ([float("nan"), 1.0], ["high", "low"]):
    with pytest.raises(ValueError, match=r"labels\[0\] .* is not a finite real number"):
      model.fit(["good", "bad"], labels, verbose=0)


def test_a_classifier_of_known_arity_refuses_the_other_in_every_call(tmp_path):
  pair = _with_text(BertClassifier(BertConfig(**TINY), 2, labels=("0", "1")), 9, is_pair=True)
  with pytest.raises(ValueError, match="reads sentence pairs: pass texts as a "
                                       r"\(text_a, text_b\) pair .*got one text"):
    pair.classify("")
  with pytest.raises(ValueError, match="reads sentence pairs: pass x as .*got single texts"):
    pair.evaluate(["a", "b"], [0, 1], verbose=0)
  with pytest.raises(ValueError, match=r"is_pair=False, but this classifier reads sentence "
                                       "pairs"):
    tfbert.save(pair, str(tmp_path / "wrong"), "export", is_pair=False)
  assert not (tmp_path / "wrong").exists()
  single = _with_text(BertClassifier(BertConfig(**TINY), 2), 9, is_pair=False)
  with pytest.raises(ValueError, match="reads single texts: .*a tuple of two str"):
    single.classify(("a good film", "an awful film"))
  with pytest.raises(ValueError, match="reads single texts: pass x as a str or a list of str"):
    single.fit([("a", "b")], [0], verbose=0)
  with pytest.raises(ValueError, match="reads single texts: pass x as"):
    single.predict([("a", "b")], verbose=0)


@pytest.mark.slow  # The five exports (~18 s, built once: conftest.py).
def test_an_export_of_a_pair_classifier_reads_pairs_by_default(models, exports):
  """The regression of conftest.py reads pairs (its text settings' `is_pair`) and was
  exported without `is_pair`: its export takes the model's arity."""
  model, loaded = models["regression"], exports["regression"]
  assert text_settings.settings_of(model).is_pair is True
  assert loaded.is_pair is True
  with pytest.raises(ValueError, match="this export reads sentence pairs: pass texts as a "
                                       r"\(text_a, text_b\) pair .*got one text"):
    loaded.classify("")
  np.testing.assert_allclose(loaded.classify(PAIRS[0])["score"],
                             model.classify(PAIRS[0])["score"], atol=1e-6)


@pytest.mark.parametrize("call, error, names", [
    (lambda m: m["classifier"].classify(["a", None, "b", 3, b"\xff"]), TypeError,
     [r"texts\[1\] is a NoneType", r"texts\[3\] is a int", r"texts\[4\] is not UTF-8"]),
    (lambda m: m["classifier"].classify([("a", None), ("b", "c"), (3, "d")]), TypeError,
     [r"texts\[0\]\[1\] is a NoneType", r"texts\[2\]\[0\] is a int"]),
    (lambda m: m["classifier"].classify([("a", "b"), ("c",), ("d", "e", "f")]), TypeError,
     [r"texts\[1\]: expected", r"texts\[2\]: expected"]),
    (lambda m: m["tagger"].tag(["ok", "x\udc00", "y\ud800"]), ValueError,
     [r"texts\[1\] is not valid Unicode", r"texts\[2\] is not valid Unicode"]),
    (lambda m: m["sentence_encoder"].encode([None, None]), TypeError,
     [r"texts\[0\] is a NoneType", r"texts\[1\] is a NoneType"]),
    (lambda m: m["span_labeler"].answer(["q", None, 3], ["c", "c", "c"]),
     TypeError, [r"questions\[1\] is a NoneType", r"questions\[2\] is a int"]),
], ids=["classify", "classify_pairs", "pair_shapes", "tag", "encode", "answer"])
def test_every_bad_item_of_a_text_call_is_named_not_the_first_only(models, call, error, names):
  """Rule: a text call names every bad item of its texts (the first ten and a count), so a
  list is fixed in one pass; it named only the first."""
  with pytest.raises(error) as raised:
    call(models)
  for name in names:
    assert re.search(name, str(raised.value)), (name, str(raised.value))


def test_a_text_call_names_the_first_ten_bad_items_and_how_many_more():
  with pytest.raises(TypeError) as raised:
    raw_text.text_list([None] * 13)
  message = str(raised.value)
  assert "13 items of texts" in message and "texts[9] is a NoneType" in message, message
  assert "texts[10]" not in message and "and 3 more" in message, message
  with pytest.raises(ValueError, match=r"texts\[0\] has no \[MASK\].*texts\[2\] has no"):
    raw_text.fill_masks(None, ["no", "a [MASK]", "none"], 5, 8, 0)


def test_bad_items_of_pairs_are_ordered_by_index_then_side_whatever_their_wording(
    monkeypatch):
  """The order was parsed from each message's first word ("texts[3][0]"): a message of
  another wording sorted anywhere."""
  def unicode(text, what):
    if text == "bad":
      raise ValueError(f"the text {what} is bad")  # The index not first.
    return text
  monkeypatch.setattr(raw_text, "_unicode", unicode)
  with pytest.raises(ValueError) as raised:
    raw_text.text_pairs([("ok", "bad"), ("bad", "ok"), ("bad", "bad")])
  assert [str(error) for error in raised.value.items] == [
      f"the text texts{where} is bad" for where in ("[0][1]", "[1][0]", "[2][0]", "[2][1]")]


def test_int_labels_of_a_model_whose_label_names_are_integers_are_read_by_name_or_refused():
  """Rule: where the label names look like integers (a GLUE TSV read by pandas gives ints),
  an int label is read as the name of its value; one whose position names another class,
  or that names no class, is refused naming both readings (it was taken by position: labels
  ["1", "0"] trained 1 as "0" without a word)."""
  import types  # pylint: disable=import-outside-toplevel
  swapped = types.SimpleNamespace(num_classes=2, labels=("1", "0"))
  with pytest.raises(ValueError, match=re.escape(
      "labels[0] 1 is ambiguous: the model's labels ['1', '0'] look like integers; read as a "
      "name it is label '1' (class id 0), read as a class id it is label '0': pass the labels "
      "as their names, strings")):
    raw_text.class_ids(swapped, [1, "1", 0, "0"])
  np.testing.assert_array_equal(raw_text.class_ids(swapped, ["1", "1", "0"]), [0, 0, 1])
  shifted = types.SimpleNamespace(num_classes=3, labels=("1", "2", "3"))
  np.testing.assert_array_equal(raw_text.class_ids(shifted, [3, np.int64(3), 3.0]), [2, 2, 2])
  with pytest.raises(ValueError, match=r"y\[0\] 0 is ambiguous: .* read as a name it names no "
                                       r"label, read as a class id it is label '1'"):
    raw_text.class_ids(shifted, [0], "y")
  with pytest.raises(ValueError, match=r"labels\[0\] 7 is neither one of the model's labels"):
    raw_text.class_ids(shifted, [7])
  # Names in their positions ("0", "1", as GLUE's): ints agree with both readings.
  ordered = types.SimpleNamespace(num_classes=2, labels=("0", "1"))
  np.testing.assert_array_equal(raw_text.class_ids(ordered, [1, 0, "1", True]), [1, 0, 1, 1])
