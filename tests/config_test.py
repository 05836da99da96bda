"""Tests for tfbert.config."""

import json
import os

import pytest

from tfbert.config import BertConfig

RELEASE_FIELDS = ("directionality", "pooler_fc_size", "pooler_num_attention_heads",
                  "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type")


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


def test_unknown_or_missing_json_fields_name_the_file(tmp_path):
  bad = tmp_path / "bad.json"
  bad.write_text(json.dumps({"vocab_size": 5, "hidden_sise": 4}))
  with pytest.raises(ValueError, match=r"bad.json: unknown bert_config field\(s\) \['hidden_sise'\]"):
    BertConfig.from_json_file(str(bad))
  bad.write_text(json.dumps({"hidden_size": 4}))
  with pytest.raises(ValueError, match="bad.json: missing required field 'vocab_size'"):
    BertConfig.from_json_file(str(bad))
  with pytest.raises(FileNotFoundError, match="nope.json"):
    BertConfig.from_json_file(str(tmp_path / "nope.json"))


def test_google_gelu_is_tanh_and_hugging_face_gelu_is_exact():
  assert BertConfig.from_dict({"vocab_size": 5, "hidden_act": "gelu"}).hidden_act == "gelu"
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
])
def test_hugging_face_configs_that_bert_cannot_reproduce_are_refused(change, message):
  hf = {"model_type": "bert", "vocab_size": 5, "hidden_size": 8, "num_attention_heads": 2}
  with pytest.raises(ValueError, match=message):
    BertConfig.from_hf_config({**hf, **change})


def test_config_is_frozen():
  config = BertConfig(vocab_size=5, hidden_size=8, num_attention_heads=2)
  with pytest.raises(Exception):
    config.hidden_size = 16  # type: ignore[misc]
