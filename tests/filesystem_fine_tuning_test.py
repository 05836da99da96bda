"""Fine-tuning runs on a `tf.io.gfile` filesystem: TensorFlow's in-memory `ram://`.

Every input and output path of the fine-tuning tools takes a URL (`gs://...`) where it takes
a local path; `ram://` stands in for a bucket. It lives in this process only, so the tests
call the library behind the tools in-process (`run_classifier`, `run_ner`, `run_squad`),
each with its own root (`_root`). The inputs (task data, vocab, `bert_config.json`) are
read from `ram://`; the run directory (run records, checkpoints, TensorBoard events,
metrics.jsonl, the best model) and the export are written there, a rerun resumes from the
checkpoint there, and the export is loaded from there and answers.
"""

import json
import os
import uuid

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  Registers the export's tokenizer ops.

from tests import conll_synthetic, glue_synthetic
from tfbert.checkpoints import pretrained
from tfbert.classifier import classifier_run
from tfbert.config import BertConfig
from tfbert.runtime import atomic, files
from tfbert.squad import squad_features, squad_postprocess, squad_run
from tfbert.tagging import tagging_run
from tfbert.training import training_loop
from tfbert_tools.demos.squad_synthetic import synthetic_squad

SEQ = 25
# tests/classifier/classifier_run_test.py's TINY (the MiniLM wheel's uncased vocab), with one
# layer: what is proven here is where the runs read and write, not the model.
TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
            intermediate_size=37, hidden_act="gelu", hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, max_position_embeddings=128, type_vocab_size=2,
            initializer_range=0.1)


def _root() -> str:
  """A fresh `ram://` directory for one test."""
  return f"ram://tfbert-tasks-test-{uuid.uuid4().hex}"


def _upload(local: str, url: str) -> str:
  files.makedirs(files.parent(url))
  files.copy(str(local), url)
  return url


def _inputs(root: str) -> dict:
  """The vocab and a tiny bert_config.json on `ram://`."""
  files.makedirs(f"{root}/inputs")
  config = f"{root}/inputs/bert_config.json"
  BertConfig(**TINY).to_json_file(config)
  return dict(vocab_file=_upload(pretrained.minilm_vocab_file(), f"{root}/inputs/vocab.txt"),
              bert_config_file=config)


def _read_json(path: str):
  return json.loads(files.read_text(path))


def _metric_rows(run_dir: str) -> list[dict]:
  return [json.loads(line) for line in files.read_text(f"{run_dir}/metrics.jsonl").splitlines()]


def _restored_steps(monkeypatch) -> list[int]:
  """The step each `TrainingLoop.restore` of the test resumes from, in order."""
  steps = []
  restore = training_loop.TrainingLoop.restore

  def spy(self):
    result = restore(self)
    steps.append(result[0])
    return result

  monkeypatch.setattr(training_loop.TrainingLoop, "restore", spy)
  return steps


def _assert_no_temporaries(directory: str) -> None:
  """No staging or temporary name (`tfbert.runtime.atomic`'s) is left."""
  names = [n for n in files.listdir(directory) if atomic.is_temporary(n) or "tmp" in n]
  assert not names, (directory, names)


@pytest.mark.slow  # ~45-75 s: two short classifier runs (the second resumes), an export (~20 s).
def test_a_classifier_run_its_resume_and_its_export_live_on_ram(tmp_path, monkeypatch):
  root = _root()
  glue_synthetic.write_mrpc(tmp_path / "train.tsv", glue_synthetic.fruit_pairs(64, seed=1))
  glue_synthetic.write_mrpc(tmp_path / "dev.tsv", glue_synthetic.fruit_pairs(32, seed=2))
  data_dir = f"{root}/glue/MRPC"
  for name in ("train.tsv", "dev.tsv"):
    _upload(tmp_path / name, f"{data_dir}/{name}")
  out, export_dir = f"{root}/runs/mrpc", f"{root}/exports/mrpc"
  restored = _restored_steps(monkeypatch)
  inputs = _inputs(root)

  def run(steps, export_to=None):
    return classifier_run.run_classifier(classifier_run.ClassifierRunConfig(
        output_dir=out, export_dir=export_to, task_name="mrpc", data_dir=data_dir,
        **inputs, max_seq_length=SEQ, classifier_dropout=0.0, train_batch_size=16,
        eval_batch_size=64, learning_rate=1e-3, num_train_epochs=2.0, seed=7, verbose=0,
        do_train=True, do_eval=True, max_train_steps=steps, eval_every_steps=2, log_steps=1,
        save_checkpoints_steps=2))

  first = run(2)
  assert first["train"]["steps"] == 2 and restored == [0]
  second = run(4, export_dir)  # Resumes at the checkpoint of step 2, on ram://; exports.
  assert second["train"]["steps"] == 4 and restored == [0, 2]
  assert [r["step"] for r in _metric_rows(out) if "split" not in r] == [1, 2, 3, 4]
  assert [r["step"] for r in _metric_rows(out) if r.get("split") == "eval"] == [2, 4]

  names = set(files.listdir(out))
  assert {"run_config.json", "bert_config.json", "vocab.txt"} <= names  # The run records.
  assert {"model.keras", "train_results.json", "eval_results.json", "dev_predictions.tsv",
          "metrics.jsonl", "checkpoints", "train", "eval", training_loop.BEST_DIR} <= names
  assert files.read_bytes(f"{out}/vocab.txt") == files.read_bytes(f"{root}/inputs/vocab.txt")
  assert _read_json(f"{out}/train_results.json")["steps"] == 4
  assert _read_json(f"{out}/eval_results.json") == json.loads(json.dumps(
      {name: {**values, "step": 4} for name, values in second["eval"].items()}))
  checkpoints = files.listdir(f"{out}/checkpoints")
  assert "checkpoint" in checkpoints and any(n.startswith("ckpt-4") for n in checkpoints)
  assert tf.train.latest_checkpoint(f"{out}/checkpoints").endswith("ckpt-4")
  for events in ("train", "eval"):
    assert any(n.startswith("events.out.tfevents") for n in files.listdir(f"{out}/{events}"))
  best = f"{out}/{training_loop.BEST_DIR}"
  assert {"model.keras", "vocab.txt", "eval_results.json"} <= set(files.listdir(best))
  assert _read_json(f"{best}/eval_results.json")["step"] in (2, 4)
  for directory in (out, best, f"{root}/runs", f"{root}/exports"):
    _assert_no_temporaries(directory)

  assert files.listdir(f"{root}/exports") == ["mrpc"]
  classify = tf.saved_model.load(export_dir).signatures["classify_text"]
  answer = classify(text_a=tf.constant(["Mira has 3 apples."]),
                    text_b=tf.constant(["Mira brought 9 apples."]))
  assert answer["label"].numpy()[0].decode() in ("0", "1")
  np.testing.assert_allclose(answer["probabilities"].numpy().sum(), 1.0, rtol=1e-5)


