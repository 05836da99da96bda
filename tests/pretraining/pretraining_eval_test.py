"""tfbert.pretraining.pretraining_eval: held-out MLM/NSP metrics, each example once."""

import glob
import os

import numpy as np
import pytest

from tests import helpers
from tfbert import BertConfig, BertPretrainer
from tfbert.checkpoints import pretrained
from tfbert.pretraining import data_checks, input_pipeline, pretraining_eval, raw_text_run
from tfbert.pretraining.pretraining_run import PretrainingRunConfig
from tfbert.training import distribution, optimization

SEQ, PRED = 32, 5
TINY = BertConfig(vocab_size=30522, hidden_size=14, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=19, max_position_embeddings=SEQ, type_vocab_size=2)
TEXT_MODEL = BertConfig(vocab_size=30522, hidden_size=14, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=19, max_position_embeddings=SEQ,
                        type_vocab_size=2, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)


@pytest.fixture(scope="module")
def eval_files(tmp_path_factory):
  """Three shards of pydoc-corpus records (odd counts)."""
  folder = helpers.pydoc_records(tmp_path_factory.mktemp("eval_data"), SEQ, PRED,
                                 max_documents=9, num_shards=3)
  check = data_checks.check_pretraining_files(os.path.join(folder, "*.tfrecord"), SEQ, PRED,
                                              30522)
  return dict(zip(check.files, check.records))


def test_every_worker_gets_the_fewest_full_batches_of_any_shard():
  records = {"c": 9, "a": 7, "b": 5}
  # 2 workers of 2 sequences: worker 0 reads a and c (16: 8 batches), worker 1 b (5: 2).
  assert pretraining_eval.eval_steps(records, 2, 4, max_eval_steps=100) == 2
  assert pretraining_eval.eval_steps(records, 2, 4, max_eval_steps=1) == 1
  assert pretraining_eval.eval_steps(records, 1, 3, max_eval_steps=100) == 7  # 21 // 3.
  with pytest.raises(ValueError, match=r"fewer than one eval batch of 6 sequences for a "
                                       r"worker \(full batches per worker: \[2, 0\]\)"):
    pretraining_eval.eval_steps(records, 2, 12, max_eval_steps=100)


def _numpy_metrics(model, files, batch_size, steps):
  """The metrics from the model's full-sequence logits (every position, not only the
  masked ones), in float64, over the first `steps` batches in file order."""
  dataset = input_pipeline.pretraining_dataset(files, batch_size, seq_length=SEQ,
                                               max_predictions=PRED, shuffle=False,
                                               repeat=False)
  return _numpy_metrics_of(model, dataset, steps)


def _numpy_metrics_of(model, dataset, steps):
  """`_numpy_metrics` over the first `steps` batches of `dataset` (without NSP labels: the
  objective "mlm", no `nsp_*` metrics)."""
  nsp = "next_sentence_labels" in dataset.element_spec
  sums = dict.fromkeys(pretraining_eval.SUMS if nsp else pretraining_eval.SUMS[:3], 0.0)
  for features in dataset.take(steps):
    outputs = model(features, training=False)
    logits = outputs["mlm_logits"].numpy().astype(np.float64)  # [B, P, V] at the positions.
    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(
        -1, keepdims=True)) - logits.max(-1, keepdims=True)
    ids = features["masked_lm_ids"].numpy()
    weights = features["masked_lm_weights"].numpy().astype(np.float64)
    picked = np.take_along_axis(log_probs, ids[..., None], -1)[..., 0]
    sums["mlm_loss_sum"] += float(-(picked * weights).sum())
    sums["mlm_weight"] += float(weights.sum())
    sums["mlm_correct"] += float(((logits.argmax(-1) == ids) * weights).sum())
    if not nsp:
      continue
    nsp_logits = outputs["nsp_logits"].numpy().astype(np.float64)
    labels = features["next_sentence_labels"].numpy().reshape(-1)
    nsp_log = nsp_logits - np.log(np.exp(nsp_logits).sum(-1, keepdims=True))
    sums["nsp_loss_sum"] += float(-nsp_log[np.arange(len(labels)), labels].sum())
    sums["nsp_count"] += len(labels)
    sums["nsp_correct"] += float((nsp_logits.argmax(-1) == labels).sum())
  return pretraining_eval.metrics_from_sums(sums)


