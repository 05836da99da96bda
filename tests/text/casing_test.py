"""Tests for tfbert.text.casing: where a checkpoint's casing is read, and the guard."""

import json
import os
import re

import numpy as np
import pytest

from tfbert.checkpoints import pretrained
from tfbert.runtime import validation
from tfbert.text import casing, tokenization

SPECIALS = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n[unused0]\n"


def _vocab(path, words):
  path.write_text(SPECIALS + "".join(f"{w}\n" for w in words), encoding="utf-8")
  return str(path)


def test_vocabulary_content_gives_the_casing_of_the_real_vocabularies(shared_data):
  cased = casing.vocab_casing(os.path.join(shared_data, "bert_cased_vocab.txt"))
  uncased = casing.vocab_casing(os.path.join(shared_data, "bert_uncased_vocab.txt"))
  assert cased.do_lower_case is False and uncased.do_lower_case is True
  # BERT-Base cased: 8366 of its 28996 pieces hold an upper-case letter, the first is "A".
  assert "8366 word pieces with upper-case letters, e.g. 'A'" in cased.source
  assert casing.vocab_casing(pretrained.minilm_vocab_file()).do_lower_case is True


def test_vocabulary_content_rules(tmp_path):
  # Special tokens are bracketed upper case and do not count.
  assert casing.vocab_casing(_vocab(tmp_path / "a.txt", ["the", "##s"])).do_lower_case
  assert not casing.vocab_casing(_vocab(tmp_path / "b.txt", ["the", "##É"])).do_lower_case
  # No cased letter at all (digits, CJK): no evidence either way.
  assert casing.vocab_casing(_vocab(tmp_path / "c.txt", ["中", "##1", "!"])) is None
  with pytest.raises(FileNotFoundError, match="missing.txt"):
    casing.vocab_casing(str(tmp_path / "missing.txt"))