@pytest.mark.slow  # ~25-50 s: a short NER run with evaluation (tests/serving exports on ram://).
def test_a_ner_run_reads_conll_and_writes_its_run_on_ram(tmp_path):
  root = _root()
  conll_synthetic.write(tmp_path / "train.conll", conll_synthetic.sentences(32, seed=1))
  conll_synthetic.write(tmp_path / "dev.conll", conll_synthetic.sentences(16, seed=2))
  train = _upload(tmp_path / "train.conll", f"{root}/ner/train.conll")
  dev = _upload(tmp_path / "dev.conll", f"{root}/ner/dev.conll")
  out = f"{root}/runs/ner"
  result = tagging_run.run_ner(tagging_run.NerRunConfig(
      output_dir=out, train_file=train, eval_file=dev, **_inputs(root),
      max_seq_length=SEQ, doc_stride=5, classifier_dropout=0.0, train_batch_size=16,
      eval_batch_size=32, learning_rate=2e-3, num_train_epochs=1.0, seed=7, verbose=0,
      do_train=True, do_eval=True, max_train_steps=2, eval_every_steps=2))
  assert result["train"]["steps"] == 2
  names = set(files.listdir(out))
  assert {"model.keras", "train_results.json", "eval_results.json", "checkpoints",
          tagging_run.LABELS_FILE, training_loop.BEST_DIR} <= names
  assert all(p.startswith(root) for p in result["written"]), result["written"]
  assert [r["step"] for r in _metric_rows(out) if r.get("split") == "eval"] == [2]
  assert files.listdir(f"{out}/{training_loop.BEST_DIR}")
  _assert_no_temporaries(out)


@pytest.mark.slow  # ~25-50 s: a short SQuAD run that predicts, and its features cache.
def test_a_squad_run_reads_json_and_writes_predictions_on_ram(tmp_path):
  root = _root()
  train, dev = f"{root}/squad/train.json", f"{root}/squad/dev.json"
  files.makedirs(f"{root}/squad")
  for path, value in ((train, synthetic_squad(8, seed=1)), (dev, synthetic_squad(4, seed=2))):
    with files.open_file(path, "w") as f:
      json.dump(value, f)
  out = f"{root}/runs/squad"
  inputs = _inputs(root)

  def run():
    return squad_run.run_squad(squad_run.SquadRunConfig(
        output_dir=out, train_file=train, predict_file=dev, **inputs,
        features=squad_features.FeatureConfig(max_seq_length=64, doc_stride=32,
                                              max_query_length=16),
        postprocess=squad_postprocess.PostprocessConfig(n_best_size=5, max_answer_length=8),
        train_batch_size=4, predict_batch_size=16, learning_rate=3e-3, num_train_epochs=1.0,
        seed=7, verbose=0, do_train=True, do_predict=True, max_train_steps=2))

  result = run()
  assert result["train"]["steps"] == 2 and 0 <= result["scores"]["f1"] <= 100
  names = set(files.listdir(out))
  assert {"model.keras", "predictions.json", "nbest_predictions.json", "checkpoints"} <= names
  predictions = _read_json(f"{out}/predictions.json")
  assert len(predictions) == len(squad_run.squad_data.read_squad_file(dev, False).examples)
  again = run()  # A rerun of the finished run: nothing to train, the same predictions.
  assert again["scores"] == result["scores"]
  assert os.path.basename(out) == "squad"
  _assert_no_temporaries(out)
