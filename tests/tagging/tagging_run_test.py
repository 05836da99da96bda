"""Tests for tfbert.tagging.tagging_run and tools/run_ner.py: a tiny model learns a tagging task
that needs context; the tool trains mirrored, in mixed precision, with accumulation, and its
export tags raw text in a fresh process; runs resume exactly and 2 workers equal 2 replicas.
The tools run in the test's process (tests/tool_process.py) unless a process is the point:
the fresh interpreter that serves the export, the worker processes, and the runs compared
with the workers bit for bit (in the full suite an in-process run's evaluation loss differed
from fresh processes' in the last bit; docs/testing.md).

The learning data is tests/conll_synthetic.py's (a person after "met", a location after
"in", an organization before "Labs"/"Corp", all from one pool of words): tagging each word
with its most frequent train tag scores the entity F1 `word_baseline_f1` computes (about
a third); a model must read the context.
"""

import dataclasses
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests import conll_synthetic, helpers, tool_process
from tfbert import BertTokenClassifier
from tfbert.checkpoints import google_checkpoint, huggingface, pretrained
from tfbert.config import BertConfig
from tfbert.runtime import run_directory
from tfbert.tagging import conll, tagging_features, tagging_metrics, tagging_run
from tfbert.text import tokenization
from tfbert.training import workers

ROOT = helpers.ROOT
TOOL = os.path.join(ROOT, "tools", "run_ner.py")
SEQ = 19
# Tiny, odd-sized, the uncased vocab of the MiniLM wheel (30,522 entries).
TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=37, hidden_act="gelu", hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, max_position_embeddings=64, type_vocab_size=2,
            initializer_range=0.1)


def _config_file(tmp_path, **overrides):
  path = str(tmp_path / "bert_config.json")
  BertConfig(**{**TINY, **overrides}).to_json_file(path)
  return path


def _run_config(tmp_path, output, **overrides):
  values = dict(
      output_dir=str(tmp_path / output), train_file=str(tmp_path / "train.conll"),
      eval_file=str(tmp_path / "dev.conll"), vocab_file=pretrained.minilm_vocab_file(),
      bert_config_file=_config_file(tmp_path), max_seq_length=SEQ, doc_stride=5,
      classifier_dropout=0.0, train_batch_size=16, eval_batch_size=32, learning_rate=2e-3,
      num_train_epochs=1.0, seed=7, verbose=0)
  if not overrides.get("do_eval"):  # Read only with do_eval (refused without it).
    del values["eval_file"]
  return tagging_run.NerRunConfig(**{**values, **overrides})


def test_the_same_word_and_tag_column_is_refused_in_flags(tmp_path):
  # Sweep 17 n06: --token_column=-1 is the default --tag_column (the last).
  with pytest.raises(ValueError, match=(
      r"--token_column \(-1\) and --tag_column \(-1, its default: the last\) are the same "
      r"column: .*pass a --token_column or --tag_column")):
    _run_config(tmp_path, "run", token_column=-1, do_train=True)
  with pytest.raises(ValueError, match=r"--tag_column \(2\) are the same column"):
    _run_config(tmp_path, "run", token_column=2, tag_column=2, do_train=True)


