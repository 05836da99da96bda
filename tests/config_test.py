"""Tests for tfbert.config."""

import json
import os
import re
import threading

import numpy as np
import pytest

from tfbert.config import ACTIVATIONS, RELEASE_FIELDS, REQUIRED_FIELDS, BertConfig


def test_reads_google_release_config_and_keeps_release_fields_on_round_trip(shared_data,
                                                                            tmp_path):
  path = os.path.join(shared_data, "google_chinese_bert_base_index_only", "bert_config.json")
  config = BertConfig.from_json_file(path)
  assert (config.vocab_size, config.hidden_size, config.num_hidden_layers) == (21128, 768, 12)
  assert config.pooler_type == "first_token_transform"
  out = tmp_path / "bert_config.json"
  config.to_json_file(str(out))
  with open(path) as f:
    original = json.load(f)
  with open(out) as f:
    written = json.load(f)
  assert written == original  # Every field, release extras included, survives.
  assert set(RELEASE_FIELDS) <= set(written)


def test_minimal_config_writes_no_release_fields(tmp_path):
  config = BertConfig(vocab_size=11, hidden_size=6, num_attention_heads=3)
  config.to_json_file(str(tmp_path / "c.json"))
  assert not set(RELEASE_FIELDS) & set(json.loads((tmp_path / "c.json").read_text()))
  assert BertConfig.from_json_file(str(tmp_path / "c.json")) == config


def test_a_missing_directory_is_named_not_the_hidden_temporary(tmp_path):
  # Sweep 34, B4b: the error named '.../.tfbert-tmp-<pid>-<hex>', a file nobody asked for.
  config = BertConfig(vocab_size=11, hidden_size=6, num_attention_heads=3)
  missing = tmp_path / "no" / "such"
  with pytest.raises(FileNotFoundError) as e:
    config.to_json_file(str(missing / "bert_config.json"))
  assert e.value.filename == str(missing) and "tfbert-tmp" not in str(e.value)
  assert f"{missing / 'bert_config.json'} cannot be written" in str(e.value)
  assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("kwargs, message", [
    (dict(hidden_size=30, num_attention_heads=4), "hidden_size (30) is not a multiple of "
                                                  "num_attention_heads (4)"),
    (dict(hidden_act="swish"), "hidden_act 'swish'"),
    (dict(num_hidden_layers=0), "num_hidden_layers must be a positive integer"),
    (dict(hidden_dropout_prob=1.0), "hidden_dropout_prob must be in [0, 1)"),
])
def test_invalid_values_fail_naming_the_field(kwargs, message):
  with pytest.raises(ValueError) as e:
    BertConfig(vocab_size=11, **kwargs)
  assert message in str(e.value)


def test_numpy_integer_sizes_are_taken_as_plain_ints(tmp_path):
  """A size computed with NumPy (np.int64) was refused as "must be a positive integer"."""
  config = BertConfig(vocab_size=np.int64(11), hidden_size=np.int32(6),
                      num_attention_heads=np.uint8(3), pooler_fc_size=np.int64(6))
  assert config == BertConfig(vocab_size=11, hidden_size=6, num_attention_heads=3,
                              pooler_fc_size=6)
  assert type(config.vocab_size) is int and type(config.pooler_fc_size) is int
  config.to_json_file(str(tmp_path / "c.json"))  # JSON cannot write a NumPy integer.
  assert BertConfig.from_json_file(str(tmp_path / "c.json")) == config
  for value in (6.0, np.float64(6), np.bool_(True)):
    with pytest.raises(ValueError, match="hidden_size must be a positive integer"):
      BertConfig(vocab_size=11, hidden_size=value, num_attention_heads=3)


def _tiny_google_config(shared_data) -> dict:
  """The real bert_config.json of keras-bert's run_pretraining.py checkpoint."""
  with open(os.path.join(shared_data, "keras_bert_test_checkpoint", "bert_config.json")) as f:
    return json.load(f)


def _write(tmp_path, values) -> str:
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(values))
  return str(path)


