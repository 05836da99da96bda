"""Tests for tfbert.checkpoints.convert and tools/convert_checkpoint.py."""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import types
import zipfile

import keras
import numpy as np
import pytest

import tfbert
from tests import helpers, numpy_reference, tool_process
from tests.faults import limited_disk
from tfbert import (
    BertClassifier,
    BertEncoder,
    BertPretrainer,
    BertSpanLabeler,
    BertTokenClassifier,
)
from tfbert.checkpoints import convert, huggingface
from tfbert.checkpoints.google_checkpoint import read_google_checkpoint, write_google_checkpoint
from tfbert.inference import text_settings
from tfbert.pretraining import pretraining_init


def _tiny_prefix(shared_data) -> str:
  return os.path.join(shared_data, "keras_bert_test_checkpoint", "bert_model.ckpt")


def _modes(directory) -> dict[str, int]:
  return {name: stat.S_IMODE(os.stat(os.path.join(directory, name)).st_mode)
          for name in sorted(os.listdir(directory))}


def test_google_to_hf_to_tfbert_to_google_is_bit_exact_self_contained_and_readable(
    shared_data, tmp_path):
  prefix = _tiny_prefix(shared_data)
  old_umask = os.umask(0o022)
  try:
    convert.convert_checkpoint("google", prefix, "hf", str(tmp_path / "hf"))
    convert.convert_checkpoint("hf", str(tmp_path / "hf"), "tfbert",
                               str(tmp_path / "k" / "m.keras"))
    model = convert.convert_checkpoint("tfbert", str(tmp_path / "k" / "m.keras"), "google",
                                       str(tmp_path / "g" / "bert_model.ckpt"))
  finally:
    os.umask(old_umask)
  assert isinstance(model, BertPretrainer)
  original = read_google_checkpoint(prefix)
  final = read_google_checkpoint(str(tmp_path / "g" / "bert_model.ckpt"))
  assert len(final) == 46
  for name, value in final.items():
    np.testing.assert_array_equal(value, original[name])
  # Each output holds the source's vocabulary, and only its own files (no temporaries),
  # readable by other users (safetensors wrote model.safetensors 0600).
  with open(os.path.join(os.path.dirname(prefix), "vocab.txt"), "rb") as f:
    vocab = f.read()
  tokenizer = ["special_tokens_map.json", "tokenizer_config.json", "vocab.txt"]
  want = {"hf": ["config.json", "model.safetensors", *tokenizer],
          "k": ["m.keras", *tokenizer],
          "g": ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                "bert_model.ckpt.index", *tokenizer]}
  for directory, names in want.items():
    assert _modes(tmp_path / directory) == {name: 0o644 for name in sorted(names)}, directory
    assert (tmp_path / directory / "vocab.txt").read_bytes() == vocab
    # The tiny vocabulary has lower-case words only: uncased, recorded for the next tool.
    written = json.loads((tmp_path / directory / "tokenizer_config.json").read_text())
    assert written["do_lower_case"] is True
    assert written["model_max_length"] == model.config.max_position_embeddings == 16


def test_google_and_hf_outputs_need_a_vocabulary_tfbert_ones_do_not(tmp_path):
  config = helpers.odd_config()
  weights = {k: v for k, v in numpy_reference.random_google_weights(config.to_dict(), 0).items()
             if k.startswith("bert/")}
  prefix = str(tmp_path / "in" / "bert_model.ckpt")
  write_google_checkpoint(weights, prefix, config=config)
  for fmt, out in (("hf", tmp_path / "hf"), ("google", tmp_path / "g" / "bert_model.ckpt")):
    with pytest.raises(ValueError, match=f"a {fmt} output needs its vocabulary beside it .* "
                                         f"no vocab.txt beside {prefix}: pass --vocab_file"):
      convert.convert_checkpoint("google", prefix, fmt, str(out))
  assert not (tmp_path / "hf").exists() and not (tmp_path / "g").exists()
  convert.convert_checkpoint("google", prefix, "tfbert", str(tmp_path / "k" / "m.keras"))
  assert os.listdir(tmp_path / "k") == ["m.keras"]


@pytest.mark.parametrize("extra, cls", [
    ({}, BertEncoder),
    ({"cls/squad/output_weights": (2, 32), "cls/squad/output_bias": (2,)}, BertSpanLabeler),
    ({"output_weights": (5, 32), "output_bias": (5,)}, BertClassifier),
])
def test_model_class_follows_the_heads_present(extra, cls, tmp_path):
  config = helpers.odd_config()
  weights = {k: v for k, v in numpy_reference.random_google_weights(config.to_dict(), 0).items()
             if k.startswith("bert/")}
  weights.update({k: np.ones(s, np.float32) for k, s in extra.items()})
  write_google_checkpoint(weights, str(tmp_path / "bert_model.ckpt"))
  config.to_json_file(str(tmp_path / "bert_config.json"))
  model = convert.read_model("google", str(tmp_path / "bert_model.ckpt"))
  assert type(model) is cls
  if cls is BertClassifier:
    assert model.num_classes == 5