def _read_json(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


@pytest.fixture
def ner_dir(tmp_path):
  train, dev = conll_synthetic.sentences(480, seed=1), conll_synthetic.sentences(120, seed=2)
  conll_synthetic.write(tmp_path / "train.conll", train)
  conll_synthetic.write(tmp_path / "dev.conll", dev)
  baseline = tagging_metrics.entity_scores([[t for _, t in s] for s in dev],
                                           conll_synthetic.word_baseline_tags(train, dev))
  return tmp_path, baseline["f1"]


@pytest.mark.parametrize("overrides, message", [
    (dict(do_train=False), "at least one of"),
    (dict(train_file=None), "do_train needs train_file"),
    (dict(tag_scheme="bio"), "tag_scheme must be iob2 or iob1"),
    (dict(doc_stride=18), "doc_stride (18) must be in"),
    (dict(eval_every_steps=5), "add do_eval"),
])
def test_config_names_what_does_not_fit(tmp_path, overrides, message):
  with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
    _run_config(tmp_path, "out", **{"do_train": True, **overrides})


@pytest.mark.parametrize("max_seq_length, stride", [(64, 32), (128, 64), (3, 1)])
def test_the_default_stride_fits_any_window(tmp_path, max_seq_length, stride):
  # run_ner --max_seq_length=64 once failed on its own default stride of 64 (> 64 - 2).
  config = _run_config(tmp_path, "out", do_train=True, max_seq_length=max_seq_length,
                       doc_stride=None)
  assert config.window_stride == stride
  assert tagging_run.NerRunConfig.from_json(config.to_json()) == config
  assert _run_config(tmp_path, "out", do_train=True, doc_stride=5).window_stride == 5


def test_a_bad_line_stops_the_run_before_anything_is_written(tmp_path):
  (tmp_path / "train.conll").write_text("We O\nmet O\nMira I-person\n")
  with pytest.raises(ValueError, match=r"train.conll:3: I-person after O breaks IOB2"):
    tagging_run.run_ner(_run_config(tmp_path, "out", do_train=True))
  assert not os.path.exists(tmp_path / "out")


def test_a_dev_entity_type_the_train_file_lacks_is_scored_as_a_miss(tmp_path, monkeypatch):
  """conlleval's and seqeval's rule: a gold entity the model cannot predict is a miss (it
  was refused as "tag 'B-animal' is not one of the model's labels"); one line names it."""
  (tmp_path / "train.conll").write_text("a B-x\nb O\n")
  (tmp_path / "dev.conll").write_text("a B-x\nb O\n\nc B-animal\nd I-animal\n")
  config = _run_config(tmp_path, "out", do_train=True, do_eval=True)
  inputs = tagging_run.read_inputs(config)
  warnings = []
  monkeypatch.setattr(tagging_run.logging, "warning", warnings.append)
  labels = tagging_run.resolve_labels(config, inputs)
  assert labels == ("O", "B-x", "I-x")
  assert len(warnings) == 1 and "dev.conll: entity type(s) the model has no labels for" in (
      warnings[0]) and "animal (first at line 4)" in warnings[0], warnings
  model = tagging_run.build_tagger(config, labels, tf.distribute.get_strategy())
  features = tagging_features.make_features(inputs["dev"], tokenization.WordPieceTokenizer(
      config.vocab_file, do_lower_case=True), labels, SEQ, 5, unseen_tags_ignored=True)
  scores, _ = tagging_run.evaluate(model, tf.distribute.get_strategy(), config, inputs["dev"],
                                   features)
  assert scores["per_type"]["animal"]["gold"] == 1 and scores["gold"] == 2
  assert scores["per_type"]["animal"]["correct"] == 0 and np.isfinite(scores["loss"])


def _never_build(*args, **kwargs):
  raise AssertionError("the model was built: the best_metric should have been refused first")


def test_a_best_metric_the_evaluation_does_not_return_is_refused_before_any_write(
    ner_dir, monkeypatch):
  """It was found at the first evaluation, after the run directory was claimed and a step
  had trained (a half-written run left behind)."""
  tmp_path, _ = ner_dir
  monkeypatch.setattr(tagging_run.runner, "build_model", _never_build)
  config = _run_config(tmp_path, "out", do_train=True, do_eval=True, eval_every_steps=2,
                       best_metric="entity_f1")
  with pytest.raises(ValueError, match=re.escape(
      "best_metric 'entity_f1' is not among the evaluation's scalars (accuracy, f1, loss, "
      "precision, recall): pass --best_metric=")):
    tagging_run.run_ner(config)
  assert not os.path.exists(tmp_path / "out")
  # The dev file is what the best value is recorded with (a resume on another starts over).
  task = tagging_run.NerTask()
  assert task.eval_files(config, task.read_inputs(config)) == [str(tmp_path / "dev.conll")]


@pytest.mark.slow  # ~10 s: 180 applied steps, evaluation every 60, reloaded and re-scored.
def test_tiny_model_learns_the_context_task_far_above_the_word_baseline(ner_dir):
  tmp_path, baseline = ner_dir
  trained = tagging_run.run_ner(_run_config(
      tmp_path, "trained", do_train=True, do_eval=True, num_train_epochs=6.0,
      eval_every_steps=60))
  scores = trained["eval"]["dev"]
  assert baseline < 50, baseline  # Words alone do not give the types.
  assert scores["f1"] > 95 and scores["f1"] > baseline + 45, (scores, baseline)
  # Some sentences take two windows at S = 19.
  assert trained["train"]["examples"] > 480
  assert trained["train"]["steps"] == trained["train"]["examples"] * 6 // 16
  out = tmp_path / "trained"
  assert _read_json(out / "eval_results.json") == {
      name: {**values, "step": trained["train"]["steps"]}
      for name, values in trained["eval"].items()}
  assert (out / "labels.txt").read_text().split() == [
      "O", "B-location", "I-location", "B-organization", "I-organization", "B-person",
      "I-person"]
  assert _read_json(out / "best" / "eval_results.json")["f1"] >= scores["f1"] - 1e-9
  # The written predictions, scored by the tool against the dev file, give the same scores.
  run = tool_process.run_tool("evaluate_ner", str(tmp_path / "dev.conll"),
                              str(out / "dev_predictions.conll"))
  assert run.returncode == 0, run.stderr[-3000:]
  assert json.loads(run.stdout) == {k: v for k, v in scores.items()
                                    if k not in ("num_sentences", "loss", "file")}
  # The held-out loss (the training loss on the dev windows) is in TensorBoard's eval run
  # beside the entity scores, at each evaluation, and fell as the model learnt.
  eval_tags = helpers.tensorboard_scalars(out / "eval")
  assert {"loss", "f1", "precision", "recall", "accuracy"} <= set(eval_tags)
  steps = trained["train"]["steps"]
  assert [s for s, _ in eval_tags["loss"]] == list(range(60, steps, 60)) + [steps]
  assert eval_tags["loss"][-1][1] == pytest.approx(scores["loss"], rel=1e-6)
  assert scores["loss"] < eval_tags["loss"][0][1], eval_tags["loss"]
  # A run that only predicts, from model.keras alone (its labels travel in the model).
  reloaded = tagging_run.run_ner(_run_config(
      tmp_path, "reloaded", do_train=False, do_eval=True, bert_config_file=None,
      train_file=None, init_tfbert=str(out / "model.keras")))
  assert reloaded["eval"] == trained["eval"]
  # The best model's directory is self-contained: its vocab is beside it.
  from_best = tagging_run.run_ner(_run_config(
      tmp_path, "from_best", do_train=False, do_eval=True, bert_config_file=None,
      train_file=None, vocab_file=None, init_tfbert=str(out / "best" / "model.keras")))
  assert from_best["eval"]["dev"]["f1"] == _read_json(out / "best" / "eval_results.json")["f1"]


def test_hugging_face_token_classification_head_loads_and_pooler_may_be_absent(tmp_path):
  # A BertForTokenClassification checkpoint: the encoder without its pooler, a head
  # `classifier.weight` [C, H], `classifier.bias` [C], and id2label in config.json.
  source = BertTokenClassifier(BertConfig(**TINY), ("O", "B-x", "I-x"))
  source.build()
  hf_dir = tmp_path / "hf"
  weights = {k: v for k, v in google_checkpoint.google_weights(source).items()
             if "pooler" not in k}
  huggingface.save_hf_checkpoint(source.config, weights, str(hf_dir))
  config = _read_json(hf_dir / "config.json")
  config["id2label"] = {"0": "O", "1": "B-x", "2": "I-x"}
  (hf_dir / "config.json").write_text(json.dumps(config))
  (tmp_path / "dev.conll").write_text("a B-x\nb I-x\nc O\n")
  run_config = _run_config(tmp_path, "out", do_train=False, do_eval=True, train_file=None,
                           bert_config_file=None, init_hf_dir=str(hf_dir))
  labels = tagging_run.resolve_labels(run_config, tagging_run.read_inputs(run_config))
  assert labels == ("O", "B-x", "I-x")
  model = tagging_run.build_tagger(run_config, labels, tf.distribute.get_strategy())
  np.testing.assert_array_equal(model.classifier_head.output_weights.numpy(),
                                source.classifier_head.output_weights.numpy())
  np.testing.assert_array_equal(model.encoder.get_weights()[0], source.encoder.get_weights()[0])


def test_a_train_file_lacking_a_type_of_its_source_tagger_keeps_the_taggers_labels(
    tmp_path, monkeypatch):
  """Sweep 18, R1: continued fine-tuning of a tagger on data in which one of its entity
  types never occurs was refused ("its head's labels ... are not this task's"). Labels are
  matched by name: a source whose tags are a superset of the train file's keeps its label
  set (and head) with a log line naming the tags the data lacks; --reinit_head takes the
  train file's; a tag the source lacks stays refused."""
  from tfbert.checkpoints import convert
  theirs = ("O", "B-person", "I-person", "B-x", "I-x")
  source = BertTokenClassifier(BertConfig(**TINY), theirs)
  source.build()
  convert.save_tfbert_model(source, str(tmp_path / "src.keras"), tokenizer_files=False)
  (tmp_path / "train.conll").write_text("a B-x\nb I-x\nc O\n")
  config = _run_config(tmp_path, "out", do_train=True, bert_config_file=None,
                       init_tfbert=str(tmp_path / "src.keras"))
  inputs = tagging_run.read_inputs(config)
  logged = []
  monkeypatch.setattr(tagging_run.logging, "info", logged.append)
  labels = tagging_run.resolve_labels(config, inputs)
  assert labels == theirs
  assert [m for m in logged if m.startswith(
      f"{config.train_file} has no B-person, I-person: the head keeps the 5 labels of "
      f"{tmp_path / 'src.keras'}")], logged
  model = tagging_run.build_tagger(config, labels, tf.distribute.get_strategy())
  np.testing.assert_array_equal(model.classifier_head.output_weights.numpy(),
                                source.classifier_head.output_weights.numpy())
  fresh = dataclasses.replace(config, reinit_head=True)
  assert tagging_run.resolve_labels(fresh, inputs) == ("O", "B-x", "I-x")
  # A Hugging Face token classifier's id2label alike.
  (tmp_path / "hf").mkdir()
  (tmp_path / "hf" / "config.json").write_text(json.dumps(
      {"architectures": ["BertForTokenClassification"], "id2label": dict(enumerate(theirs))}))
  assert tagging_run.resolve_labels(dataclasses.replace(
      config, init_tfbert=None, init_hf_dir=str(tmp_path / "hf")), inputs) == theirs
  (tmp_path / "train.conll").write_text("a B-y\nb O\n")
  other = tagging_run.read_inputs(config)
  labels = tagging_run.resolve_labels(config, other)
  assert labels == ("O", "B-y", "I-y")
  with pytest.raises(ValueError, match="are not this task's"):
    tagging_run.build_tagger(config, labels, tf.distribute.get_strategy())


TAG_SCRIPT = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  Registers the tokenizer's ops.

export_dir, *texts = sys.argv[1:]
out = tf.saved_model.load(export_dir).signatures["tag_text"](text=tf.constant(texts))
rows = []
for b, text in enumerate(texts):
  n, e = int(out["num_words"][b]), int(out["num_entities"][b])
  rows.append({
      "words": [text[s:t] for s, t in zip(out["word_starts"][b, :n].numpy(),
                                          out["word_ends"][b, :n].numpy())],
      "tags": [t.decode() for t in out["tags"][b, :n].numpy()],
      "entities": [[k.decode(), text[s:t]] for k, s, t in zip(
          out["entity_types"][b, :e].numpy(), out["entity_starts"][b, :e].numpy(),
          out["entity_ends"][b, :e].numpy())]})
print(json.dumps({"rows": rows, "tfbert_imported": "tfbert" in sys.modules}))
"""


@pytest.mark.slow  # ~20 s: the tool trains, evaluates, predicts and exports in this process; a
# fresh one serves the export.
@pytest.mark.parametrize("dtype", ["mixed_float16"])
def test_tool_trains_mirrored_with_accumulation_and_its_export_tags_raw_text(ner_dir, dtype):
  tmp_path, _ = ner_dir
  test = conll_synthetic.sentences(6, seed=5)
  conll_synthetic.write(tmp_path / "test.conll", [[(w, "O") for w, _ in s] for s in test])
  out, export_dir = tmp_path / "out", tmp_path / "export"
  # In this process (its 2 logical CPU devices are tests/conftest.py's).
  run = tool_process.run_tool(
      "run_ner", f"--train_file={tmp_path / 'train.conll'}",
      f"--eval_file={tmp_path / 'dev.conll'}", f"--predict_file={tmp_path / 'test.conll'}",
      "--do_train", "--do_eval", "--do_predict",
      f"--vocab_file={pretrained.minilm_vocab_file()}",
      f"--bert_config_file={_config_file(tmp_path)}", f"--max_seq_length={SEQ}",
      "--doc_stride=5", "--train_batch_size=16", "--gradient_accumulation_steps=2",
      "--learning_rate=2e-3", "--num_train_epochs=4", f"--dtype={dtype}",
      "--distribution_strategy=mirrored", "--num_cpu_devices=2",
      f"--output_dir={out}", f"--export_dir={export_dir}", "--verbose=2")
  assert run.returncode == 0, run.stderr[-3000:]
  scores = _read_json(out / "eval_results.json")["dev"]
  assert scores["file"] == str(tmp_path / "dev.conll")  # Whose scores (sweep 19 S1).
  assert scores["f1"] > 80, scores  # 120 steps in mixed precision (float32 learns to > 95).
  windows = _read_json(out / "train_results.json")["examples"]
  assert f"steps={windows * 4 // 16} " in run.stdout
  predicted = conll.read_conll(str(out / "test_predictions.conll"))
  # Which file they tag (sweep 26, A91: a rerun on another replaced them silently).
  assert _read_json(out / "predictions_source.json") == {
      "dev_predictions.conll": str(tmp_path / "dev.conll"),
      "test_predictions.conll": str(tmp_path / "test.conll")}
  assert [s.words for s in predicted] == [tuple(w for w, _ in s) for s in test]
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  env["TF_CPP_MIN_LOG_LEVEL"] = "2"
  texts = [" ".join(w for w, _ in s) for s in test]
  served = subprocess.run([sys.executable, "-c", TAG_SCRIPT, str(export_dir), *texts],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
  assert served.returncode == 0, served.stderr[-3000:]
  report = json.loads(served.stdout.strip().splitlines()[-1])
  assert not report["tfbert_imported"]
  for row, sentence in zip(report["rows"], predicted):
    # BERT's words of these texts are the CoNLL words, but for U+FE0F, which has no piece
    # (and so no word in raw text); the export's tags are the tool's.
    kept = [(w, t) for w, t in zip(sentence.words, sentence.tags) if w != "\ufe0f"]
    assert row["words"] == [w for w, _ in kept]
    assert row["tags"] == [t for _, t in kept]
    expected = sorted(
        (kind, " ".join(sentence.words[start:end + 1])) for _, kind, start, end in
        tagging_metrics.entities([sentence.tags]))
    assert sorted(map(tuple, row["entities"])) == expected


def _worker_args(tmp_path, out, *more):
  # One layer: its attention and hidden dropout falsify a wrong resume or replica mask as
  # two do, and each of the test's 3 runs and 2 workers builds and traces it.
  config = _config_file(tmp_path, num_hidden_layers=1, hidden_dropout_prob=0.1,
                        attention_probs_dropout_prob=0.1)
  return [sys.executable, TOOL, f"--train_file={tmp_path / 'train.conll'}",
          f"--eval_file={tmp_path / 'dev.conll'}", "--do_train", "--do_eval",
          f"--vocab_file={pretrained.minilm_vocab_file()}", f"--bert_config_file={config}",
          f"--max_seq_length={SEQ}", "--doc_stride=5", "--train_batch_size=8",
          "--gradient_accumulation_steps=2", "--max_train_steps=4", "--eval_every_steps=2",
          "--save_checkpoints_steps=2", "--eval_batch_size=6", f"--output_dir={out}", *more]


def _assert_counts_equal_scores_close(got, want, where="eval_results"):
  """Integers (counts) equal, floats within 1e-5 relative, at any depth."""
  if isinstance(want, dict):
    assert sorted(got) == sorted(want), where
    for key, value in want.items():
      _assert_counts_equal_scores_close(got[key], value, f"{where}.{key}")
  elif isinstance(want, float):
    assert got == pytest.approx(want, rel=1e-5), where
  else:
    assert got == want, where


@pytest.mark.slow  # ~30 s: 2 replicas straight, stopped and resumed; 2 worker processes.
def test_resumed_and_two_worker_runs_end_equal_to_the_straight_run(ner_dir):
  """Dropout on, a 1-layer model, 2 replicas, evaluation every 2 of 4 applied steps: a run
  stopped at step 2 and rerun equals the straight run bit for bit; 2 worker processes equal
  it to 1e-5 (the same examples and dropout masks per replica, summed in another order) with
  the same dev predictions (each window scored once).

  The straight, stopped and resumed runs are the tool in this process (tests/tool_process.py):
  a normal stop needs no process, and the bit-for-bit comparison is between runs of one
  process. The workers, a second process by nature, are held to the 1e-5 bound."""
  tmp_path, _ = ner_dir
  # The fixture's last 24 dev sentences: 25 windows (one sentence takes 2), 4 batches of 6
  # and one of 1, as its 120 sentences' 121 windows end; each of the 5 runs evaluates up to
  # 3 times, and the count changes nothing compared.
  conll_synthetic.write(tmp_path / "dev.conll", conll_synthetic.sentences(120, seed=2)[96:])
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
  mirrored = ("--distribution_strategy=mirrored", "--num_cpu_devices=2")
  straight, resumed, mw = tmp_path / "straight", tmp_path / "resumed", tmp_path / "mw"
  for args in (_worker_args(tmp_path, straight, *mirrored),
               _worker_args(tmp_path, resumed, *mirrored, "--stop_at_step=2"),
               _worker_args(tmp_path, resumed, *mirrored)):
    run = tool_process.run_tool("run_ner", *args[2:])
    assert run.returncode == 0, run.stderr[-3000:]
  assert "resumed from" in run.stdout + run.stderr
  assert helpers.saved_weight_deviation(straight, resumed) == 0.0
  command = _worker_args(tmp_path, mw, "--distribution_strategy=multi_worker")
  for worker in workers.launch_workers(command, cwd=ROOT, timeout=600, env=env):
    assert worker.returncode == 0, worker.stdout[-3000:]
  # float32 sums in another order (~1e-7), lifted by Adam to ~1e-6; another replica layout
  # moves weights by ~1e-2.
  assert helpers.saved_weight_deviation(mw, straight) < 1e-5
  assert (mw / "dev_predictions.conll").read_text() == (
      straight / "dev_predictions.conll").read_text()
  # Every window scored once: the counts are exact; the scores and the held-out loss within
  # the weights' 1e-5 (an in-process straight run's loss once differed in its last bit).
  _assert_counts_equal_scores_close(_read_json(mw / "eval_results.json"),
                                    _read_json(straight / "eval_results.json"))
  assert sorted(os.listdir(mw / ".worker1")) == sorted([run_directory.LOCK_FILE, "checkpoints"])


@pytest.mark.parametrize("id2label, message", [
    ({"0": "LABEL_0", "1": "LABEL_1"}, "has no id2label of IOB tags"),
    ({"0": "O", "2": "B-x"}, "id2label must map the ids 0..C-1"),
    (None, "has no id2label of IOB tags"),
])
def test_a_hugging_face_source_without_iob_tags_is_refused_naming_its_config(
    tmp_path, id2label, message):
  """Without a train file the tags come from the source's config.json: Hugging Face's
  default names, ids with a gap, or none at all are refused, naming the file."""
  values = {"model_type": "bert"} if id2label is None else {"id2label": id2label}
  hf_dir = tmp_path / "hf"
  hf_dir.mkdir()
  (hf_dir / "config.json").write_text(json.dumps(values), encoding="utf-8")
  config = tagging_run.NerRunConfig(output_dir=str(tmp_path / "out"), do_eval=True,
                                    eval_file="dev.conll", init_hf_dir=str(hf_dir))
  with pytest.raises(ValueError, match=message) as e:
    tagging_run.resolve_labels(config, {})
  assert str(hf_dir / "config.json") in str(e.value) or str(hf_dir) in str(e.value)


def test_eval_only_on_a_run_stopped_before_its_labels_says_so_and_how_to_finish_it(tmp_path):
  """Issue 47: a run with checkpoints but no model.keras (stopped mid-training) was told
  "no labels: give train_file (with do_train) ..."; its labels are recorded nowhere else."""
  out = tmp_path / "out"
  (out / "checkpoints").mkdir(parents=True)
  for step in (2, 4):
    (out / "checkpoints" / f"ckpt-{step}.index").write_bytes(b"")
  config = tagging_run.NerRunConfig(output_dir=str(out), do_eval=True, eval_file="dev.conll")
  with pytest.raises(ValueError) as e:
    tagging_run.resolve_labels(config, {})
  assert str(e.value) == (
      f"no labels: {out} holds the checkpoints of a tagging run (latest {out}/checkpoints/"
      "ckpt-4, applied step 4) that stopped before writing its model.keras and labels.txt; its "
      "labels are recorded nowhere else (a checkpoint holds weights only). Finish the run "
      "first: rerun it with --do_train (it resumes from its checkpoint), then evaluate")
  with pytest.raises(ValueError, match="^no labels: give train_file"):  # No run there.
    tagging_run.resolve_labels(dataclasses.replace(config, output_dir=str(tmp_path / "new")),
                               {})