def test_a_file_missing_fields_is_refused_naming_the_file_and_every_missing_field(
    shared_data, tmp_path):
  # The reported defect: such a file silently became BERT-Base (12 layers, width 3072).
  values = _tiny_google_config(shared_data)
  assert set(values) == set(REQUIRED_FIELDS + RELEASE_FIELDS)  # Google writes all of them.
  del values["num_hidden_layers"], values["intermediate_size"]
  path = _write(tmp_path, values)
  with pytest.raises(ValueError) as e:
    BertConfig.from_json_file(path)
  assert str(e.value) == (f"{path}: missing bert_config field(s) num_hidden_layers, "
                          "intermediate_size")
  with pytest.raises(ValueError, match="missing bert_config field"):
    BertConfig.from_dict({"vocab_size": 5})
  # Python code keeps BERT-Base defaults.
  assert BertConfig(vocab_size=5).num_hidden_layers == 12


def test_a_typo_is_refused_naming_the_field_it_looks_like(shared_data, tmp_path):
  # An error, not a warning: the misspelt setting would silently not be applied (here the
  # model would get 12 layers), and a warning scrolls past in a training log.
  values = _tiny_google_config(shared_data)
  values["num_hidden_layer"] = values.pop("num_hidden_layers")
  values["extra_setting"] = 1
  path = _write(tmp_path, values)
  with pytest.raises(ValueError) as e:
    BertConfig.from_json_file(path)
  assert str(e.value) == (f"{path}: missing bert_config field(s) num_hidden_layers; unknown "
                          "bert_config field(s) extra_setting, num_hidden_layer "
                          "(did you mean num_hidden_layers?)")


@pytest.mark.parametrize("change, message", [
    ({"hidden_size": "4"}, "BertConfig: hidden_size must be a positive integer, got '4'"),
    ({"vocab_size": -15}, "BertConfig: vocab_size must be a positive integer, got -15"),
    ({"max_position_embeddings": 16.0},
     "BertConfig: max_position_embeddings must be a positive integer, got 16.0"),
    ({"num_hidden_layers": True}, "BertConfig: num_hidden_layers must be a positive integer"),
    ({"hidden_dropout_prob": "0.1"},
     "BertConfig: hidden_dropout_prob must be a finite number, got '0.1'"),
    ({"initializer_range": float("nan")}, "BertConfig: initializer_range must be a finite number"),
    ({"num_attention_heads": 3}, "BertConfig: hidden_size (4) is not a multiple of "
                                 "num_attention_heads (3)"),
    ({"hidden_act": ["gelu"]}, "BertConfig: hidden_act ['gelu'] is not one of"),
    ({"pooler_fc_size": "768"}, "BertConfig: pooler_fc_size must be a positive integer"),
])
def test_a_wrong_value_in_a_file_is_refused_naming_the_file_and_field(shared_data, tmp_path,
                                                                      change, message):
  path = _write(tmp_path, {**_tiny_google_config(shared_data), **change})
  with pytest.raises(ValueError) as e:
    BertConfig.from_json_file(path)
  assert str(e.value).startswith(f"{path}: {message}")
  assert "\n" not in str(e.value)


def test_a_file_that_is_not_a_config_object_is_named(tmp_path):
  bad = tmp_path / "bad.json"
  bad.write_text("[1, 2]")
  with pytest.raises(ValueError, match="bad.json: expected a JSON object, got list"):
    BertConfig.from_json_file(str(bad))
  bad.write_text('{"vocab_size": 5,')
  with pytest.raises(ValueError, match="bad.json: not valid JSON"):
    BertConfig.from_json_file(str(bad))
  with pytest.raises(FileNotFoundError, match="nope.json"):
    BertConfig.from_json_file(str(tmp_path / "nope.json"))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")
def test_a_named_pipe_config_is_refused_naming_the_flag_before_it_is_opened(tmp_path):
  """run_pretraining --bert_config_file=<a named pipe> waited forever for a writer."""
  pipe = str(tmp_path / "config.fifo")
  os.mkfifo(pipe)
  def write():  # A writer, so that a read that opens the pipe ends (and fails the test).
    with open(pipe, "w", encoding="utf-8") as f:
      f.write("{}")
  writer = threading.Thread(target=write, daemon=True)
  writer.start()
  try:
    with pytest.raises(ValueError, match=re.escape(
        f"--bert_config_file {pipe} is a named pipe: a config is read by opening its file")
        + ".*write it to a regular file first"):
      BertConfig.from_json_file(pipe, "--bert_config_file")
    with pytest.raises(ValueError, match=re.escape(f"config file {pipe} is a named pipe")):
      BertConfig.from_hf_json_file(pipe)
  finally:
    if writer.is_alive():  # Never opened: a reader lets the writer's open return.
      reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
      writer.join(5)
      os.close(reader)