def test_bad_format_and_paths_are_named(tmp_path):
  with pytest.raises(ValueError, match="unknown checkpoint format 'onnx'"):
    convert.read_model("onnx", "x")
  with pytest.raises(FileNotFoundError, match="missing.keras"):
    convert.read_model("tfbert", str(tmp_path / "missing.keras"))
  with pytest.raises(ValueError, match="must end in .keras"):
    convert.write_model(BertEncoder(helpers.odd_config()), "tfbert", str(tmp_path / "m.h5"))


def _corrupt_keras_files(directory, good: str) -> dict[str, str]:
  """Broken copies of the `.keras` file `good`, with the message each must give."""
  files = {}
  data = open(good, "rb").read()
  truncated = os.path.join(directory, "truncated.keras")
  with open(truncated, "wb") as f:
    f.write(data[: len(data) // 2])
  files[truncated] = "not a valid .keras file (not a zip archive: truncated"
  flipped = os.path.join(directory, "flipped.keras")
  with zipfile.ZipFile(good) as archive:
    offset = archive.getinfo("model.weights.h5").header_offset + 200
  with open(flipped, "wb") as f:
    f.write(data[:offset] + bytes([data[offset] ^ 0xFF]) + data[offset + 1:])
  files[flipped] = "not a valid .keras file (corrupt zip archive: model.weights.h5 fails its CRC"
  plain = os.path.join(directory, "sequential.keras")
  keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]).save(plain)
  files[plain] = "not a tfbert model: holds a keras Sequential"
  return files


def test_a_bad_keras_file_is_named_with_what_is_wrong(tmp_path):
  good = str(tmp_path / "good.keras")
  encoder = BertEncoder(helpers.odd_config(num_hidden_layers=1))
  encoder.build()
  convert.save_tfbert_model(encoder, good)
  assert isinstance(convert.read_model("tfbert", good), BertEncoder)
  # Before: "File not found" for the first two (which exist), AttributeError for the third.
  for path, message in _corrupt_keras_files(str(tmp_path), good).items():
    with pytest.raises(ValueError) as e:
      convert.convert_checkpoint("tfbert", path, "hf", str(tmp_path / "out"))
    assert str(e.value).startswith(f"{path}: {message}"), str(e.value)
  assert not (tmp_path / "out").exists()


CONVERT = ("not a tfbert .keras model file: make one with python tools/convert_checkpoint.py "
           "--input_format={fmt} --input={input} --output_format=tfbert --output=<new>.keras")
# (files made in a directory d, the path given (under d), what the message says after it).
OTHER_KINDS = [
    # Sweep 6, L03: "tfbert model file not found" for a checkpoint that is there.
    (["bert_model.ckpt.index"], "bert_model.ckpt",
     "is a Google checkpoint, " + CONVERT.format(fmt="google", input="{d}/bert_model.ckpt")),
    (["bert_config.json", "bert_model.ckpt.index"], "",
     "is a directory holding a Google checkpoint ({d}/bert_model.ckpt), "
     + CONVERT.format(fmt="google", input="{d}/bert_model.ckpt")),
    (["config.json", "model.safetensors"], "",
     "is a Hugging Face directory, " + CONVERT.format(fmt="hf", input="{d}")),
    (["modules.json"], "",
     "is a sentence-transformers directory, " + CONVERT.format(fmt="hf", input="{d}")),
    (["saved_model.pb"], "", "is a SavedModel export (it serves; it holds no checkpoint to "
     "read: use its run's model.keras)"),
    (["model.keras"], "", "is a tfbert run directory, not a .keras model file: pass its model "
     "{d}/model.keras"),
    # Sweep 31, A53: a run stopped before its end ("a tfbert model must be a .keras file").
    (["run_config.json"], "", "is a directory: name the .keras model in it (e.g. "
     "{d}/model.keras); it holds none yet: a run writes model.keras when it finishes (rerun "
     "it to resume from its checkpoints/)"),
]


@pytest.mark.parametrize("made, given, message", OTHER_KINDS)
def test_another_kind_of_model_where_a_keras_file_is_wanted_says_how_to_make_one(
    tmp_path, made, given, message):
  for name in made:  # The kind is told by the files alone (model_paths.locate).
    (tmp_path / name).write_bytes(b"")
  path = os.path.join(str(tmp_path), given) if given else str(tmp_path)
  expected = f"--model {path} " + message.format(d=str(tmp_path))
  with pytest.raises(ValueError) as e:
    convert.read_tfbert_model(path, "--model")
  assert str(e.value) == expected
  with pytest.raises(ValueError) as e:  # Without a flag: the same, the path first.
    convert.read_tfbert_model(path)
  assert str(e.value) == expected.removeprefix("--model ")


# Writes a model too big for the disk in every format, over old outputs and into new places.
_FULL_DISK_WRITES = """
import json, os, sys
from tests import helpers
from tfbert import BertPretrainer
from tfbert.checkpoints import convert, huggingface
root, vocab = sys.argv[1], sys.argv[2]
model = BertPretrainer(helpers.odd_config(vocab_size=2003))  # Each weights file > 256 KiB.
model.build()
errors = {}
for place in ("old", "new"):
  for fmt, path in (("google", "g/bert_model.ckpt"), ("hf", "hf"), ("tfbert", "k/m.keras")):
    try:
      convert.write_model(model, fmt, os.path.join(root, place, path), vocab_file=vocab,
                          do_lower_case=True)
    except Exception as e:
      errors[f"{place} {fmt}"] = f"{type(e).__name__}: {e}"
print(json.dumps(errors))
"""


