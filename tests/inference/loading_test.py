"""Tests for tfbert.inference.loading and saving: `tfbert.load` reads every directory kind a
user holds (Hugging Face directories of each head with their labels, sentence-transformers,
Google, a run directory, a `.keras` file, an export, a `ram://` URL) into the right class
with its labels and text settings (a classifier's arity from its run or `tfbert.save`'s
record); `task=` starts a head on a source's encoder; what it cannot read is named in one
line."""

import dataclasses
import json
import os
import re
import shutil

import numpy as np
import pytest

import tfbert
from tfbert import BertClassifier, BertPretrainer, BertSpanLabeler, BertTokenClassifier
from tfbert.checkpoints import convert, pretrained
from tfbert.checkpoints.google_checkpoint import google_weights
from tfbert.classifier import glue_data
from tfbert.classifier.classifier_run import ClassifierRunConfig
from tfbert.config import BertConfig
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.inference import loading, text_settings
from tfbert.squad import squad_features, squad_postprocess
from tfbert.squad.squad_run import SquadRunConfig
from tfbert.text import casing

TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=64, initializer_range=0.5)
LABELS = ("sports", "business", "world")  # Not alphabetical: order by id, never sorted.
TAGS = ("O", "B-loc", "I-loc")


def _model(cls, *args, seq_length=13, **kwargs):
  model = cls(BertConfig(**TINY), *args, **kwargs)
  model.build()
  return text_settings.attach_text(model, pretrained.minilm_vocab_file(), True, seq_length)


def _same_weights(a, b):
  """Every weight equal by Google name; the pooler only where the model reads it (a Hugging
  Face tagger or span labeler holds none, as transformers' own)."""
  mine, theirs = google_weights(a), google_weights(b)
  assert sorted(mine) == sorted(theirs)
  for name in mine:
    if convert.uses_pooler(a) or not name.startswith(convert.POOLER_SCOPE):
      np.testing.assert_array_equal(mine[name], theirs[name], err_msg=name)


@pytest.mark.parametrize("cls, args", [
    (BertClassifier, (3,), ), (BertTokenClassifier, (TAGS,)), (BertSpanLabeler, ()),
    (BertPretrainer, ())], ids=["classifier", "tagger", "span_labeler", "pretrainer"])
def test_a_hugging_face_directory_of_each_head_loads_as_its_class_with_its_labels(
    tmp_path, cls, args):
  kwargs = {"labels": LABELS} if cls is BertClassifier else {}
  model = _model(cls, *args, **kwargs)
  tfbert.save(model, str(tmp_path / "hf"), "hf")
  back = tfbert.load(str(tmp_path / "hf"))
  assert type(back) is cls
  assert getattr(back, "labels", None) == getattr(model, "labels", None)
  _same_weights(model, back)
  settings = text_settings.settings_of(back)
  # `save` records S (13) as the tokenizer's model_max_length; without it 128 (384 for a
  # span labeler) cut to the 64 positions.
  assert (settings.do_lower_case, settings.max_seq_length) == (True, 13)


def test_a_google_checkpoint_directory_and_prefix_load_by_their_heads(tmp_path):
  model = _model(BertPretrainer)
  prefix = str(tmp_path / "google" / "bert_model.ckpt")
  tfbert.save(model, prefix, "google")
  for path in (str(tmp_path / "google"), prefix):
    back = tfbert.load(path)
    assert type(back) is BertPretrainer
    _same_weights(model, back)
    # The S `save` recorded (tokenizer_config.json beside the checkpoint).
    assert text_settings.settings_of(back).max_seq_length == 13


def test_a_run_directory_gives_its_runs_sequence_length(tmp_path):
  model = _model(BertClassifier, 3, labels=LABELS)
  run = tmp_path / "run"
  tfbert.save(model, str(run / "model.keras"))
  (run / "run_config.json").write_text(ClassifierRunConfig(
      output_dir=str(run), task_name="mrpc", do_train=True, data_dir=str(tmp_path / "glue"),
      max_seq_length=23).to_json())
  back = tfbert.load(str(run))
  assert type(back) is BertClassifier and back.labels == LABELS
  assert text_settings.settings_of(back).max_seq_length == 23
  _same_weights(model, back)


@pytest.mark.slow  # ~4 s: Keras saves and loads through a local copy of the URL.
def test_a_keras_file_on_a_url_loads(ram_root):
  model = _model(BertTokenClassifier, TAGS)
  path = f"{ram_root}/tagger/model.keras"
  tfbert.save(model, path)
  back = tfbert.load(path)
  assert type(back) is BertTokenClassifier and back.labels == TAGS
  assert text_settings.settings_of(back).vocab_file == f"{ram_root}/tagger/vocab.txt"
  assert back.tag(["in Oslo"]) == model.tag(["in Oslo"])


@pytest.mark.slow  # ~3 s: MiniLM read twice.
def test_the_shipped_minilm_starts_a_classifier_on_its_encoder():
  source = tfbert.load(pretrained.minilm_dir())
  assert isinstance(source, BertSentenceEncoder)
  clf = tfbert.load(pretrained.minilm_dir(), task="classifier", labels=LABELS)
  assert type(clf) is BertClassifier and clf.labels == LABELS
  _same_weights(source.encoder, clf.encoder)
  assert text_settings.settings_of(clf).max_seq_length == 256