def test_a_field_given_twice_is_refused_naming_the_file_and_field(tmp_path):
  # Old code: the last value was used without a word (sweep 6, C16: hidden_size 32, then 64).
  text = json.dumps(BertConfig(vocab_size=11, hidden_size=32, num_attention_heads=4).to_dict())
  twice = tmp_path / "bert_config.json"
  twice.write_text(text[:-1] + ', "hidden_size": 64}')
  with pytest.raises(ValueError, match=rf"^{re.escape(str(twice))}: key 'hidden_size' appears "
                     r"twice in one JSON object \(32, then 64\); which one is meant cannot be "
                     "told: keep one$"):
    BertConfig.from_json_file(str(twice))


def test_a_config_saved_with_a_byte_order_mark_is_read(tmp_path):
  """Windows editors write one; json.load refused it ("Unexpected UTF-8 BOM")."""
  path = tmp_path / "bert_config.json"
  path.write_text("\ufeff" + json.dumps(BertConfig(
      vocab_size=9, hidden_size=4, num_hidden_layers=1, num_attention_heads=1,
      intermediate_size=5).to_dict()), "utf-8")
  assert BertConfig.from_json_file(str(path)).vocab_size == 9
  assert BertConfig.from_hf_json_file(str(path)).vocab_size == 9


def test_google_gelu_is_tanh_and_hugging_face_gelu_is_exact():
  assert BertConfig(vocab_size=5, hidden_act="gelu").hidden_act == "gelu"
  hf = {"model_type": "bert", "vocab_size": 5, "hidden_size": 8, "num_attention_heads": 2,
        "hidden_act": "gelu", "layer_norm_eps": 1e-12, "pad_token_id": 0}
  config = BertConfig.from_hf_config(hf)
  assert config.hidden_act == "gelu_exact"
  assert config.to_hf_config()["hidden_act"] == "gelu"
  assert BertConfig.from_hf_config({**hf, "hidden_act": "gelu_new"}).hidden_act == "gelu"
  assert BertConfig.from_hf_config(config.to_hf_config()) == config


@pytest.mark.parametrize("change, message", [
    ({"model_type": "roberta"}, "model_type 'roberta' is not 'bert'"),
    ({"layer_norm_eps": 1e-5}, "layer_norm_eps 1e-05 differs"),
    ({"position_embedding_type": "relative_key"}, "only absolute position embeddings"),
    ({"hidden_act": "silu"}, "unsupported hidden_act 'silu'"),
    # Sweep 34, B1/B29: a decoder's causal mask was dropped without a word.
    ({"is_decoder": True}, "is_decoder is true: transformers runs this model with a causal "
     "mask"),
])
def test_hugging_face_configs_that_bert_cannot_reproduce_are_refused(change, message):
  hf = {"model_type": "bert", "vocab_size": 5, "hidden_size": 8, "num_attention_heads": 2}
  with pytest.raises(ValueError, match=message):
    BertConfig.from_hf_config({**hf, **change})
  assert BertConfig.from_hf_config({**hf, "is_decoder": False}).vocab_size == 5


def test_a_hugging_face_config_gets_transformers_defaults_for_omitted_fields():
  # transformers itself fills these (its type_vocab_size is 2, not Google's 16).
  config = BertConfig.from_hf_config({"model_type": "bert", "vocab_size": 5, "hidden_size": 8,
                                      "num_attention_heads": 2, "architectures": ["BertModel"]})
  assert (config.type_vocab_size, config.num_hidden_layers, config.intermediate_size) == (
      2, 12, 3072)


def test_config_is_frozen():
  config = BertConfig(vocab_size=5, hidden_size=8, num_attention_heads=2)
  with pytest.raises(Exception):
    config.hidden_size = 16  # type: ignore[misc]


def test_every_problem_of_a_config_is_named_at_once():
  with pytest.raises(ValueError) as e:
    BertConfig(vocab_size=5, hidden_size=8, num_attention_heads=3, hidden_act="relu6",
               hidden_dropout_prob=1.0)
  assert str(e.value) == (
      f"BertConfig: hidden_act 'relu6' is not one of {ACTIVATIONS}; hidden_size (8) is not a "
      "multiple of num_attention_heads (3); hidden_dropout_prob must be in [0, 1), got 1.0")