@pytest.mark.slow
def test_a_full_disk_leaves_old_outputs_intact_and_no_partial_files(shared_data, tmp_path):
  prefix = _tiny_prefix(shared_data)
  vocab = os.path.join(os.path.dirname(prefix), "vocab.txt")
  with limited_disk(tmp_path, 200 * 1024) as disk:
    old = os.path.join(disk.path, "old")
    os.makedirs(os.path.join(old, "g"))
    for name in ("bert_config.json", "vocab.txt"):
      shutil.copyfile(os.path.join(os.path.dirname(prefix), name), os.path.join(old, "g", name))
    # tfbert's own export of the model (no optimizer slots), which a write may replace.
    write_google_checkpoint(
        {n: w for n, w in read_google_checkpoint(prefix).items()
         if "adam" not in n and n != "global_step"}, os.path.join(old, "g", "bert_model.ckpt"))
    convert.convert_checkpoint("google", prefix, "hf", os.path.join(old, "hf"))
    convert.convert_checkpoint("google", prefix, "tfbert", os.path.join(old, "k", "m.keras"))
    before = {name: open(os.path.join(disk.path, name), "rb").read()
              for name in disk.files() if os.path.isfile(os.path.join(disk.path, name))}
    result = disk.run(_FULL_DISK_WRITES, disk.path, vocab)
    assert result.returncode == 0, result.stderr[-3000:]
    errors = json.loads(result.stdout.strip().splitlines()[-1])
    assert sorted(errors) == sorted(f"{place} {fmt}" for place in ("old", "new")
                                    for fmt in ("google", "hf", "tfbert")), (disk.kind, errors)
    for key, message in errors.items():  # One line naming the output, not a temporary.
      place, fmt = key.split()
      output = os.path.join(disk.path, place, {"google": "g/bert_model.ckpt", "hf": "hf",
                                               "tfbert": "k/m.keras"}[fmt])
      assert message.startswith(f"OSError: cannot write {output}"), message
      assert ".tfbert-tmp" not in message and "\n" not in message, message
    # Nothing under a final name, no temporaries; the old outputs byte for byte.
    directories = ["new", "new/g", "new/hf", "new/k", "old", "old/g", "old/hf", "old/k"]
    assert disk.files() == sorted(directories + list(before))
    for name, data in before.items():
      assert open(os.path.join(disk.path, name), "rb").read() == data, name


@pytest.mark.parametrize("given", [True, False])
def test_a_config_that_does_not_describe_the_google_input_is_named_in_one_line(
    shared_data, tmp_path, given):
  """Sweep 13 P3: a long list of every tensor's shape mismatch, naming neither the config
  nor what to do."""
  source = tmp_path / "ckpt"
  source.mkdir()
  for name in os.listdir(os.path.dirname(_tiny_prefix(shared_data))):
    if name.startswith("bert_model.ckpt."):
      os.symlink(os.path.join(os.path.dirname(_tiny_prefix(shared_data)), name), source / name)
  config = source / "bert_config.json" if not given else tmp_path / "cfg.json"
  own = os.path.join(os.path.dirname(_tiny_prefix(shared_data)), "bert_config.json")
  with open(own, encoding="utf-8") as f:
    fields = json.load(f)
  with open(config, "w", encoding="utf-8") as f:
    json.dump({**fields, "hidden_size": 32}, f)
  with pytest.raises(ValueError) as e:
    convert.convert_checkpoint("google", str(source / "bert_model.ckpt"), "hf",
                               str(tmp_path / "out"), str(config) if given else None)
  where = (f"--bert_config_file={config}" if given else f"{config} (beside the checkpoint)")
  assert str(e.value) == (
      f"hidden_size 32 in {where}, but the checkpoint's bert/embeddings/word_embeddings is "
      "[15, 4]: pass the config the checkpoint was trained with"
      + ("" if given else " (--bert_config_file)"))
  assert not (tmp_path / "out").exists()


def test_a_config_given_with_a_tfbert_or_hf_input_must_equal_its_own(tmp_path):
  """Sweep 16 S1: --bert_config_file with a tfbert or hf input (which carries its own config)
  was ignored without a word, even one that contradicts the model."""
  config = helpers.odd_config(num_hidden_layers=1)
  encoder = BertEncoder(config)
  encoder.build()
  sources = {"tfbert": str(tmp_path / "m.keras"), "hf": str(tmp_path / "hf")}
  convert.save_tfbert_model(encoder, sources["tfbert"])
  convert.write_model(encoder, "hf", sources["hf"])
  same, other = tmp_path / "same.json", tmp_path / "other.json"
  config.to_json_file(str(same))
  helpers.odd_config(num_hidden_layers=1, intermediate_size=9).to_json_file(str(other))
  for fmt, source in sources.items():
    kind = "a tfbert model file" if fmt == "tfbert" else "a Hugging Face directory"
    with pytest.raises(ValueError) as e:
      convert.convert_checkpoint(fmt, source, "tfbert", str(tmp_path / "out" / fmt / "m.keras"),
                                 str(other))
    assert str(e.value) == (
        f"intermediate_size 9 in --bert_config_file={other}, but the input {source} ({kind}, "
        f"which carries its own config) has {config.intermediate_size}: leave the config out "
        "(the input's own is used) or pass the one it was built with")
    assert not (tmp_path / "out").exists()
    assert convert.read_model(fmt, source, str(same), "--bert_config_file").config == config


