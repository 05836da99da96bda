"""Pretraining on a `tf.io.gfile` filesystem: TensorFlow's in-memory `ram://`.

Every path of `create_pretraining_data` and `run_pretraining` may be a URL (`gs://...`);
`ram://` stands in for a bucket. It lives in this process only, so the test calls the library
functions behind tools/create_pretraining_data.py and tools/run_pretraining.py in-process,
under its own root. The corpus and the vocab are read from there, the records written there,
the run stopped, resumed from its checkpoint and exported there, and what it exported is
loaded back from there.
"""

import json
import os
import uuid

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tfbert.checkpoints import google_checkpoint, pretrained
from tfbert.config import BertConfig
from tfbert.models import BertPretrainer
from tfbert.pretraining import pretraining_data
from tfbert.pretraining.pretraining_run import PretrainingRunConfig, run_pretraining
from tfbert.runtime import atomic, files
from tfbert.serving import export
from tfbert.text import casing
from tfbert.training import optimization, training_loop

SEQ, PRED = 32, 5
TINY = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=19, max_position_embeddings=SEQ, type_vocab_size=2,
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
TOL = 1e-5  # A SavedModel's graph against the eager model, float32.


def _read_metrics(model_dir: str) -> list:
  return [json.loads(line) for line in files.read_text(f"{model_dir}/metrics.jsonl").splitlines()]


def _temporaries(directory: str) -> list:
  """tfbert's and TF's checkpoint temporaries anywhere under `directory`."""
  found = []
  for folder, dirs, names in tf.io.gfile.walk(directory):
    found += [f"{folder}/{n}" for n in dirs + names
              if atomic.is_temporary(n) or training_loop.is_checkpoint_temporary(n.rstrip("/"))]
  return found