def test_labels_that_are_not_the_models_are_refused_by_name(tmp_path, caplog):
  model = _model(BertClassifier, 3, labels=LABELS)
  tfbert.save(model, str(tmp_path / "hf"), "hf")
  with pytest.raises(ValueError, match=r"labels \['business', 'sports', 'world'\] are not "
                                       r"the model's \(\['sports', 'business', 'world'\]\)"):
    tfbert.load(str(tmp_path / "hf"), labels=sorted(LABELS))
  caplog.set_level("WARNING", logger="absl")
  assert tfbert.load(str(tmp_path / "hf"), task="classifier", labels=LABELS).labels == LABELS
  assert "head is fresh" not in caplog.text  # Its own head, trained or not, kept.
  tagger = tfbert.load(str(tmp_path / "hf"), task="tagger", labels=["O", "B-X", "I-X"])
  # Sweep 31, B73: a fresh head's predictions are random; said so, as the tools say it.
  assert f"{tmp_path / 'hf'}: the tagger head is fresh (random weights" in caplog.text
  assert tagger.labels == ("O", "B-X", "I-X")
  with pytest.raises(ValueError, match="needs labels="):
    tfbert.load(str(tmp_path / "hf"), task="tagger")


_RUN_RECORDS = ("run_config.json", "bert_config.json", "data.json")


def test_a_pretraining_run_directory_loads_its_exported_model(tmp_path):
  """It said "bert_config.json with no checkpoint" (the run's checkpoints/ are not Google's)."""
  tfbert.save(_model(BertPretrainer), str(tmp_path / "export" / "google" / "bert_model.ckpt"),
              "google")
  for name in _RUN_RECORDS:
    (tmp_path / name).write_text('{"model_dir": "x"}')
  assert type(tfbert.load(str(tmp_path))) is BertPretrainer


@pytest.mark.parametrize("make, message", [
    (lambda d: None, "not a model directory tfbert reads: found none of saved_model.pb, "
                     "model.keras, modules.json, config.json \\+ model.safetensors, "
                     "bert_config.json \\+ a checkpoint"),
    (lambda d: (d / "run_config.json").write_text("{}"),
     "a tfbert run directory without model.keras: training has not finished"),
    # As a fine-tuning run records itself (it said "bert_config.json with no checkpoint").
    (lambda d: [(d / n).write_text('{"output_dir": "x"}') for n in _RUN_RECORDS],
     "a tfbert run directory without model.keras: training has not finished"),
    (lambda d: [(d / n).write_text('{"model_dir": "x"}') for n in _RUN_RECORDS],
     "a run_pretraining run directory without its export .*export/google/bert_model.ckpt"),
    (lambda d: (d / "config.json").write_text("{}"), "config.json without model.safetensors"),
    (lambda d: (d / "bert_config.json").write_text("{}"), "bert_config.json with no checkpoint"),
], ids=["empty", "unfinished_run", "unfinished_fine_tuning_run", "unfinished_pretraining_run",
        "hf_without_weights", "google_without_checkpoint"])
def test_a_directory_it_cannot_read_is_named_in_one_line(tmp_path, make, message):
  make(tmp_path)
  with pytest.raises(ValueError, match=message) as raised:
    tfbert.load(str(tmp_path))
  assert "\n" not in str(raised.value) and str(tmp_path) in str(raised.value)


def test_a_missing_path_and_a_missing_vocabulary_are_named(tmp_path):
  with pytest.raises(FileNotFoundError, match="no such file or directory: .*nowhere"):
    tfbert.load(str(tmp_path / "nowhere"))
  model = _model(BertPretrainer)
  tfbert.save(model, str(tmp_path / "hf"), "hf")
  os.remove(tmp_path / "hf" / "vocab.txt")
  with pytest.raises(FileNotFoundError, match="no vocab.txt beside the model .*vocab_file="):
    tfbert.load(str(tmp_path / "hf"))


@pytest.fixture(scope="module")
def hf_classifier(tmp_path_factory):
  """A Hugging Face classifier directory (labels sports, business, world), S 13 recorded."""
  directory = str(tmp_path_factory.mktemp("hf_classifier") / "hf")
  tfbert.save(_model(BertClassifier, 3, labels=LABELS), directory, "hf")
  return directory


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(max_seq_length=0), ValueError, r"max_seq_length \(0\) must be >= 3"),
    (dict(max_seq_length=20.5), ValueError, r"max_seq_length \(20.5\) must be int"),
    (dict(labels="abc"), TypeError, "labels= must be a sequence of names, not the str 'abc'"),
    (dict(task="regression", labels=["x"]), ValueError,
     "labels= names a classifier's or tagger's outputs; task='regression' has none"),
    (dict(task="sentence_encoder", labels=["x", "y"]), ValueError,
     "task='sentence_encoder' has none"),
    (dict(doc_stride=5), ValueError, "doc_stride: a span labeler's settings, and .* holds a "
                                     "BertClassifier"),
    (dict(n_best=5), TypeError, "unexpected keyword argument n_best; load takes task, "),
], ids=["zero_length", "float_length", "str_labels", "labels_for_regression",
        "labels_for_encoder", "span_settings_for_a_classifier", "unknown_setting"])
def test_settings_that_do_not_apply_are_refused_naming_them(hf_classifier, kwargs, error,
                                                            message):
  with pytest.raises(error, match=message):
    tfbert.load(hf_classifier, **kwargs)