def test_convert_checkpoint_refuses_a_directory_or_prefix_named_as_a_keras_file(tmp_path):
  """Sweep 16 S3, the same rule for convert_checkpoint's --output (refused before reading)."""
  for fmt, writes in (("hf", "a directory"), ("google", "a checkpoint prefix")):
    path = str(tmp_path / "out" / "model.keras")
    with pytest.raises(ValueError) as raised:
      convert.convert_checkpoint("tfbert", str(tmp_path / "in.keras"), fmt, path)
    named = "directory" if writes == "a directory" else "prefix"
    assert str(raised.value) == (
        f"--output {path} ends in .keras, a Keras file's name, but --output_format={fmt} "
        f"writes {writes}: pass --output_format=tfbert for a .keras file, or name the {named} "
        "without .keras")
  assert not os.listdir(tmp_path)


def test_command_line_tool_converts(shared_data, tmp_path):
  prefix = os.path.join(shared_data, "keras_bert_test_checkpoint", "bert_model.ckpt")
  # In this process (tests/tool_process.py): what the tool writes and prints is the subject.
  result = tool_process.run_tool("convert_checkpoint", f"--input={prefix}",
                                 "--output_format=hf", f"--output={tmp_path / 'hf'}")
  assert result.returncode == 0, result.stderr[-2000:]
  assert (f"wrote BertPretrainer (46 weights) as hf: {tmp_path / 'hf'} (with vocab.txt and "
          "tokenizer_config.json)" in result.stdout)
  assert sorted(os.listdir(tmp_path / "hf")) == [
      "config.json", "model.safetensors", "special_tokens_map.json", "tokenizer_config.json",
      "vocab.txt"]


# transformers' own config reader (no PyTorch needed for configs), in a fresh process: what
# `AutoModelFor...` and `pipeline` would build from each exported directory.
_HF_CONFIG = r"""
import json, sys
from transformers import AutoConfig
out = {}
for path in sys.argv[1:]:
  config = AutoConfig.from_pretrained(path)
  out[path] = {"architectures": config.architectures, "num_labels": config.num_labels,
               "id2label": {str(k): v for k, v in config.id2label.items()},
               "label2id": config.label2id, "problem_type": config.problem_type}
print(json.dumps(out))
"""


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_every_models_hugging_face_directory_names_its_class_and_labels(tmp_path):
  """A tagger exported as BertForPreTraining with 2 labels failed in
  AutoModelForTokenClassification ("size mismatch for bias: [13] vs [2]"), a classifier's
  pipeline answered LABEL_1: each model now says its own transformers class and labels."""
  config = helpers.odd_config()
  models = {
      "pretrainer": (BertPretrainer(config), None),
      "encoder": (BertEncoder(config), None),
      "span": (BertSpanLabeler(config), None),
      "classifier": (BertClassifier(config, 3), ["contradiction", "entailment", "neutral"]),
      "regression": (BertClassifier(config, 1), None),
      "tagger": (BertTokenClassifier(config, ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]), None),
  }
  for name, (model, labels) in models.items():
    model.build()
    convert.write_model(model, "hf", str(tmp_path / name), labels=labels)
  paths = [str(tmp_path / name) for name in models]
  run = subprocess.run([sys.executable, "-c", _HF_CONFIG, *paths], capture_output=True,
                       text=True, timeout=300, check=False,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "HF_HUB_OFFLINE": "1"})
  assert run.returncode == 0, run.stderr[-3000:]
  read = {os.path.basename(p): v for p, v in json.loads(run.stdout.splitlines()[-1]).items()}
  assert {name: read[name]["architectures"] for name in read} == {
      "pretrainer": ["BertForPreTraining"], "encoder": ["BertModel"],
      "span": ["BertForQuestionAnswering"], "classifier": ["BertForSequenceClassification"],
      "regression": ["BertForSequenceClassification"],
      "tagger": ["BertForTokenClassification"]}
  assert read["classifier"]["id2label"] == {"0": "contradiction", "1": "entailment",
                                            "2": "neutral"}
  assert read["classifier"]["label2id"] == {"contradiction": 0, "entailment": 1, "neutral": 2}
  assert (read["regression"]["num_labels"], read["regression"]["problem_type"]) == (
      1, "regression")
  assert read["tagger"]["num_labels"] == 5 and read["tagger"]["id2label"]["1"] == "B-PER"
  # The directories still read back into the same tfbert weights.
  for name, (model, _) in models.items():
    back = convert.read_model("hf", str(tmp_path / name))
    assert helpers.max_abs_diff(back.get_weights()[0], model.get_weights()[0]) == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("labels, message", [
    (["a", "b"], "2 label\\(s\\) \\['a', 'b'\\] for a model with 3 output\\(s\\)"),
    (["a", "a", "b"], "one distinct name per output"),
])
def test_a_classifiers_labels_must_name_each_output_once(tmp_path, labels, message):
  model = BertClassifier(helpers.odd_config(), 3)
  model.build()
  with pytest.raises(ValueError, match=message):
    convert.write_model(model, "hf", str(tmp_path / "out"), labels=labels)
  with pytest.raises(ValueError, match="labels are for a classifier or tagger"):
    convert.write_model(BertSpanLabeler(helpers.odd_config()), "hf", str(tmp_path / "x"),
                        labels=["a"])


