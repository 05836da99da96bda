"""Tests for tfbert.inference.text_settings: settings are checked when attached (S within
the model's positions, an existing vocabulary, usable windows), the casing comes from the
vocabulary when not given, and re-attaching drops the modules built from the old ones."""

import re

import numpy as np
import pytest

from tests.inference import tiny_models
from tfbert import BertClassifier
from tfbert.checkpoints import pretrained
from tfbert.config import BertConfig
from tfbert.inference import raw_text, text_settings


def _model():
  model = BertClassifier(BertConfig(**tiny_models.TINY), 2)
  model.build()
  return model


def test_bad_settings_are_refused_naming_the_setting(tmp_path):
  vocab = pretrained.minilm_vocab_file()
  with pytest.raises(ValueError, match="max_seq_length 65 exceeds the model's "
                                       "max_position_embeddings 64"):
    text_settings.attach_text(_model(), vocab, True, 65)
  with pytest.raises(FileNotFoundError, match="vocabulary not found: .*missing.txt"):
    text_settings.attach_text(_model(), str(tmp_path / "missing.txt"), True, 9)
  with pytest.raises(ValueError, match=r"max_seq_length \(2\) must be >= 3"):
    text_settings.TextSettings(vocab, True, 2)
  with pytest.raises(ValueError, match=r"doc_stride \(0\)"):
    text_settings.TextSettings(vocab, True, 9, doc_stride=0)


def test_a_vocabulary_of_more_entries_than_the_models_vocab_size_is_refused(tmp_path):
  """Sweep 19, N1: a vocabulary longer than the model's embedding table was attached (and
  saved, loaded, converted) without a word; a text holding an id past the table then failed
  in a graph error naming neither. As many entries as the table fit."""
  model = BertClassifier(BertConfig(**{**tiny_models.TINY, "vocab_size": 9}), 2)
  model.build()
  tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d"]
  fits, longer = tmp_path / "fits.txt", tmp_path / "longer.txt"
  fits.write_text("\n".join(tokens) + "\n")
  longer.write_text("\n".join(tokens + ["e"]) + "\n")
  with pytest.raises(ValueError, match=re.escape(
      f"the vocabulary {longer} has 10 entries, more than the vocab_size 9 of the model's "
      "config: pass the vocabulary that config was made for, or fix vocab_size")):
    text_settings.attach_text(model, str(longer), True, 9)
  assert text_settings.settings_of(
      text_settings.attach_text(model, str(fits), True, 9)).vocab_file == str(fits)


def test_the_casing_comes_from_the_vocabulary_and_reattaching_starts_afresh(shared_data):
  model = text_settings.attach_text(_model(), f"{shared_data}/bert_cased_vocab.txt",
                                    max_seq_length=9)
  assert text_settings.settings_of(model).do_lower_case is False
  cased = raw_text.tokenizer_of(model)
  assert raw_text.tokenizer_of(model) is cased  # Made once.
  text_settings.attach_text(model, pretrained.minilm_vocab_file(), max_seq_length=9)
  assert text_settings.settings_of(model).do_lower_case is True
  assert raw_text.tokenizer_of(model) is not cased


def test_lengths_must_be_ints():
  with pytest.raises(ValueError, match=r"max_seq_length \(20.5\), doc_stride \(True\) must be int"):
    text_settings.TextSettings(pretrained.minilm_vocab_file(), True, 20.5, doc_stride=True)
  with pytest.raises(ValueError, match=r"max_seq_length \(8.0\), doc_stride \('4'\) must be int"):
    text_settings.TextSettings(pretrained.minilm_vocab_file(), True, 8.0, doc_stride="4")


def test_numpy_integer_lengths_are_taken_as_plain_ints():
  """Sweep 7 A40: tfbert.load(run, max_seq_length=np.int64(8)) was refused ("TextSettings:
  max_seq_length (np.int64(8)) must be int")."""
  settings = text_settings.TextSettings(pretrained.minilm_vocab_file(), True, np.int64(8),
                                        doc_stride=np.int32(4), max_answer_length=np.uint8(5))
  lengths = (settings.max_seq_length, settings.doc_stride, settings.max_answer_length)
  assert lengths == (8, 4, 5) and {type(n) for n in lengths} == {int}
  model = text_settings.attach_text(_model(), pretrained.minilm_vocab_file(), True,
                                    np.int64(9))
  assert type(text_settings.settings_of(model).max_seq_length) is int


@pytest.mark.parametrize("threshold", ["1.0", True, float("nan"),
                                       float("-inf"), None])
