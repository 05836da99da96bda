"""Tests for tests/grappler.py: the suite's graphs run unrewritten, and that changes nothing a
proof of tfbert's logic reads."""

import json

import pytest

from tests import glue_synthetic, grappler, helpers
from tfbert.checkpoints import pretrained
from tfbert.classifier import classifier_run
from tfbert.config import BertConfig

TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=64)


def test_the_suite_runs_its_graphs_unrewritten_unless_a_test_asks():
  assert grappler.grappler_on() is grappler.ALWAYS


@pytest.mark.grappler
def test_a_marked_test_runs_with_the_rewrites():
  assert grappler.grappler_on()


def _rows(out):
  with open(out / "metrics.jsonl", encoding="utf-8") as f:
    return [{k: v for k, v in json.loads(line).items() if k != "examples_per_second"}
            for line in f]


@pytest.mark.slow  # ~12 s: two tiny runs.
def test_a_run_with_the_rewrites_ends_as_the_run_without(tmp_path):
  """A 2-replica classifier run with accumulation and evaluations, once with Grappler's
  rewrites (the product) and once without (the suite): every logged loss and accuracy
  within 1e-5 and every weight within 1e-5 after 6 AdamW steps.

  Why 1e-5: the rewrites may fuse a MatMul with its bias and activation (oneDNN), which
  rounds float32 sums in another order (~1e-7 relative), lifted by Adam's division by
  the root of the second moment to ~1e-6 in the weights; measured here: 6e-8. A wrong
  set-up is far outside it: the same run on one replica instead of two moved the weights by
  1.5e-2 (AMD EPYC Zen 5), as would any rewrite that changed what the graph computes."""
  data = tmp_path / "glue"
  data.mkdir()
  glue_synthetic.write_mrpc(data / "train.tsv", glue_synthetic.fruit_pairs(160, seed=1))
  glue_synthetic.write_mrpc(data / "dev.tsv", glue_synthetic.fruit_pairs(36, seed=2))
  BertConfig(**TINY).to_json_file(str(tmp_path / "bert_config.json"))

  def run(name, on, **overrides):
    grappler.set_grappler(on)
    try:
      classifier_run.run_classifier(classifier_run.ClassifierRunConfig(**{**dict(
          output_dir=str(tmp_path / name), task_name="mrpc", data_dir=str(data),
          vocab_file=pretrained.minilm_vocab_file(),
          bert_config_file=str(tmp_path / "bert_config.json"), max_seq_length=25,
          train_batch_size=8, eval_batch_size=12, learning_rate=1e-3, max_train_steps=6,
          gradient_accumulation_steps=2, eval_every_steps=3, log_steps=1, do_train=True,
          do_eval=True, distribution_strategy="mirrored", num_cpu_devices=2, seed=7,
          verbose=0), **overrides}))
    finally:
      grappler.set_grappler(grappler.ALWAYS)
    return tmp_path / name

  rewritten, plain = run("rewritten", True), run("plain", False)
  rows, plain_rows = _rows(rewritten), _rows(plain)
  assert [(r["step"], r.get("split")) for r in rows] == [
      (r["step"], r.get("split")) for r in plain_rows]
  assert len(rows) == 6 + 2  # Every step logged, two evaluations.
  for row, other in zip(rows, plain_rows):
    numbers = {k: v for k, v in row.items() if k != "split"}
    assert numbers == pytest.approx({k: other[k] for k in numbers}, rel=1e-5)
  assert helpers.saved_weight_deviation(rewritten, plain) < 1e-5