@pytest.mark.parametrize("name", ["span", "tagger"])
def test_question_answering_and_token_directories_hold_no_pooler_and_read_back(tmp_path, name):
  """transformers builds BertForQuestionAnswering and BertForTokenClassification without the
  pooler, and listed tfbert's as unexpected; reading such a directory (tfbert's or
  transformers' own) was refused ("model weights missing: bert/pooler/...")."""
  config = helpers.odd_config()
  model = (BertSpanLabeler(config) if name == "span"
           else BertTokenClassifier(config, ["O", "B-x", "I-x"]))
  model.build()
  convert.write_model(model, "hf", str(tmp_path / name))
  _, weights, _ = huggingface.load_hf_checkpoint(str(tmp_path / name))
  assert weights and not [n for n in weights if n.startswith("bert/pooler/")]
  back = convert.read_model("hf", str(tmp_path / name))
  assert type(back) is type(model)
  features = helpers.random_features(config, seed=4)
  want, got = model(features, training=False), back(features, training=False)
  for key in want:  # The pooler is fresh in `back`, and no output reads it.
    np.testing.assert_array_equal(got[key], want[key])


def test_an_mlm_only_pretrainer_is_a_bert_for_masked_lm_directory_that_reads_back_exactly(
    tmp_path, caplog):
  """transformers' `BertForMaskedLM`: `bert.` encoder without pooler, `cls.predictions.*`
  (its decoder tied to the word embeddings, so not saved), no `cls.seq_relationship`."""
  config = helpers.odd_config(num_hidden_layers=2)
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
  model = BertPretrainer(config, objective="mlm")
  model.build()
  text_settings.attach_text(model, str(vocab), True, 11)
  tfbert.save(model, str(tmp_path / "hf"), "hf")
  hf = tmp_path / "hf"
  assert json.loads((hf / "config.json").read_text())["architectures"] == ["BertForMaskedLM"]
  layer = [f"bert.encoder.layer.{i}.{part}.{kind}" for i in range(2) for kind in ("weight", "bias")
           for part in ("attention.self.query", "attention.self.key", "attention.self.value",
                        "attention.output.dense", "attention.output.LayerNorm",
                        "intermediate.dense", "output.dense", "output.LayerNorm")]
  embeddings = [f"bert.embeddings.{n}" for n in (
      "word_embeddings.weight", "position_embeddings.weight", "token_type_embeddings.weight",
      "LayerNorm.weight", "LayerNorm.bias")]
  head = ["cls.predictions.bias", "cls.predictions.transform.dense.weight",
          "cls.predictions.transform.dense.bias", "cls.predictions.transform.LayerNorm.weight",
          "cls.predictions.transform.LayerNorm.bias"]
  assert sorted(huggingface.read_safetensors(str(hf / "model.safetensors"))) == sorted(
      layer + embeddings + head)
  assert (hf / "vocab.txt").read_bytes() == vocab.read_bytes()
  tokenizer = json.loads((hf / "tokenizer_config.json").read_text())
  assert (tokenizer["do_lower_case"], tokenizer["model_max_length"]) == (True, 11)
  assert json.loads((hf / "special_tokens_map.json").read_text())["mask_token"] == "[MASK]"
  # tfbert's readers give the MLM-only pretrainer back, its MLM head and logits bit-exact.
  features = helpers.random_features(config, seed=2)
  want = model(features, training=False)["mlm_logits"].numpy()
  for back in (tfbert.load(str(hf)), convert.read_model("hf", str(hf))):
    assert type(back) is BertPretrainer and back.objective == "mlm" and back.nsp_head is None
    np.testing.assert_array_equal(back(features, training=False)["mlm_logits"], want)
  # A continued-pretraining run of objective mlm starts from it with no head fresh.
  source = pretraining_init.read_source(types.SimpleNamespace(init_hf_dir=str(hf)))
  run_model = BertPretrainer(config, objective="mlm")
  with caplog.at_level("INFO", logger="absl"):
    pretraining_init.load_source(run_model, source)
  assert "starts fresh" not in caplog.text
  np.testing.assert_array_equal(run_model(features, training=False)["mlm_logits"], want)


@pytest.fixture
def source_kinds(tmp_path):
  """Paths of each kind (content never read: `check_source` looks at their form only)."""
  hf, run = tmp_path / "hf", tmp_path / "run"
  hf.mkdir()
  run.mkdir()
  for path in (hf / "config.json", hf / "model.safetensors", run / "model.keras",
               tmp_path / "m.keras", tmp_path / "vocab.txt", tmp_path / "ckpt.index"):
    path.write_text("", encoding="utf-8")
  return {name: str(tmp_path / name) for name in ("hf", "run", "m.keras", "vocab.txt", "ckpt",
                                                  "missing")}