@pytest.mark.parametrize("kwargs, message", [
    (dict(max_seq_len=64), r"argument max_seq_len: max_seq_len: did you mean "
                           r"max_seq_length\?; load takes task, labels, max_seq_length, "
                           r"do_lower_case, vocab_file, allow_casing_mismatch, "
                           r"reinit_head, max_query_length, .*null_score_diff_threshold "
                           r"\(the last 5 a span labeler's\)$"),
    (dict(is_pair=True), r"argument is_pair: is_pair is a classifier's arity, .*give it to "
                         r"tfbert.save\(model, path, \"export\", is_pair=...\)"),
    (dict(dostride=1, is_pair=True), r"arguments dostride, is_pair: dostride: did you mean "
                                     r"doc_stride\?; is_pair is "),
], ids=["close_match", "another_calls", "two"])
def test_an_unknown_keyword_is_named_with_every_one_load_takes(tmp_path, kwargs, message):
  """It listed a span labeler's settings alone, whatever the model (sweep 12, P1); checked
  before the path is read."""
  with pytest.raises(TypeError, match=message):
    tfbert.load(str(tmp_path / "nowhere"), **kwargs)


def test_a_casing_mismatch_names_the_keyword_arguments_that_fix_it(hf_classifier, tmp_path):
  """It told an API caller to "Pass --do_lower_case=true ... or --allow_casing_mismatch",
  flags load() had no counterpart of (sweep 7, A39)."""
  with pytest.raises(casing.CasingMismatchError) as raised:
    tfbert.load(hf_classifier, do_lower_case=False)
  assert str(raised.value).startswith("casing mismatch: do_lower_case=False says ")
  assert str(raised.value).endswith(
      "says do_lower_case=true; a wrong casing loses accuracy silently. Pass "
      "do_lower_case=True (or leave it out to follow the checkpoint), or "
      "allow_casing_mismatch=True if this is intended (keyword arguments of tfbert.load)")
  allowed = tfbert.load(hf_classifier, do_lower_case=False, allow_casing_mismatch=True)
  assert text_settings.settings_of(allowed).do_lower_case is False
  # Records that contradict each other: a cased vocabulary beside an uncased config.
  words = open(pretrained.minilm_vocab_file(), encoding="utf-8").read().splitlines()
  cased = tmp_path / "cased_vocab.txt"
  cased.write_text("\n".join(words[:-1] + ["Paris"]) + "\n", encoding="utf-8")
  with pytest.raises(casing.CasingMismatchError, match=(
      r"Fix the checkpoint's records, or choose with do_lower_case=True or False and "
      r"allow_casing_mismatch=True \(keyword arguments of tfbert.load\)$")):
    tfbert.load(hf_classifier, vocab_file=str(cased))
  assert text_settings.settings_of(tfbert.load(
      hf_classifier, vocab_file=str(cased), do_lower_case=False,
      allow_casing_mismatch=True)).do_lower_case is False


@pytest.mark.parametrize("given", [
    ["sports", "business", "world"], ("sports", "business", "world"),
    np.array(["sports", "business", "world"])], ids=["list", "tuple", "numpy"])
def test_labels_are_a_list_a_tuple_or_a_numpy_array_alike(hf_classifier, given):
  """A NumPy array of labels failed with NumPy's "The truth value of an array with more than
  one element is ambiguous" (sweep 8, F26: `not labels` in with_task)."""
  for task in ("classifier", None):  # A fresh head, and the source's own labels checked.
    model = tfbert.load(hf_classifier, task=task, labels=given)
    assert model.labels == LABELS and all(type(name) is str for name in model.labels)
  assert tfbert.load(hf_classifier, task="tagger", labels=np.array(TAGS)).labels == TAGS


@pytest.mark.parametrize("given, message", [
    ({"sports", "business", "world"}, "labels= must be a list, a tuple or a 1-D array of "
                                      r"names \(in class-id order\), got a set"),
    (np.array([["sports", "business", "world"]]), r"labels= must be a 1-D sequence of names, "
                                                  r"got an array of shape \(1, 3\)"),
    (np.array([], dtype=str), None)], ids=["set", "2d", "empty"])
def test_labels_without_an_order_or_of_another_rank_are_refused(hf_classifier, given, message):
  if message is None:  # No names: as an empty list.
    for task in ("classifier", "tagger"):
      with pytest.raises(ValueError) as as_list:
        tfbert.load(hf_classifier, task=task, labels=[])
      with pytest.raises(ValueError, match=f"^{re.escape(str(as_list.value))}$"):
        tfbert.load(hf_classifier, task=task, labels=given)
    return
  with pytest.raises(TypeError, match=f"^{message}$"):
    tfbert.load(hf_classifier, task="classifier", labels=given)


@pytest.mark.parametrize("kwargs, message", [
    (dict(do_lower_case="true"), "do_lower_case must be True, False or None, got 'true'"),
    (dict(do_lower_case=1), "do_lower_case must be True, False or None, got 1"),
    (dict(allow_casing_mismatch="yes"), "allow_casing_mismatch must be True or False, got "
                                        "'yes'"),
    (dict(version_2_with_negative="false"), "version_2_with_negative must be True or False, "
                                            "got 'false'"),
], ids=["str_casing", "int_casing", "str_allow", "str_v2"])
def test_a_bool_argument_given_as_a_str_or_an_int_is_refused_naming_it(
    hf_classifier, tmp_path, kwargs, message):
  """`do_lower_case='true'` got a self-contradictory casing message ("true says true, but ...
  says true", sweep 8, F30); `bool('false')` is True."""
  source = hf_classifier
  if "version_2_with_negative" in kwargs:
    source = str(tmp_path / "span")
    tfbert.save(_model(BertSpanLabeler), source, "hf")
  with pytest.raises(ValueError, match=message) as raised:
    tfbert.load(source, **kwargs)
  assert "casing mismatch" not in str(raised.value)


