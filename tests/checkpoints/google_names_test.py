"""Tests for tfbert.checkpoints.google_names: the name table covers every weight exactly once."""

import os

import pytest

from tests import helpers
from tfbert import BertClassifier, BertConfig, BertEncoder, BertPretrainer, BertSpanLabeler
from tfbert.checkpoints import google_checkpoint, google_names


@pytest.mark.parametrize("make, heads", [
    (BertEncoder, ()),
    (BertPretrainer, ("cls/predictions/", "cls/seq_relationship/")),
    (BertSpanLabeler, ("cls/squad/",)),
    (lambda c: BertClassifier(c, 4), ("output_",)),
])
def test_every_weight_has_exactly_one_google_name(make, heads):
  model = make(helpers.odd_config())
  mapping = google_names.google_variable_map(model)
  assert len(mapping) == len(model.weights)
  assert len({id(v) for v in mapping.values()}) == len(model.weights)
  # 5 embedding tensors + 16 per layer + 2 pooler, as in google-research/bert's BertModel.
  assert sum(n.startswith("bert/") for n in mapping) == 5 + 16 * 3 + 2
  for name in mapping:
    assert name.startswith(("bert/",) + heads), name


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_every_variable_of_googles_chinese_bert_base_release_maps(shared_data):
  # The real index of Google's chinese_L-12_H-768_A-12 release (206 variables, no data shard).
  folder = os.path.join(shared_data, "google_chinese_bert_base_index_only")
  listed = google_checkpoint.list_google_checkpoint(os.path.join(folder, "bert_model.ckpt"))
  assert len(listed) == 206
  config = BertConfig.from_json_file(os.path.join(folder, "bert_config.json"))
  model = BertPretrainer(config)
  mapping = google_names.google_variable_map(model)
  shapes = {name: tuple(v.shape) for name, v in mapping.items()}
  assert shapes == listed  # Same names, same shapes, none left over on either side.


def test_optimizer_slots_and_counters_are_ignored():
  for name in ("bert/pooler/dense/bias/adam_m", "cls/predictions/output_bias/adam_v",
               "global_step"):
    assert google_names.is_ignored(name)
  assert not google_names.is_ignored("bert/pooler/dense/bias")