@pytest.mark.parametrize("fmt, name, error, message", [
    # --input_format=google (the default) given a Hugging Face directory: the message was
    # "config file not found: <parent>/bert_config.json".
    ("google", "hf", ValueError, "--input {hf} is a Hugging Face directory: pass "
                                 "--input_format=hf --input={hf}"),
    ("google", "m.keras", ValueError, "--input {m.keras} is a tfbert .keras model: pass "
                                      "--input_format=tfbert --input={m.keras}"),
    ("tfbert", "run", ValueError, "--input {run} is a tfbert run directory (its model: "
                                  "{run}/model.keras): pass --input_format=tfbert "
                                  "--input={run}/model.keras"),
    ("hf", "vocab.txt", ValueError, "--input {vocab.txt}: a file, where a Hugging Face or "
                                    "sentence-transformers model directory"),
    ("hf", "ckpt", ValueError, "--input {ckpt} is a Google checkpoint: pass "
                               "--input_format=google --input={ckpt}"),
    ("hf", "missing", FileNotFoundError, "--input {missing}: no such directory; --input takes "
                                         "a Hugging Face"),
    ("tfbert", "missing", FileNotFoundError, "--input {missing}: no such file"),
    ("google", "ckpt", FileNotFoundError, "--input {ckpt}: no bert_config.json beside the "
                                          "checkpoint ({tmp}/bert_config.json): pass "
                                          "--bert_config_file"),
])
def test_a_source_is_checked_for_its_kind_before_any_part_is_read(
    source_kinds, tmp_path, fmt, name, error, message):
  expected = message.replace("{tmp}", str(tmp_path))
  for key, path in source_kinds.items():
    expected = expected.replace("{" + key + "}", path)
  with pytest.raises(error) as raised:
    convert.check_source(fmt, source_kinds[name], "--input", convert.INPUT_SPELLINGS,
                         needs_config=True)
  assert str(raised.value).startswith(expected), str(raised.value)
  convert.check_source("google", source_kinds["ckpt"], "--input", convert.INPUT_SPELLINGS,
                       config_file="given.json", needs_config=True)  # Its config is given.


def test_a_missing_source_in_a_directory_of_another_model_names_it_and_its_flag(tmp_path):
  """Sweep 20 P2: --init_tfbert=<a run_pretraining run>/model.keras (such a run writes no
  model.keras) was answered "(e.g. <run>/model.keras)", the path just given: the model the
  nearest existing directory holds is named, with the flag that reads it."""
  run = tmp_path / "p01"
  (run / "export" / "google").mkdir(parents=True)
  (run / "bert_config.json").write_text("{}")
  (run / "run_config.json").write_text(json.dumps({"model_dir": str(run)}))
  (run / "export" / "google" / "bert_model.ckpt.index").write_text("")
  spellings = {"google": "--init_checkpoint={path}", "tfbert": "--init_tfbert={path}"}
  prefix = run / "export" / "google" / "bert_model.ckpt"
  for path in (run / "model.keras", run / "best" / "model.keras"):
    with pytest.raises(FileNotFoundError) as raised:
      convert.check_source("tfbert", str(path), "--init_tfbert", spellings)
    assert str(raised.value) == (
        f"--init_tfbert {path}: no such file; --init_tfbert takes a tfbert .keras model (e.g. "
        f"<run>/model.keras), and {run} holds a Google checkpoint ({prefix}): pass "
        f"--init_checkpoint={prefix}")
  with pytest.raises(FileNotFoundError) as raised:  # Nothing around it: as before.
    convert.check_source("tfbert", str(tmp_path / "none" / "model.keras"), "--init_tfbert",
                         spellings)
  assert str(raised.value).endswith("no such file; --init_tfbert takes a tfbert .keras model "
                                    "(e.g. <run>/model.keras)")


def test_convert_checkpoint_names_a_hugging_face_input_of_the_default_format(source_kinds,
                                                                            tmp_path):
  out = tmp_path / "out" / "bert_model.ckpt"
  with pytest.raises(ValueError, match="is a Hugging Face directory: pass --input_format=hf"):
    convert.convert_checkpoint("google", source_kinds["hf"], "google", str(out))
  assert not out.parent.exists()


@pytest.mark.parametrize("fmt", ["tfbert", "google"])
def test_a_training_checkpoint_as_input_names_the_runs_model_keras(tmp_path, fmt):
  from tests.checkpoints.google_checkpoint_test import training_checkpoint  # pylint: disable=import-outside-toplevel
  prefix = training_checkpoint(tmp_path / "run", ["model.keras"])
  want = (f"--input {prefix} is a training checkpoint of the tfbert run {tmp_path / 'run'} "
          f"(its model and optimizer state, to resume training), not a model to read: convert "
          f"{tmp_path / 'run' / 'model.keras'}")
  with pytest.raises(ValueError, match=re.escape(want)):
    convert.check_source(fmt, prefix, "--input", convert.INPUT_SPELLINGS, needs_config=True)
  with pytest.raises(ValueError, match=re.escape(want[len("--input "):])):
    convert.read_tfbert_model(prefix)