def test_numpy_bools_are_bools(hf_classifier):
  model = tfbert.load(hf_classifier, do_lower_case=np.bool_(True),
                      allow_casing_mismatch=np.bool_(False))
  assert text_settings.settings_of(model).do_lower_case is True
  model = _model(BertSentenceEncoder)
  text_settings.attach_text(model, pretrained.minilm_vocab_file(), np.bool_(True), 13)
  assert text_settings.settings_of(model).do_lower_case is True
  with pytest.raises(ValueError, match="^do_lower_case must be True, False or None, got "
                                       "'False'$"):
    text_settings.attach_text(model, pretrained.minilm_vocab_file(), "False")
  with pytest.raises(ValueError, match="^normalize must be True or False, got 'no'$"):
    model.encode(["a"], normalize="no")


def test_the_recorded_length_comes_back_and_a_bad_record_is_named(hf_classifier, tmp_path):
  assert text_settings.settings_of(tfbert.load(hf_classifier)).max_seq_length == 13
  broken = tmp_path / "broken"
  shutil.copytree(hf_classifier, broken)
  (broken / "tokenizer_config.json").write_text("{not json")
  with pytest.raises(ValueError, match=r"tokenizer_config.json: not valid JSON"):
    tfbert.load(str(broken))


def test_an_export_takes_no_settings_not_even_the_casing(tmp_path):
  model = _model(BertSentenceEncoder)
  tfbert.save(model, str(tmp_path / "export"), "export")
  with pytest.raises(ValueError, match="load it without do_lower_case"):
    tfbert.load(str(tmp_path / "export"), do_lower_case=False)
  # Sweep 32, B56: a window setting was refused naming S, vocabulary, casing and labels only.
  with pytest.raises(ValueError, match=r"fixed when written \(its S, vocabulary, casing, "
                                       r"labels and a span labeler's window settings, recorded "
                                       r"in answer_question.json\); load it without doc_stride, "
                                       r"or load the run's model.keras to choose them"):
    tfbert.load(str(tmp_path / "export"), doc_stride=3)


def test_a_google_classifier_keeps_its_labels_and_unnamed_classes_take_names(tmp_path):
  model = _model(BertClassifier, 3, labels=LABELS)
  tfbert.save(model, str(tmp_path / "g" / "bert_model.ckpt"), "google")
  assert (tmp_path / "g" / "labels.txt").read_text().split() == list(LABELS)
  back = tfbert.load(str(tmp_path / "g"))
  assert back.labels == LABELS and back.classify("a b")["label"] in LABELS
  (tmp_path / "g" / "labels.txt").unlink()
  unnamed = tfbert.load(str(tmp_path / "g"))
  assert unnamed.labels is None
  named = tfbert.load(str(tmp_path / "g"), task="classifier", labels=LABELS)
  assert named.labels == LABELS
  _same_weights(model, named)
  with pytest.raises(ValueError, match="2 labels .* for a classifier of 3 classes"):
    tfbert.load(str(tmp_path / "g"), labels=LABELS[:2])


def test_a_span_labeler_of_few_positions_gets_windows_that_fit(tmp_path):
  model = _model(BertSpanLabeler)
  tfbert.save(model, str(tmp_path / "hf"), "hf")
  back = tfbert.load(str(tmp_path / "hf"), max_seq_length=40)
  settings = text_settings.settings_of(back)
  # The question budget saved with it (5: attach_text fits it to the model's S 13), which
  # fits windows of 40 too.
  assert (settings.max_seq_length, settings.max_query_length) == (40, 5)
  # Windows of 40 hold the question and the context: the call answers. An untrained head
  # may find no valid span ("" then; which it finds depends on its random weights).
  found = back.answer("Who?", "Mira met Zyxwar.")
  assert isinstance(found["answer"], str) and found["answer"] in "Mira met Zyxwar."
  with pytest.raises(ValueError, match=r"max_seq_length \(40\) must be greater than "
                                       r"max_query_length \(64\) \+ 3"):
    tfbert.load(str(tmp_path / "hf"), max_seq_length=40, max_query_length=64)


def _run_of(tmp_path, model, name, **run_config):
  """A run directory of `model` whose run_config.json records `run_config`."""
  run = tmp_path / name
  tfbert.save(model, str(run / "model.keras"))
  (run / "run_config.json").write_text(ClassifierRunConfig(
      output_dir=str(run), do_train=True, data_dir=str(tmp_path / "glue"),
      **run_config).to_json())
  return str(run)