def test_records_are_read_in_order_from_the_directory_and_a_best_models_run(tmp_path):
  run = tmp_path / "run"
  (run / "best").mkdir(parents=True)
  (run / "run_config.json").write_text(json.dumps({"do_lower_case": False}))
  vocab = _vocab(run / "best" / "vocab.txt", ["The"])
  evidence = casing.checkpoint_casing(str(run / "best" / "model.keras"))
  assert [(e.do_lower_case, os.path.basename(e.source.split(" ")[0])) for e in evidence] == [
      (False, "run_config.json"), (False, "vocab.txt")]
  hf = tmp_path / "hf"
  hf.mkdir()
  (hf / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
  evidence = casing.checkpoint_casing(str(hf), vocab)
  assert [e.do_lower_case for e in evidence] == [True, False]
  assert "tokenizer_config.json (tokenizer config do_lower_case: true)" in evidence[0].source
  (hf / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": "yes"}))
  with pytest.raises(ValueError, match="tokenizer_config.json: do_lower_case must be true or "
                                       "false, got 'yes'"):
    casing.checkpoint_casing(str(hf))


def test_the_flag_follows_agrees_or_fails_naming_both_sources(tmp_path):
  uncased = casing.Casing(True, "/m/vocab.txt (lower-case letters only)")
  cased_record = casing.Casing(False, "/m/tokenizer_config.json (tokenizer config ...)")
  assert casing.resolve_do_lower_case(None, [uncased]) is True
  assert casing.resolve_do_lower_case(True, [uncased]) is True
  assert casing.resolve_do_lower_case(None, []) is casing.DEFAULT_DO_LOWER_CASE
  assert casing.resolve_do_lower_case(False, []) is False
  with pytest.raises(casing.CasingMismatchError) as e:
    casing.resolve_do_lower_case(False, [uncased])
  assert str(e.value).startswith(
      "casing mismatch: --do_lower_case=false says do_lower_case=false, but /m/vocab.txt "
      "(lower-case letters only) says do_lower_case=true")
  assert "Pass --do_lower_case=true" in str(e.value) and "--allow_casing_mismatch" in str(e.value)
  # Sources that disagree with each other fail too, unless the flag chooses on purpose.
  with pytest.raises(casing.CasingMismatchError, match="tokenizer_config.json .* says "
                                                       "do_lower_case=false, but /m/vocab.txt"):
    casing.resolve_do_lower_case(None, [cased_record, uncased])
  assert casing.resolve_do_lower_case(False, [uncased], allow_mismatch=True) is False
  assert casing.resolve_do_lower_case(True, [cased_record, uncased], allow_mismatch=True)
  with pytest.raises(casing.CasingMismatchError):  # The override needs a chosen value.
    casing.resolve_do_lower_case(None, [cased_record, uncased], allow_mismatch=True)


def test_the_messages_name_the_settings_as_the_caller_spells_them():
  """Through the API the message said "Pass --do_lower_case=true ... --allow_casing_mismatch"
  (flags the caller cannot pass); tfbert.load rewrote the words afterwards."""
  uncased = casing.Casing(True, "/m/vocab.txt (lower-case letters only)")
  cased = casing.Casing(False, "/m/tokenizer_config.json (tokenizer config ...)")
  load = casing.keywords("tfbert.load")
  with pytest.raises(casing.CasingMismatchError) as e:
    casing.resolve_do_lower_case(False, [uncased], terms=load)
  assert str(e.value) == (
      "casing mismatch: do_lower_case=False says do_lower_case=false, but /m/vocab.txt "
      "(lower-case letters only) says do_lower_case=true; a wrong casing loses accuracy "
      "silently. Pass do_lower_case=True (or leave it out to follow the checkpoint), or "
      "allow_casing_mismatch=True if this is intended (keyword arguments of tfbert.load)")
  with pytest.raises(casing.CasingMismatchError, match=(
      r"Fix the checkpoint's records, or choose with do_lower_case=True or False and "
      r"allow_casing_mismatch=True \(keyword arguments of tfbert.load\)$")):
    casing.resolve_do_lower_case(None, [cased, uncased], terms=load)
  # A caller without the override does not offer it.
  with pytest.raises(casing.CasingMismatchError, match=(
      r"choose with do_lower_case=True or False \(keyword arguments of f\)$")):
    casing.resolve_do_lower_case(None, [cased, uncased],
                                 terms=casing.keywords("f", allow_mismatch=False))
  with pytest.raises(casing.CasingMismatchError, match=(
      r"Fix the checkpoint's records, or choose with --do_lower_case and "
      r"--allow_casing_mismatch$")):
    casing.resolve_do_lower_case(None, [cased, uncased])  # The tools' flags: as they were.


@pytest.mark.parametrize("terms, allowing", [
    (casing.FLAGS, "--allow_casing_mismatch"),
    (casing.keywords("tfbert.load"), "allow_casing_mismatch=True"),
    (casing.keywords("attach_text", allow_mismatch=False), "allow_mismatch=True")])
def test_the_mismatch_allowed_warning_names_the_override_as_the_caller_spells_it(
    caplog, terms, allowing):
  """Issue 47: a caller whose terms have no override (attach_text) was warned
  "casing mismatch allowed (None=True)"; the warning said nothing of whose arguments."""
  cased = casing.Casing(False, "/m/tokenizer_config.json")
  with caplog.at_level("WARNING"):
    assert casing.resolve_do_lower_case(True, [cased], allow_mismatch=True, terms=terms)
  assert [r.getMessage() for r in caplog.records] == [
      f"casing mismatch allowed ({allowing}): tokenizing with {terms.setting(True)} although "
      f"/m/tokenizer_config.json says do_lower_case=false{terms.where}"]


@pytest.mark.parametrize("value, expected", [
    (True, True), (False, False), (np.bool_(True), True), (None, None)])
def test_a_bool_setting_is_a_bool_or_numpys(value, expected):
  assert casing.resolve_do_lower_case(value, []) is (
      casing.DEFAULT_DO_LOWER_CASE if value is None else expected)
  assert validation.plain_bool("x", value, optional=True) is expected


@pytest.mark.parametrize("value", ["true", "False", 1, 0, 1.0])
def test_a_str_or_a_number_for_a_bool_setting_is_refused_naming_it(value):
  """`do_lower_case='true'` said "true says true, but ... says true" (sweep 8, F30)."""
  got = re.escape(repr(value))
  with pytest.raises(ValueError, match=rf"^--do_lower_case must be True, False or None, got "
                                       rf"{got}$"):
    casing.resolve_do_lower_case(value, [casing.Casing(True, "v")])
  with pytest.raises(ValueError, match=r"^--allow_casing_mismatch must be True or False"):
    casing.resolve_do_lower_case(True, [casing.Casing(False, "v")], allow_mismatch=value)
  with pytest.raises(ValueError, match=f"^do_lower_case must be True or False, got {got}$"):
    tokenization.WordPieceTokenizer(pretrained.minilm_vocab_file(), value)
  with pytest.raises(ValueError, match=rf"^do_lower_case must be True, False or None, got "
                                       rf"{got}$"):  # Named as the caller spells it.
    casing.resolve_do_lower_case(value, [], terms=casing.keywords("f"))


@pytest.mark.parametrize("settings, problem", [
    ({"do_lower_case": True, "strip_accents": False},
     "strip_accents false with do_lower_case true"),
    ({"do_lower_case": False, "strip_accents": True},
     "strip_accents true with do_lower_case false"),
    ({"strip_accents": False}, "strip_accents false with do_lower_case true"),  # Its default.
    ({"do_lower_case": True, "tokenize_chinese_chars": False}, "tokenize_chinese_chars false"),
    ({"do_basic_tokenize": False}, "do_basic_tokenize false"),
    ({"do_lower_case": True, "strip_accents": None, "tokenize_chinese_chars": True}, None),
    ({"do_lower_case": False, "strip_accents": False}, None)])
def test_a_tokenizer_config_that_splits_otherwise_than_bert_is_refused(tmp_path, settings,
                                                                       problem):
  """Sweep 27, B122: strip_accents false and tokenize_chinese_chars false were ignored: the
  texts of such a model were split otherwise than its own tokenizer splits them."""
  (tmp_path / "tokenizer_config.json").write_text(json.dumps(settings))
  read = lambda: casing.checkpoint_casing(str(tmp_path), None)  # noqa: E731
  if problem is None:
    read()
    return
  with pytest.raises(ValueError, match=re.escape(
      f"{tmp_path / 'tokenizer_config.json'}: {problem}") + ".*tfbert tokenizes as "
      "google-research/bert does"):
    read()


@pytest.mark.parametrize("name, values, problem", [
    ("special_tokens_map.json", {"cls_token": "[unused1]", "sep_token": "[SEP]"},
     "cls_token '[unused1]' (BERT's: '[CLS]')"),
    ("special_tokens_map.json", {"mask_token": {"content": "<mask>", "lstrip": True}},
     "mask_token '<mask>' (BERT's: '[MASK]')"),
    ("tokenizer_config.json", {"do_lower_case": True, "sep_token": "</s>"},
     "sep_token '</s>' (BERT's: '[SEP]')"),
    ("special_tokens_map.json", {"cls_token": "[CLS]", "mask_token": {"content": "[MASK]"}},
     None),
])
def test_a_tokenizer_of_other_special_tokens_is_refused(tmp_path, name, values, problem):
  """Sweep 34, B36: a special_tokens_map.json naming "[unused1]" the classification token
  was ignored: the texts were packed with [CLS] without a word."""
  (tmp_path / name).write_text(json.dumps(values))
  read = lambda: casing.checkpoint_casing(str(tmp_path), None)  # noqa: E731
  if problem is None:
    read()
    return
  with pytest.raises(ValueError, match=re.escape(f"{tmp_path / name}: {problem}") +
                     ": tfbert packs and masks texts with google-research/bert's special "
                     "tokens"):
    read()