def test_a_google_output_never_replaces_another_models_config_in_its_folder(shared_data,
                                                                            tmp_path):
  """`convert_checkpoint --output_format=google --output=<dir>/mine` into a folder holding
  another model's bert_config.json (no checkpoint beside it) replaced it: refused, named."""
  folder = tmp_path / "g"
  folder.mkdir()
  theirs = '{"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4}'
  (folder / "bert_config.json").write_text(theirs)
  with pytest.raises(ValueError, match=re.escape(
      f"{folder / 'bert_config.json'} is already there, and this model's bert_config.json "
      "differs")):
    convert.convert_checkpoint("google", _tiny_prefix(shared_data), "google",
                               str(folder / "mine"))
  assert os.listdir(folder) == ["bert_config.json"]
  assert (folder / "bert_config.json").read_text() == theirs


@pytest.mark.parametrize("fmt, output", [("tfbert", "other.keras"), ("hf", "."),
                                         ("google", "bert_model.ckpt")])
def test_an_output_never_replaces_another_models_vocabulary_beside_it(shared_data, tmp_path,
                                                                      fmt, output):
  """A .keras output replaced the vocab.txt an export_tflite had put beside its m.tflite,
  which then read wrong ids, with no word (sweep 12, S1): refused before writing, as
  tfbert.save, whatever the format writes the vocabulary beside."""
  (tmp_path / "m.tflite").write_bytes(b"tflite")
  (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\nOther\n")
  with pytest.raises(ValueError, match=r"vocab.txt.* (holds another vocabulary|differs)"):
    convert.convert_checkpoint("google", _tiny_prefix(shared_data), fmt,
                               os.path.normpath(str(tmp_path / output)))
  assert sorted(os.listdir(tmp_path)) == ["m.tflite", "vocab.txt"]
  assert (tmp_path / "vocab.txt").read_text() == "[PAD]\n[UNK]\nOther\n"


SPANS = dict(max_query_length=5, doc_stride=4, max_answer_length=4,
             version_2_with_negative=True, null_score_diff_threshold=-1.5)


@pytest.fixture(scope="module")
def saved_span_labeler(tmp_path_factory):
  """A tiny span labeler's .keras file, its `SPANS` recorded by tfbert.save."""
  directory = tmp_path_factory.mktemp("span_labeler")
  model = BertSpanLabeler(helpers.odd_config())
  model.build()
  vocab = directory / "in_vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
  source = str(directory / "in" / "model.keras")
  tfbert.save(text_settings.attach_text(model, str(vocab), True, 17, **SPANS), source)
  return source


@pytest.mark.parametrize("fmt, output", [("tfbert", "k/m.keras"), ("hf", "hf"),
                                         ("google", "g/bert_model.ckpt")])
def test_a_converted_span_labeler_keeps_its_windows(saved_span_labeler, tmp_path, fmt, output):
  """convert_checkpoint wrote a span labeler's weights without the windows, answer length
  and v2.0 threshold tfbert.save had recorded: the output answered with defaults."""
  run = tool_process.run_tool("convert_checkpoint", "--input_format=tfbert",
                              f"--input={saved_span_labeler}", f"--output_format={fmt}",
                              f"--output={tmp_path / output}")
  assert run.returncode == 0, run.stderr
  back = text_settings.settings_of(tfbert.load(str(tmp_path / output)))
  assert {key: getattr(back, key) for key in SPANS} == SPANS
  assert back.max_seq_length == 17  # Sweep 18: S became max_position_embeddings.


@pytest.mark.parametrize("fmt, output, is_pair", [
    ("tfbert", "k/m.keras", False), ("hf", "hf", False),
    ("google", "g/bert_model.ckpt", None)])  # Google's format has no room for an arity.
def test_a_converted_classifier_reads_text_as_its_source_does(tmp_path, fmt, output, is_pair):
  """Sweep 18, v03/n61/v13: a run's model.keras converted (to tfbert, hf or google) read
  text at S max_position_embeddings (64) where the run's read 32, and took (text_a, text_b)
  pairs though it reads single texts: convert_checkpoint now writes the S and arity the
  source records, as `tfbert.save` does."""
  model = BertClassifier(helpers.odd_config(), 2, labels=["neg", "pos"])
  model.build()
  vocab = tmp_path / "in_vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
  source = str(tmp_path / "in" / "model.keras")
  tfbert.save(text_settings.attach_text(model, str(vocab), True, 13, is_pair=False), source)
  assert model.config.max_position_embeddings != 13
  run = tool_process.run_tool("convert_checkpoint", "--input_format=tfbert",
                              f"--input={source}", f"--output_format={fmt}",
                              f"--output={tmp_path / output}")
  assert run.returncode == 0, run.stderr
  back = text_settings.settings_of(tfbert.load(str(tmp_path / output)))
  assert (back.max_seq_length, back.is_pair) == (13, is_pair)
  # Sweep 27, B61: the log said the Google output kept is_pair; it says it is not kept.
  assert ("is_pair False is not kept" in run.stderr) is (fmt == "google"), run.stderr


def test_a_vocabulary_longer_than_the_models_vocab_size_is_refused_before_writing(tmp_path):
  """Sweep 19, v01/v02: convert_checkpoint put a vocabulary of more entries than the model's
  vocab_size beside its output, whose ids past the table fail at their first lookup."""
  model = BertClassifier(helpers.odd_config(), 2)
  model.build()
  source = str(tmp_path / "in" / "model.keras")
  convert.save_tfbert_model(model, source)
  vocab = tmp_path / "big_vocab.txt"
  vocab.write_text("".join(f"t{i}\n" for i in range(model.config.vocab_size + 1)))
  with pytest.raises(ValueError, match=re.escape(
      f"--vocab_file={vocab} has {model.config.vocab_size + 1} entries, more than the "
      f"vocab_size {model.config.vocab_size} of --input {source}")):
    convert.convert_checkpoint("tfbert", source, "hf", str(tmp_path / "hf"), vocab_file=str(vocab))
  assert not (tmp_path / "hf").exists()


def test_a_hugging_face_tagger_of_one_tag_is_refused_naming_its_directory(tmp_path):
  """A `BertForTokenClassification` directory with a one-row head would make a one-tag tagger
  (loss 0, it learns nothing): the model refuses it, and the reader names the directory
  (sweep 13, b49's rule reached through a conversion)."""
  model = BertClassifier(helpers.odd_config(), 1)
  model.build()
  hf_dir = tmp_path / "one_tag"
  convert.write_model(model, "hf", str(hf_dir))
  config = json.loads((hf_dir / "config.json").read_text())
  config["architectures"] = ["BertForTokenClassification"]
  config.pop("problem_type", None)
  (hf_dir / "config.json").write_text(json.dumps(config))
  with pytest.raises(ValueError, match=re.escape(f"{hf_dir}: ")) as refused:
    convert.read_model("hf", str(hf_dir))
  assert "LABEL_0" in str(refused.value), refused.value


@pytest.fixture
def named_classifier(tmp_path):
  """A .keras classifier of classes neg/pos saved by tfbert.save (its vocabulary recorded)."""
  model = BertClassifier(helpers.odd_config(), 2, labels=("neg", "pos"))
  model.build()
  vocab = tmp_path / "in_vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
  source = str(tmp_path / "in" / "m.keras")
  tfbert.save(text_settings.attach_text(model, str(vocab), True, 17), source)
  return source


def test_a_classifiers_labels_go_to_and_come_from_google_form(named_classifier, tmp_path):
  """tfbert -> google wrote no labels.txt (tfbert.save does), and google -> hf ignored one
  beside the input: the classes came back as LABEL_0/LABEL_1 (sweep 14, S1)."""
  prefix = str(tmp_path / "g" / "bert_model.ckpt")
  convert.convert_checkpoint("tfbert", named_classifier, "google", prefix)
  assert (tmp_path / "g" / "labels.txt").read_text() == "neg\npos\n"
  assert convert.read_model("google", prefix).labels == ("neg", "pos")
  convert.convert_checkpoint("google", prefix, "hf", str(tmp_path / "hf"))
  assert json.loads((tmp_path / "hf" / "config.json").read_text())["id2label"] == {
      "0": "neg", "1": "pos"}
  (tmp_path / "g" / "labels.txt").write_text("a\nb\nc\n")  # Another model's: refused.
  with pytest.raises(ValueError, match=r"g/labels.txt: 3 labels \['a', 'b', 'c'\] for a "
                                       r"classifier of 2 classes"):
    convert.convert_checkpoint("google", prefix, "hf", str(tmp_path / "hf2"))
  assert not (tmp_path / "hf2").exists()


def test_another_vocabulary_than_a_keras_files_record_is_refused(named_classifier, tmp_path):
  """--vocab_file=<another vocabulary> was written beside the output of a .keras input that
  records its own (tfbert.load refuses it): every id another word piece (sweep 14, S3)."""
  other = tmp_path / "other_vocab.txt"
  other.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nx\n")
  with pytest.raises(ValueError, match=r"m.keras was saved with a vocabulary of 7 lines "
                                       r"\(sha256 \w{12}\), but --vocab_file='.*other_vocab.txt' "
                                       r"has 6 lines .*; leave --vocab_file out: the vocab.txt "
                                       r"beside it \(.*in/vocab.txt\) is that one"):
    convert.convert_checkpoint("tfbert", named_classifier, "google",
                               str(tmp_path / "g" / "bert_model.ckpt"), vocab_file=str(other),
                               allow_casing_mismatch=True)
  assert not (tmp_path / "g").exists()
  os.replace(other, tmp_path / "in" / "vocab.txt")  # Beside it: named as such.
  with pytest.raises(ValueError, match=r"but the vocab.txt beside it .* put the model's own "
                                       r"vocab.txt beside it, or pass --vocab_file="):
    convert.convert_checkpoint("tfbert", named_classifier, "hf", str(tmp_path / "hf"))
  assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize("output_format, example", [("google", "bert_model.ckpt"),
                                                    ("tfbert", "model.keras")])
def test_an_output_ending_in_a_separator_is_refused_before_any_work(tmp_path, monkeypatch,
                                                                    output_format, example):
  """`--output_format=google --output=v13/` wrote hidden `.index`/`.data` files and the side
  files into the current directory (sweep 15, N6): refused as `tfbert.save` refuses it,
  before the input is read (it does not exist here) and with nothing written."""
  monkeypatch.chdir(tmp_path)
  what = "file" if output_format == "tfbert" else "path prefix"
  with pytest.raises(ValueError, match=re.escape(
      f"--output v13/ names a directory: name the {what}")) as error:
    convert.convert_checkpoint("hf", "missing_hf_dir", output_format, "v13/")
  assert str(error.value).endswith(f"to write inside it, e.g. v13/{example}")
  assert os.listdir(tmp_path) == []