def test_a_classifier_run_knows_its_arity_from_its_task_and_refuses_the_other(tmp_path):
  pair = tfbert.load(_run_of(tmp_path, _model(BertClassifier, 2, labels=("0", "1")), "mrpc",
                             task_name="mrpc"))
  single = tfbert.load(_run_of(tmp_path, _model(BertClassifier, 2, labels=("0", "1")), "sst",
                               task_name="sst-2"))
  assert text_settings.settings_of(pair).is_pair is True
  assert text_settings.settings_of(single).is_pair is False
  pairs_please = "reads sentence pairs: pass texts as a .text_a, text_b. pair"
  for texts in ("", "word " * 500, ["a", "b"]):
    with pytest.raises(ValueError, match=pairs_please):
      pair.classify(texts)
  with pytest.raises(ValueError, match="pass x as a .text_a, text_b. pair"):
    pair.predict(["a"], verbose=0)
  assert pair.classify([]) == []
  with pytest.raises(ValueError, match="reads single texts: .*a tuple of two str, which is "
                                       "one .text_a, text_b. pair"):
    single.classify(("a good film", "an awful film"))
  with pytest.raises(ValueError, match="reads single texts"):
    single.predict([("a", "b")], verbose=0)
  assert single.predict(["a good film", "an awful film"], verbose=0)["logits"].shape == (2, 2)
  # A fresh head on the encoder is not the run's task: its arity is unknown.
  fresh = tfbert.load(str(tmp_path / "mrpc"), task="regression")
  assert text_settings.settings_of(fresh).is_pair is None


@pytest.mark.parametrize("text_b_column, is_pair", [(None, False), (1, True)])
def test_a_custom_task_run_knows_its_arity_from_its_text_b_column(tmp_path, text_b_column,
                                                                  is_pair):
  fmt = glue_data.CustomFormat(text_a_column=0, text_b_column=text_b_column, label_column=2,
                               labels=("0", "1"))
  run = _run_of(tmp_path, _model(BertClassifier, 2, labels=("0", "1")), "custom",
                task_name="custom", custom=fmt)
  assert text_settings.settings_of(tfbert.load(run)).is_pair is is_pair


def test_a_keras_file_saved_by_tfbert_keeps_its_arity_and_an_unknown_one_clears_it(tmp_path):
  model = _model(BertClassifier, 2, labels=("0", "1"))
  path = str(tmp_path / "model.keras")
  text_settings.attach(model, dataclasses.replace(text_settings.settings_of(model),
                                                  is_pair=True))
  tfbert.save(model, path)
  assert text_settings.settings_of(tfbert.load(path)).is_pair is True
  text_settings.attach(model, dataclasses.replace(text_settings.settings_of(model),
                                                  is_pair=None))
  tfbert.save(model, path)  # Over it: the old record must not describe the new model.
  assert text_settings.settings_of(tfbert.load(path)).is_pair is None


def test_is_pair_is_a_classifiers_setting():
  with pytest.raises(ValueError, match=r"is_pair \(True\) is a classifier's setting; got a "
                                       "BertTokenClassifier"):
    text_settings.attach(_model(BertTokenClassifier, TAGS), text_settings.TextSettings(
        pretrained.minilm_vocab_file(), True, 13, is_pair=True))
  with pytest.raises(ValueError, match="is_pair must be True, False or None"):
    text_settings.TextSettings(pretrained.minilm_vocab_file(), True, is_pair="yes")


def test_load_takes_path_likes_refuses_bytes_and_a_tilde_it_would_not_expand(tmp_path,
                                                                              monkeypatch):
  """`tfbert.load(pathlib.Path(...))` failed with "unsupported operand type(s) for +:
  'PosixPath' and 'str'", bytes with "can't concat str to bytes" (sweep 6, A06/A07); a `~`
  path said "no such file or directory" although the file is in the home directory."""
  model = _model(BertClassifier, 2, labels=("0", "1"))
  tfbert.save(model, str(tmp_path / "m.keras"))
  back = tfbert.load(tmp_path / "m.keras", vocab_file=tmp_path / "vocab.txt")
  assert text_settings.settings_of(back).vocab_file == str(tmp_path / "vocab.txt")
  with pytest.raises(TypeError, match="^path must be a str or an os.PathLike .* got bytes"):
    tfbert.load(str(tmp_path / "m.keras").encode())
  with pytest.raises(TypeError, match="^vocab_file must be a str or an os.PathLike"):
    tfbert.load(tmp_path / "m.keras", vocab_file=b"vocab.txt")
  monkeypatch.setenv("HOME", str(tmp_path))
  with pytest.raises(ValueError, match=f"^path '~/m.keras' starts with '~', which tfbert does "
                                       f"not expand .*; pass '{tmp_path}/m.keras'"):
    tfbert.load("~/m.keras")


def test_classifiers_sharing_a_directory_keep_their_own_arity(tmp_path):
  """The arity record beside `.keras` files was one per directory: a single-text classifier
  saved beside a pair classifier made the pair one load as single-text (and classify one
  sentence where it needs two)."""
  model = _model(BertClassifier, 2, labels=("0", "1"))
  for name, is_pair in (("pair", True), ("single", False)):
    text_settings.attach(model, dataclasses.replace(text_settings.settings_of(model),
                                                    is_pair=is_pair))
    tfbert.save(model, str(tmp_path / f"{name}.keras"))
  for name, is_pair in (("pair", True), ("single", False)):
    loaded = tfbert.load(str(tmp_path / f"{name}.keras"))
    assert text_settings.settings_of(loaded).is_pair is is_pair, name
  # A record of an earlier tfbert, naming no model, is refused rather than applied to all.
  (tmp_path / "text_settings.json").write_text('{"is_pair": true}')
  with pytest.raises(ValueError, match="text_settings.json: an arity record of an earlier "
                                       "tfbert .* does not name the .keras file it describes"):
    tfbert.load(str(tmp_path / "single.keras"))