def test_a_threshold_that_is_no_finite_number_is_refused(threshold):
  """Sweep 17, e08: a str threshold was kept (and saved), failing at answer() as "must be
  real number, not str"; a bool is no threshold, NaN and infinities no JSON number."""
  with pytest.raises(ValueError, match=(
      r"^TextSettings: null_score_diff_threshold must be a finite number \(an int or "
      rf"float\), got {re.escape(repr(threshold))}$")):
    text_settings.TextSettings(pretrained.minilm_vocab_file(), True,
                               null_score_diff_threshold=threshold)


def test_a_numeric_threshold_is_a_plain_float_and_other_settings_are_typed():
  settings = text_settings.TextSettings(pretrained.minilm_vocab_file(), True,
                                        null_score_diff_threshold=np.float32(-1.5))
  assert type(settings.null_score_diff_threshold) is float
  assert settings.null_score_diff_threshold == -1.5
  assert text_settings.TextSettings(pretrained.minilm_vocab_file(), True,
                                    null_score_diff_threshold=2).null_score_diff_threshold == 2.0
  with pytest.raises(ValueError, match=r"^TextSettings: vocab_file must be a str path, got 7$"):
    text_settings.TextSettings(7, True)
  with pytest.raises(TypeError, match="^vocab_file must be a str or an os.PathLike"):
    text_settings.attach_text(_model(), 7, True)
  assert text_settings.type_problems(dict(max_seq_length=8, doc_stride=4.0, is_pair="yes",
                                          do_lower_case=1, other="x")) == [
      "doc_stride (4.0) must be int", "do_lower_case must be True or False, got 1",
      "is_pair must be True, False or None (unknown), got 'yes'"]


def test_a_given_casing_the_vocabulary_contradicts_is_refused_as_load_refuses_it(caplog):
  """Sweep 31, B71: an uncased vocabulary attached with do_lower_case=False was taken, and
  "HELLO" became [UNK] without a word; `tfbert.load` refused the same. Allowed on request."""
  vocab = pretrained.minilm_vocab_file()  # Uncased.
  with pytest.raises(ValueError, match=r"do_lower_case=False.*allow_casing_mismatch"):
    text_settings.attach_text(_model(), vocab, False, 9)
  caplog.set_level("WARNING", logger="absl")
  model = text_settings.attach_text(_model(), vocab, False, 9, allow_casing_mismatch=True)
  assert text_settings.settings_of(model).do_lower_case is False
  assert "casing mismatch allowed" in caplog.text


def test_the_default_length_stays_within_the_models_positions():
  """Sweep 31, B70: a model of 16 positions was refused "max_seq_length 128 exceeds ...
  16" for a length the user never gave; `tfbert.load` takes the smaller, and so does
  attach_text. A given length past the positions is still refused."""
  model = BertClassifier(BertConfig(**{**tiny_models.TINY, "max_position_embeddings": 16}), 2)
  model.build()
  vocab = pretrained.minilm_vocab_file()
  assert text_settings.settings_of(
      text_settings.attach_text(model, vocab)).max_seq_length == 16
  assert text_settings.settings_of(text_settings.attach_text(
      _model(), vocab)).max_seq_length == 64  # TINY's 64 positions: under the default 128.
  with pytest.raises(ValueError, match="max_seq_length 17 exceeds"):
    text_settings.attach_text(model, vocab, max_seq_length=17)


def test_a_span_labelers_question_budget_fits_its_windows_when_attached():
  """Sweep 33, B48: attach_text(span labeler, S 48) took google-research/bert's 64 question
  word pieces and failed at the first answer() ("max_seq_length (48) must be greater than
  max_query_length (64)+3"); it takes the budget tfbert.load takes, and a given one that
  leaves no context is refused when attached."""
  from tfbert import BertSpanLabeler  # pylint: disable=import-outside-toplevel
  model = BertSpanLabeler(BertConfig(**tiny_models.TINY))
  model.build()
  vocab = pretrained.minilm_vocab_file()
  assert text_settings.settings_of(text_settings.attach_text(
      model, vocab, max_seq_length=48)).max_query_length == 22
  assert text_settings.settings_of(text_settings.attach_text(
      model, vocab, max_seq_length=64)).max_query_length == 30
  assert text_settings.fitting_query_length(200) == 64
  with pytest.raises(ValueError, match=r"max_seq_length \(48\) must be greater than "
                                       r"max_query_length \(64\) \+ 3"):
    text_settings.attach_text(model, vocab, max_seq_length=48, max_query_length=64)
  text_settings.attach_text(model, vocab, max_seq_length=48)
  assert isinstance(model.answer("Who met?", "Mira met Zyxwar.")["answer"], str)