@pytest.mark.slow  # ~25 s: two short runs, an evaluation and an export.
def test_data_run_resume_and_exports_live_on_ram(monkeypatch):
  root = f"ram://pretraining-filesystem-{uuid.uuid4().hex}"
  files.makedirs(f"{root}/corpus")
  vocab = f"{root}/vocab.txt"
  files.copy(pretrained.minilm_vocab_file(), vocab)
  pretraining_data.pydoc_corpus(f"{root}/corpus/pydoc.txt", max_documents=20)
  # What tools/create_pretraining_data.py asks first: the vocab's casing (uncased MiniLM).
  assert [e.do_lower_case for e in casing.checkpoint_casing(vocab, vocab)] == [True]

  # The records: read through a glob on ram://, written there whole.
  data_dir = f"{root}/data"
  summary = pretraining_data.create_pretraining_data(
      [f"{root}/corpus/*.txt"], data_dir, pretraining_data.PretrainingDataConfig(
          vocab_file=vocab, max_seq_length=SEQ, max_predictions_per_seq=PRED, dupe_factor=1,
          num_shards=2), log_every_seconds=1e9)
  assert summary["input_files"] == [f"{root}/corpus/pydoc.txt"]
  assert summary["num_instances"] > 0 and summary["unk_rate"] < 0.02  # The vocab was read.
  assert sorted(files.listdir(data_dir)) == [
      "pretraining-00000-of-00002.tfrecord", "pretraining-00001-of-00002.tfrecord",
      "pretraining-summary.json"]
  shards = sorted(files.glob(f"{data_dir}/*.tfrecord"))
  assert sum(1 for _ in tf.data.TFRecordDataset(shards)) == summary["num_instances"]

  # The run: stopped at its checkpoint of step 2, then resumed there by the same config.
  restored = []
  restore = training_loop.TrainingLoop.restore

  def recording_restore(self, *args, **kwargs):
    restored.append(restore(self, *args, **kwargs))
    return restored[-1]

  monkeypatch.setattr(training_loop.TrainingLoop, "restore", recording_restore)
  model_dir = f"{root}/runs/bert"
  optimizer = optimization.OptimizerConfig(optimizer="adamw", learning_rate=1e-3,
                                           num_warmup_steps=1, num_train_steps=4)
  common = dict(bert_config=TINY, input_files=[f"{data_dir}/*.tfrecord"], model_dir=model_dir,
                optimizer=optimizer, train_batch_size=4, max_seq_length=SEQ,
                max_predictions_per_seq=PRED, distribution_strategy="one_device",
                save_checkpoints_steps=2, log_steps=1, seed=3, deterministic=True,
                eval_input_files=[f"{data_dir}/*.tfrecord"], eval_every_steps=2,
                eval_batch_size=4, max_eval_steps=1)
  stopped = run_pretraining(PretrainingRunConfig(stop_at_step=2, **common))
  assert stopped["step"] == 2
  assert not files.exists(f"{model_dir}/export")  # Not finished: not exported.
  first = files.read_text(f"{model_dir}/metrics.jsonl").splitlines()
  assert [(r["step"], r.get("split")) for r in map(json.loads, first)] == [
      (1, None), (2, None), (2, "eval")]
  last = run_pretraining(PretrainingRunConfig(**common))
  assert last["step"] == 4 and np.isfinite(last["loss"])
  assert [step for step, _ in restored] == [0, 2]  # The rerun restored the checkpoint of step 2,
  assert restored[1][1]  # with its data position.
  rows = _read_metrics(model_dir)
  assert files.read_text(f"{model_dir}/metrics.jsonl").splitlines()[:3] == first  # Kept as is.
  assert [(r["step"], r.get("split")) for r in rows[3:]] == [
      (3, None), (4, None), (4, "eval")]
  checkpoints = files.listdir(f"{model_dir}/checkpoints")
  assert {"ckpt-2.index", "ckpt-4.index"} <= set(checkpoints), checkpoints
  assert not _temporaries(root)

  # The run directory explains itself there too.
  assert BertConfig.from_dict(json.loads(files.read_text(f"{model_dir}/bert_config.json"))) == TINY
  data = json.loads(files.read_text(f"{model_dir}/data.json"))
  assert data["vocab_file"] == vocab
  assert data["summaries"] == [f"{data_dir}/pretraining-summary.json"]
  assert files.read_bytes(f"{model_dir}/vocab.txt") == files.read_bytes(vocab)
  assert last["written"]["metrics"] == f"{model_dir}/metrics.jsonl"
  assert last["written"]["saved_model"] == f"{model_dir}/export/saved_model"
  best = json.loads(files.read_text(f"{model_dir}/best/eval_results.json"))
  assert best["step"] in (2, 4)
  assert files.isfile(f"{model_dir}/best/google/bert_model.ckpt.index")

  # The exports load back from ram://: the Google checkpoint into a model, the SavedModel
  # served; both are the trained model (the same outputs), not the initial one.
  prefix = f"{model_dir}/export/google/bert_model.ckpt"
  assert len(google_checkpoint.read_google_checkpoint(prefix)) == 30
  assert files.read_bytes(f"{model_dir}/export/google/vocab.txt") == files.read_bytes(vocab)
  assert {e.do_lower_case for e in casing.checkpoint_casing(prefix)} == {True}  # Found beside.
  model = BertPretrainer(TINY)
  model.build()
  initial = model.encoder.get_weights()
  google_checkpoint.load_google_checkpoint(model, prefix)
  assert any(not np.array_equal(a, b) for a, b in zip(initial, model.encoder.get_weights()))
  features = helpers.random_features(TINY, seed=0, seq=SEQ)
  features = {name: features[name] for name in export.FEATURE_NAMES}
  want = model.encoder(features, training=False)
  serve = tf.saved_model.load(f"{model_dir}/export/saved_model").signatures[
      export.SERVING_SIGNATURE]
  got = serve(**{k: tf.constant(v) for k, v in features.items()})
  for name in export.OUTPUT_NAMES:
    assert helpers.max_abs_diff(got[name].numpy(), want[name]) < TOL, name
  # Nothing went to a local folder (`os.path.abspath` would have made the root one).
  assert not os.path.exists(os.path.abspath(root)) and not os.path.exists(root)