def _without_record(path):
  """The `.keras` file at `path` as one written before tfbert recorded its text settings."""
  import zipfile  # pylint: disable=import-outside-toplevel
  with zipfile.ZipFile(path, "a") as archive:
    archive.comment = b""


def test_a_keras_file_refuses_a_vocabulary_other_than_its_own(tmp_path):
  """A `.keras` file copied beside another model's vocab.txt was used with it, every id
  another word piece, and its casing taken from that vocabulary (sweep 10, c175/c176)."""
  model = _model(BertClassifier, 2, labels=("0", "1"))
  tfbert.save(model, str(tmp_path / "m.keras"))
  (tmp_path / "other").mkdir()
  shutil.copy(tmp_path / "m.keras", tmp_path / "other" / "m.keras")
  foreign = tmp_path / "other" / "vocab.txt"
  foreign.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nThe\nCat\n")
  with pytest.raises(ValueError, match=r"m.keras was saved with a vocabulary of 30522 lines "
                                       r"\(sha256 \w{12}\), but the vocab.txt beside it "
                                       r"\(.*other/vocab.txt\) has 7 lines .*put the model's "
                                       r"own vocab.txt beside it, or pass vocab_file="):
    tfbert.load(str(tmp_path / "other" / "m.keras"))
  with pytest.raises(ValueError, match=r"but vocab_file='.*other/vocab.txt' has 7 lines"):
    tfbert.load(str(tmp_path / "m.keras"), vocab_file=str(foreign))
  back = tfbert.load(str(tmp_path / "other" / "m.keras"), vocab_file=str(tmp_path / "vocab.txt"))
  assert text_settings.settings_of(back).do_lower_case is True
  _without_record(tmp_path / "other" / "m.keras")  # An earlier file: as before.
  assert text_settings.settings_of(tfbert.load(str(tmp_path / "other" / "m.keras"))
                                   ).vocab_file == str(foreign)


def test_a_keras_file_keeps_its_recorded_casing_over_its_vocabularys_content(tmp_path):
  """Saved with do_lower_case=False over a vocabulary of lower-case pieces, the casing came
  back True from the vocabulary's content once the tokenizer files were gone."""
  model = _model(BertClassifier, 2, labels=("0", "1"))
  text_settings.attach(model, dataclasses.replace(text_settings.settings_of(model),
                                                  do_lower_case=False))
  tfbert.save(model, str(tmp_path / "m.keras"))
  os.remove(tmp_path / "tokenizer_config.json")
  assert text_settings.settings_of(tfbert.load(str(tmp_path / "m.keras"))).do_lower_case is False
  _without_record(tmp_path / "m.keras")
  assert text_settings.settings_of(tfbert.load(str(tmp_path / "m.keras"))).do_lower_case is True


def test_labels_of_a_classifier_loaded_as_one_and_duplicate_labels_are_named(tmp_path):
  """With task="classifier" given, the message said "pass task= as well" (sweep 10, c33)."""
  model = _model(BertClassifier, 2, labels=("0", "1"))
  tfbert.save(model, str(tmp_path / "m.keras"))
  with pytest.raises(ValueError, match=r"labels \['a', 'b'\] are not the model's \(\['0', "
                                       r"'1'\]\): it is a BertClassifier already, so its head "
                                       r"is kept .*for a fresh head with these labels on its "
                                       r"encoder, pass reinit_head=True$"):
    tfbert.load(str(tmp_path / "m.keras"), task="classifier", labels=["a", "b"])
  with pytest.raises(ValueError, match=r"^labels= names 'a' more than once \(\['a', 'a', "
                                       r"'b'\]\): each class needs a name of its own$"):
    tfbert.load(str(tmp_path / "m.keras"), task="classifier", labels=["a", "a", "b"])


def test_a_folder_holding_models_names_them(tmp_path):
  """A run_pretraining export holds saved_model/ and google/: it said only "not a model
  directory" (sweep 10, c136)."""
  (tmp_path / "saved_model").mkdir()
  (tmp_path / "saved_model" / "saved_model.pb").write_bytes(b"")
  (tmp_path / "google").mkdir()
  (tmp_path / "google" / "bert_config.json").write_text("{}")
  (tmp_path / "notes").mkdir()
  with pytest.raises(ValueError, match=f"^{tmp_path}: not a model directory tfbert reads "
                                       "itself, but it holds google/ and saved_model/: load "
                                       f"one of them \\(e.g. {tmp_path}/google\\)$"):
    tfbert.load(str(tmp_path))


def test_a_linked_keras_file_reads_the_records_beside_its_target(tmp_path):
  """A link in a folder without a vocab.txt was refused as "no vocab.txt beside the model",
  and in one with another vocab.txt as that vocabulary's (sweep 12, R1)."""
  model = _model(BertClassifier, 2, labels=("0", "1"), seq_length=11)
  tfbert.save(model, str(tmp_path / "m" / "model.keras"))
  (tmp_path / "lk").mkdir()
  (tmp_path / "lk" / "vocab.txt").write_text("[PAD]\n[UNK]\n")
  (tmp_path / "lk" / "m.keras").symlink_to(tmp_path / "m" / "model.keras")
  settings = text_settings.settings_of(tfbert.load(str(tmp_path / "lk" / "m.keras")))
  assert settings.vocab_file == os.path.realpath(tmp_path / "m" / "vocab.txt")
  assert settings.max_seq_length == 11