@pytest.mark.parametrize("replicas", [1, 2])
def test_metrics_equal_a_float64_oracle_over_the_same_examples(eval_files, replicas):
  strategy = distribution.create_strategy("mirrored" if replicas > 1 else "one_device",
                                          replicas)
  with strategy.scope():
    model = BertPretrainer(TINY)
    model.build()
  files = sorted(eval_files)
  steps = pretraining_eval.eval_steps(eval_files, 1, 6, max_eval_steps=5)
  assert steps == 5
  evaluator = pretraining_eval.Evaluator(model, strategy, pretraining_eval.record_dataset(
      files, strategy, batch_size=6, seq_length=SEQ, max_predictions=PRED,
      objective="mlm_nsp"), batch_size=6, steps=steps)
  found = evaluator()
  expected = _numpy_metrics(model, files, 6, steps)
  assert evaluator.examples == 30
  # float32 logits and sums against float64 on the same logits: ~1e-6 relative.
  assert found == pytest.approx(expected, rel=1e-5)
  assert 0.0 <= found["mlm_accuracy"] <= 1.0 and found["mlm_loss"] > 5.0  # An untrained model.
  # The perplexity is the exp of the float64 NumPy loss.
  assert found["mlm_perplexity"] == pytest.approx(float(np.exp(expected["mlm_loss"])), rel=1e-5)
  assert evaluator() == found  # From the start again: the same examples.


@pytest.mark.slow  # ~5 s: the text files are counted and read through the in-graph tokenizer.
def test_held_out_text_is_planned_by_its_sequences_and_masked_alike_at_every_evaluation(
    tmp_path):
  """`eval_text_files`: the batches per evaluation from the files' packed sequences (3 topics
  in 2 files), the metrics those of a float64 oracle over the same masked batches, and a
  second evaluation masks the very same tokens (masks drawn from each sequence's place in
  the files, not from a running generator)."""
  os.makedirs(tmp_path / "text")
  text = helpers.pydoc_text_files(tmp_path / "text", max_documents=3, num_files=2)
  config = raw_text_run.resolve(PretrainingRunConfig(
      bert_config=TEXT_MODEL, input_files=[], train_text_files=[text], eval_text_files=[text],
      objective="mlm", model_dir=str(tmp_path / "unused"),
      optimizer=optimization.OptimizerConfig(), max_seq_length=SEQ,
      max_predictions_per_seq=PRED, vocab_file=pretrained.minilm_vocab_file(), seed=11))
  records = raw_text_run.eval_records(config)  # Counted right: text_pipeline_test.py.
  assert sorted(records) == sorted(glob.glob(text)) and min(records.values()) >= 3
  assert pretraining_eval.eval_steps(records, 1, 3, 10**6) == sum(records.values()) // 3
  steps = 4
  strategy = distribution.create_strategy("mirrored", 1)
  with strategy.scope():
    model = BertPretrainer(TEXT_MODEL, objective="mlm")
    model.build()
  dataset = raw_text_run.eval_dataset(config, strategy, 3, 1, 0)
  evaluator = pretraining_eval.Evaluator(model, strategy, dataset, batch_size=3, steps=steps)
  found = evaluator()
  assert set(found) == {"mlm_loss", "mlm_accuracy", "mlm_perplexity", "loss"}
  expected = _numpy_metrics_of(model, dataset, steps)  # Its own pass over the same batches.
  assert found == pytest.approx(expected, rel=1e-5)  # float32 against float64, as above.
  assert found["mlm_perplexity"] == pytest.approx(float(np.exp(expected["mlm_loss"])), rel=1e-5)
  assert evaluator() == found  # The same sequences with the same masks: bit for bit.