def test_a_squad_runs_span_settings_are_what_convert_checkpoint_keeps(tmp_path):
  """convert_checkpoint of a SQuAD run's model.keras wrote none of its windows (sweep 12)."""
  model = _model(BertSpanLabeler, seq_length=40)
  run = tmp_path / "squad"
  tfbert.save(model, str(run / "model.keras"))
  (run / "run_config.json").write_text(SquadRunConfig(
      output_dir=str(run), do_train=True, train_file=str(tmp_path / "train.json"),
      features=squad_features.FeatureConfig(max_seq_length=40, doc_stride=6,
                                            max_query_length=8),
      postprocess=squad_postprocess.PostprocessConfig(max_answer_length=5)).to_json())
  assert loading.recorded_settings(model, "tfbert", str(run / "model.keras")) == dict(
      max_seq_length=40, max_query_length=8, doc_stride=6, max_answer_length=5,
      version_2_with_negative=False, null_score_diff_threshold=0.0)


def test_a_sentence_transformers_root_read_as_hugging_face_keeps_its_sentence_length(
    tmp_path):
  """Sweep 29, B55: convert_checkpoint --input_format=hf of MiniLM's directory (both a
  sentence-transformers root and a Hugging Face directory) kept its tokenizer's 512, where
  `load` reads sentence_bert_config.json's 256."""
  minilm = pretrained.minilm_dir()
  with open(os.path.join(minilm, "sentence_bert_config.json"), encoding="utf-8") as f:
    assert json.load(f)["max_seq_length"] == 256
  with open(os.path.join(minilm, "tokenizer_config.json"), encoding="utf-8") as f:
    assert json.load(f)["model_max_length"] == 512
  model = _model(BertSentenceEncoder)
  assert loading.recorded_settings(model, "hf", minilm) == {"max_seq_length": 256}
  plain = tmp_path / "hf"  # The same tokenizer files without the sentence config: theirs.
  plain.mkdir()
  shutil.copy(os.path.join(minilm, "tokenizer_config.json"), plain)
  assert loading.recorded_settings(model, "hf", str(plain)) == {"max_seq_length": 512}


def test_a_threshold_without_version_2_warns_as_run_squad_does(tmp_path, caplog):
  """One rule with run_squad's flags (`squad_postprocess.ignored_threshold`)."""
  path = str(tmp_path / "m.keras")
  tfbert.save(_model(BertSpanLabeler), path)
  tfbert.load(path, null_score_diff_threshold=1.5, version_2_with_negative=True)
  assert "is ignored" not in caplog.text
  tfbert.load(path, null_score_diff_threshold=1.5)
  assert (f"{path}: null_score_diff_threshold=1.5 is ignored: it decides SQuAD v2.0's "
          "no-answer") in caplog.text and "without version_2_with_negative" in caplog.text


def test_reinit_head_starts_a_fresh_head_on_a_fine_tuned_models_encoder(tmp_path, caplog):
  """README promises `reinit_head=True` (the tools' --reinit_head); load() refused the
  keyword, and its refusal sent users to an encoder file they may not have (sweep 13, b15)."""
  model = _model(BertClassifier, 2, labels=("0", "1"))
  tfbert.save(model, str(tmp_path / "m.keras"))
  path = str(tmp_path / "m.keras")
  fresh = tfbert.load(path, task="classifier", labels=LABELS, reinit_head=True)
  assert type(fresh) is BertClassifier and fresh.labels == LABELS
  _same_weights(model.encoder, fresh.encoder)
  assert "reinit_head" in caplog.text and "a fresh classifier head" in caplog.text
  own = tfbert.load(path, reinit_head=True)  # Its own task and labels, the head fresh.
  assert own is not model and own.labels == ("0", "1")
  assert not np.array_equal(own.classifier_head.output_weights.numpy(),
                            model.classifier_head.output_weights.numpy())
  with pytest.raises(ValueError, match="holds a BertEncoder .*pass task= as well"):
    loading._own_task(_model(tfbert.BertEncoder), "enc")


def test_a_sentence_encoder_has_no_head_to_start_fresh_and_none_is_called_random(
    tmp_path, caplog):
  """Sweep 33, B159: reinit_head=True on a sentence encoder warned that its head was fresh and
  random, while its embeddings were the source's (pooling has no weights)."""
  caplog.set_level("INFO", logger="absl")
  model = _model(BertClassifier, 2, labels=("0", "1"))
  path = str(tmp_path / "m.keras")
  tfbert.save(model, path)
  encoder = tfbert.load(path, task="sentence_encoder")
  assert type(encoder) is BertSentenceEncoder
  _same_weights(model.encoder, encoder.encoder)
  assert "head is fresh" not in caplog.text and "read as a sentence encoder" in caplog.text
  with pytest.raises(ValueError, match=r"reinit_head=True on .*m\.keras: a sentence encoder's "
                                       r"head is its pooling, which has no weights"):
    loading.with_task(encoder, "sentence_encoder", None, path, reinit_head=True)


def test_one_label_is_refused_naming_labels_and_what_a_classifier_needs(tmp_path):
  """It spoke of a regression the user did not ask for (sweep 13, b80), and a one-label
  tagger was built (b76)."""
  encoder = _model(BertSentenceEncoder)
  with pytest.raises(ValueError, match=r"^task='classifier' on src: labels=\['only'\] names 1 "
                                       r"class; a classifier needs at least 2 label names "
                                       r"\(for one score, task='regression' without "
                                       r"labels=\)$"):
    loading.with_task(encoder, "classifier", ["only"], "src")
  with pytest.raises(ValueError, match=r"^labels=\['O'\]: a tagger needs at least 2 labels"):
    loading.with_task(encoder, "tagger", ["O"], "src")


def test_the_ids_half_of_an_export_names_the_export_above_it(tmp_path):
  """It said what signature was missing, not what to load (sweep 13, b115)."""
  ids = tmp_path / "exp" / "ids"
  ids.mkdir(parents=True)
  (ids / "saved_model.pb").write_bytes(b"")
  (tmp_path / "exp" / "saved_model.pb").write_bytes(b"")
  with pytest.raises(ValueError, match=rf"^{re.escape(str(ids))} is the id-only half of the "
                                       rf"tfbert export {re.escape(str(tmp_path / 'exp'))} "
                                       r".*: load .*exp for text"):
    tfbert.load(str(ids))
  with pytest.raises(ValueError, match="load it without reinit_head"):
    tfbert.load(str(tmp_path / "exp"), reinit_head=True)


@pytest.mark.parametrize("given, error, message", [
    ([0, 1], TypeError, r"^labels=\[0, 1\]: entry 0 \(0\) is of type int: label names must be "
                        r"str, e.g. \['0', '1'\]$"),
    (np.array([0, 1]), TypeError, r"^labels=\[0, 1\]: entry 0 \(0\) is of type int"),
    (["O", 1, 2], TypeError, r"^labels=\['O', 1, 2\]: entry 1 \(1\) is of type int"),
    (("good\nbad", "ok"), ValueError, r"entry 0 \('good\\nbad'\) holds a line break"),
    (["x", ""], ValueError, r"entry 1 \(''\) is empty")],
    ids=["int", "numpy-int", "mixed", "newline", "empty"])
def test_label_names_of_load_are_one_line_strs(given, error, message):
  """load(labels=[0, 1]) was accepted and classify() then failed inside TensorFlow; a name
  holding a newline went into labels.txt as two names (sweep 15, N1/N2)."""
  with pytest.raises(error, match=message):
    loading.label_names(given)
  assert loading.label_names(np.array(["neg", "pos"])) == ("neg", "pos")


@pytest.mark.parametrize("kwargs, message", [
    (dict(null_score_diff_threshold="1.0"), r"null_score_diff_threshold must be a finite "
                                            r"number \(an int or float\), got '1.0'"),
    (dict(null_score_diff_threshold=True), "null_score_diff_threshold .* got True"),
    (dict(null_score_diff_threshold=float("nan")), "null_score_diff_threshold .* got nan"),
    (dict(null_score_diff_threshold=float("inf")), "null_score_diff_threshold .* got inf"),
    (dict(doc_stride=4.0), r"doc_stride \(4.0\) must be int"),
    (dict(max_query_length="8"), r"max_query_length \('8'\) must be int"),
    (dict(max_answer_length=True), r"max_answer_length \(True\) must be int"),
    (dict(max_seq_length="64"), r"max_seq_length \('64'\) must be int"),
    (dict(version_2_with_negative=1), "version_2_with_negative must be True or False, got 1"),
], ids=["str_threshold", "bool_threshold", "nan_threshold", "inf_threshold", "float_stride",
        "str_query", "bool_answer", "str_length", "int_v2"])
def test_a_text_setting_of_the_wrong_type_is_refused_before_the_path_is_read(
    tmp_path, kwargs, message):
  """Sweep 17, e08-e10: null_score_diff_threshold="1.0" was taken, failed at answer() naming
  neither, and tfbert.save recorded it; each setting is checked where given (here, before
  the path, which does not exist, is read)."""
  with pytest.raises(ValueError, match=f"^{message}$"):
    tfbert.load(str(tmp_path / "missing"), **kwargs)


@pytest.mark.parametrize("form", ["keras", "hf"])
def test_a_recorded_span_setting_of_the_wrong_type_is_named_with_its_record(tmp_path, form):
  """Sweep 17, e10: a span_settings.json (a Hugging Face config.json's "tfbert" key) holding
  "1.0" loaded and failed at answer(): refused naming the record, the setting and value."""
  path = str(tmp_path / ("m.keras" if form == "keras" else "hf"))
  tfbert.save(_model(BertSpanLabeler), path, form)
  record = (tmp_path / "span_settings.json" if form == "keras"
            else tmp_path / "hf" / "config.json")
  values = json.loads(record.read_text())
  entry = values["m.keras"] if form == "keras" else values["tfbert"]["span_settings"]
  entry["null_score_diff_threshold"] = "1.0"
  record.write_text(json.dumps(values))
  where = f"{record}: m.keras" if form == "keras" else f"{record}: tfbert"
  with pytest.raises(ValueError, match=(
      f"^{re.escape(where)}: null_score_diff_threshold must be a finite number \\(an int or "
      "float\\), got '1.0': correct it, or write it again with tfbert.save$")):
    tfbert.load(path)
