"""Tests for tfbert.tasks.fine_tuning: reproducible epochs, and k micro-batches == one big batch.

The `fit` equivalence runs the way `run_squad` and `run_classifier` do: the model is built in
a strategy's scope (so Keras' `fit` first draws a batch from a throw-away iterator to build
it), compiled with the `tfbert.training.optimization` stack, and trained by `fit_steps`.
"""

import dataclasses
import json
import math
import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfbert import BertClassifier, BertConfig, BertSpanLabeler, BertTokenClassifier
from tfbert.checkpoints import pretrained
from tfbert.classifier.classifier_run import ClassifierRunConfig
from tfbert.embeddings.embedding_run import EmbeddingRunConfig
from tfbert.runtime import cli
from tfbert.squad import squad_features
from tfbert.squad.squad_run import SquadRunConfig
from tfbert.tagging.tagging_run import NerRunConfig
from tfbert.tasks import fine_tuning, source_heads
from tfbert.text import casing
from tfbert.training import optimization

CONFIG = BertConfig(vocab_size=41, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=19, max_position_embeddings=13, type_vocab_size=2,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
SEQ, CLASSES, EXAMPLES = 11, 3, 17


def _take(dataset, count):
  return [int(x) for x in dataset.take(count).as_numpy_iterator()]


def _stream(seed=3, size=7, **kwargs):
  return fine_tuning.shuffled_batches(np.arange(size), size, 1, seed, **kwargs).unbatch()


def test_every_iterator_yields_the_same_sequence_of_new_permutations():
  dataset = _stream()
  first = _take(dataset, 21)
  iterator = iter(dataset)
  next(iterator)  # What Keras' symbolic build does with its own iterator.
  assert _take(dataset, 21) == first
  epochs = [first[i:i + 7] for i in range(0, 21, 7)]
  assert all(sorted(epoch) == list(range(7)) for epoch in epochs)
  assert len({tuple(epoch) for epoch in epochs}) == 3  # A new order each epoch.
  assert epochs[0] != list(range(7))
  assert _take(_stream(seed=4), 7) != epochs[0]


def test_the_stateful_shuffle_it_replaces_reorders_each_new_iterator():
  # The trap, shown on TensorFlow itself: the second iterator sees another order.
  dataset = tf.data.Dataset.range(50).shuffle(50, seed=3, reshuffle_each_iteration=True)
  assert _take(dataset.repeat(), 50) != _take(dataset.repeat(), 50)


def test_batches_cut_one_stream_and_a_start_seeks_into_it():
  """Batch i holds stream positions [i*b, (i+1)*b), across epoch ends; starting at batch m
  (a resumed run) gives what follows the first m batches, the seed's stream throughout."""
  stream = _take(_stream(size=7), 40)
  batches = [list(b) for b in fine_tuning.shuffled_batches(
      np.arange(7), 7, 3, 3).take(13).as_numpy_iterator()]
  assert batches == [stream[3 * i:3 * i + 3] for i in range(13)]
  for start in (1, 2, 5, 9):  # 9 * 3 = 27: in the fourth epoch, mid-epoch.
    resumed = [list(b) for b in fine_tuning.shuffled_batches(
        np.arange(7), 7, 3, 3, start=start).take(4).as_numpy_iterator()]
    assert resumed == batches[start:start + 4], start


def test_replica_shards_partition_every_step():
  """2 workers of 2 replicas each (R = 4): worker w keeps batches i with i % 4 in {2w, 2w+1};
  together they hold every batch once, in order, from any start."""
  every = [list(b) for b in fine_tuning.shuffled_batches(
      np.arange(11), 11, 2, 5, start=8).take(16).as_numpy_iterator()]
  shards = [[list(b) for b in fine_tuning.shuffled_batches(
      np.arange(11), 11, 2, 5, start=8, batches_per_step=4, keep=range(2 * w, 2 * w + 2))
      .take(8).as_numpy_iterator()] for w in range(2)]
  for step in range(4):
    assert shards[0][2 * step:2 * step + 2] + shards[1][2 * step:2 * step + 2] == \
        every[4 * step:4 * step + 4]


def test_structured_elements_stay_aligned():
  ids = np.arange(9 * 2).reshape(9, 2)
  labels = np.arange(9) * 100
  for features, targets in fine_tuning.shuffled_batches(
      ({"ids": ids}, {"label": labels}), 9, 1, seed=1).unbatch().take(18):
    row = int(features["ids"][0]) // 2
    assert int(targets["label"]) == 100 * row and int(features["ids"][1]) == 2 * row + 1


def test_an_empty_dataset_is_refused():
  with pytest.raises(ValueError, match="empty"):
    fine_tuning.shuffled_batches(np.zeros([0]), 0, 1, seed=1)


def _examples():
  rng = np.random.default_rng(5)
  lengths = rng.integers(4, SEQ + 1, EXAMPLES)
  mask = (np.arange(SEQ)[None] < lengths[:, None]).astype(np.int32)
  features = {"input_ids": rng.integers(1, CONFIG.vocab_size, (EXAMPLES, SEQ)).astype(np.int32)
              * mask, "input_mask": mask, "segment_ids": np.zeros((EXAMPLES, SEQ), np.int32)}
  labels = rng.integers(0, CLASSES, EXAMPLES).astype(np.int32)
  return features, {"logits": labels}


def _fit(initial, gradient_accumulation_steps, batch_size=6, steps=9):
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  with strategy.scope():
    model = BertClassifier(CONFIG, CLASSES, dropout_rate=0.0)
    model.build()
    model.set_weights(initial)
    model.compile(optimizer=optimization.create_optimizer(optimization.OptimizerConfig(
        optimizer="adamw", learning_rate=3e-3, num_warmup_steps=2, num_train_steps=steps,
        lr_schedule="decay_after_warmup", weight_decay_rate=0.01, clip_norm=0.5,
        gradient_accumulation_steps=gradient_accumulation_steps, accumulation_reduction="mean")))
  # Batched and prefetched as the runs do: the throw-away iterator's prefetching then
  # reaches into later epochs, which a stateful reshuffle lets change the order.
  dataset = fine_tuning.shuffled_batches(_examples(), EXAMPLES,
                                         batch_size // gradient_accumulation_steps, seed=11)
  summary = fine_tuning.fit_steps(model, dataset, steps=steps,
                                  gradient_accumulation_steps=gradient_accumulation_steps,
                                  num_examples=EXAMPLES, batch_size=batch_size, verbose=0)
  return model.get_weights(), summary


@pytest.mark.slow
def test_k_micro_batches_in_fit_equal_one_big_batch():
  keras.utils.set_random_seed(2)
  model = BertClassifier(CONFIG, CLASSES, dropout_rate=0.0)
  model.build()
  initial = model.get_weights()
  # 9 steps of 6 over 17 examples: several epochs, each starting mid-batch.
  big, summary = _fit(initial, 1)
  accumulated, accumulated_summary = _fit(initial, 3)
  assert summary["steps"] == accumulated_summary["steps"] == 9
  moved = max(float(np.abs(a - b).max()) for a, b in zip(big, initial))
  deviation = max(float(np.abs(a - b).max()) for a, b in zip(big, accumulated))
  # AdamW with clipping: summing 3 micro-batch gradients instead of one batch changes float32
  # rounding (~1e-7 relative), which Adam's normalization can lift to ~1e-6 on tiny
  # gradients; other examples or windows move weights by ~1e-2 (the bug this catches).
  assert moved > 1e-2
  assert deviation < 1e-5, deviation


@pytest.mark.parametrize("steps, k, examples, batch, want", [
    (343, 1, 3668, 32, (4, 86)),    # MRPC x 3 epochs: not 3 x 114 + a 1-step epoch.
    (308, 4, 9885, 32, (1, 1232)),  # The SQuAD recipe with 4 x 8.
    (9, 3, 17, 6, (5, 6)),          # Fewer examples than windows need: whole windows.
])
def test_keras_epochs_are_even_whole_windows_covering_the_run(steps, k, examples, batch, want):
  epochs, per_epoch = fine_tuning.keras_epochs(steps, k, examples, batch)
  assert (epochs, per_epoch) == want
  assert per_epoch % k == 0 and steps * k <= epochs * per_epoch < steps * k + epochs * k


def test_vocab_beside_an_init_tfbert_model_is_found(tmp_path):
  # A run directory (and convert's tfbert output) holds vocab.txt beside model.keras.
  config = fine_tuning.FineTuningConfig(output_dir=str(tmp_path / "out"),
                                        init_tfbert=str(tmp_path / "run" / "model.keras"))
  with pytest.raises(ValueError, match=f"no vocab.txt in {tmp_path / 'run'}"):
    fine_tuning.resolve_vocab_file(config)
  (tmp_path / "run").mkdir()
  (tmp_path / "run" / "vocab.txt").write_text("[PAD]\n")
  assert fine_tuning.resolve_vocab_file(config) == str(tmp_path / "run" / "vocab.txt")


def test_casing_follows_the_checkpoint_and_a_contradicting_flag_fails(tmp_path):
  def resolved(**kwargs):
    config = fine_tuning.FineTuningConfig(output_dir=str(tmp_path / "out"), **kwargs)
    return fine_tuning.resolve_casing(config).do_lower_case

  minilm = pretrained.minilm_dir()  # Its tokenizer_config.json says do_lower_case: true.
  assert resolved(init_hf_dir=minilm) is True
  with pytest.raises(casing.CasingMismatchError,
                     match=r"--do_lower_case=false says .* but .*tokenizer_config.json"):
    resolved(init_hf_dir=minilm, do_lower_case=False)
  assert resolved(init_hf_dir=minilm, do_lower_case=False, allow_casing_mismatch=True) is False
  # A run's best model: the run directory's run_config.json and the cased vocab beside it.
  best = tmp_path / "run" / "best"
  best.mkdir(parents=True)
  (tmp_path / "run" / "run_config.json").write_text('{"do_lower_case": false}')
  (best / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nThe\n")
  assert resolved(init_tfbert=str(best / "model.keras")) is False
  with pytest.raises(casing.CasingMismatchError, match="run_config.json"):
    resolved(init_tfbert=str(best / "model.keras"), do_lower_case=True)


def test_another_models_vocab_is_named_as_such_before_its_casing(tmp_path):
  """Sweep 28, A94: a cased vocabulary of another size given with MiniLM was refused as a
  casing mismatch; the vocabulary is another model's, which the size says first."""
  cased = tmp_path / "cased_vocab.txt"
  cased.write_text("".join(f"{t}\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                           + [f"Word{i}" for i in range(995)]))
  config = fine_tuning.FineTuningConfig(output_dir=str(tmp_path / "out"),
                                        init_hf_dir=pretrained.minilm_dir(),
                                        vocab_file=str(cased))
  with pytest.raises(ValueError, match=rf"--vocab_file={re.escape(str(cased))} has 1000 "
                     r"entries, 29522 fewer than the vocab_size 30522 of --init_hf_dir="):
    fine_tuning.resolve_casing(config)
  # Of the model's size, it is refused as another vocabulary than the source's vocab.txt,
  # the first id where they differ named (sweep 31, A36); its casing is only a symptom.
  cased.write_text("".join(f"{t}\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                           + [f"Word{i}" for i in range(30517)]))
  with pytest.raises(ValueError, match=r"is not the vocabulary of .*: its id 1 is '\[UNK\]' "
                                       r"where the source's vocab.txt .* has '\[unused0\]'"):
    fine_tuning.resolve_casing(config)


def test_init_tfbert_of_a_sentence_encoder_initializes_the_encoder_and_says_the_head_is_fresh(
    tmp_path, caplog):
  """Sweep 17 R1: a run_embeddings model.keras (its class registered) starts a task's
  encoder; the log says the head starts fresh (it said only "2 missing")."""
  from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
  encoder = BertSentenceEncoder(CONFIG)
  encoder({"input_ids": np.ones((1, 5), np.int32)})
  path = str(tmp_path / "model.keras")
  encoder.save(path)
  config = fine_tuning.FineTuningConfig(output_dir=str(tmp_path / "out"), init_tfbert=path)
  bert_config, weights, source = fine_tuning.initial_weights(config)
  assert source == path and bert_config.hidden_size == CONFIG.hidden_size
  model = BertClassifier(CONFIG, num_classes=CLASSES)
  model({"input_ids": np.ones((1, 5), np.int32)})
  with caplog.at_level("INFO", logger="absl"):
    report = fine_tuning.assign_initial_weights(model, weights, source, "classifier_head",
                                                 True)
  assert report.missing and "classifier_head starts fresh" in caplog.text, caplog.text


def test_init_tfbert_names_a_keras_file_that_is_not_a_tfbert_model(tmp_path):
  plain = str(tmp_path / "plain.keras")
  keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]).save(plain)
  truncated = str(tmp_path / "truncated.keras")
  with open(plain, "rb") as f, open(truncated, "wb") as out:
    out.write(f.read()[:300])
  for path, message in ((plain, "not a tfbert model: holds a keras Sequential"),
                        (truncated, "not a valid .keras file (not a zip archive")):
    config = fine_tuning.FineTuningConfig(output_dir=str(tmp_path / "out"), init_tfbert=path)
    with pytest.raises(ValueError) as e:  # Before: AttributeError / "File not found".
      fine_tuning.initial_weights(config)
    assert str(e.value).startswith(f"{path}: {message}"), e.value


@pytest.mark.parametrize("names, message", [
    (["saved_model.pb"], "{path} is a SavedModel export (it serves; it holds no checkpoint to "
                         "read: use its run's model.keras)"),
    (["model.keras"], "{path} is a tfbert run directory, not a .keras model file: pass its "
                      "model {path}/model.keras"),
    (["notes.txt"], "{path} is a directory: name the .keras model in it (e.g. "
                    "{path}/model.keras)"),
])
def test_init_tfbert_naming_a_directory_says_what_it_is(tmp_path, names, message):
  """Sweep 33, A89, A92, A93: an export given as --init_tfbert was told to name the
  model.keras in it, which it does not hold; export_tflite's --model and
  convert_checkpoint's --input already said what it is and where the model is."""
  path = tmp_path / "given"
  path.mkdir()
  for name in names:
    (path / name).write_text("")
  config = fine_tuning.FineTuningConfig(output_dir=str(tmp_path / "out"), init_tfbert=str(path))
  with pytest.raises(ValueError) as e:
    fine_tuning.check_sources(config)
  assert str(e.value) == "--init_tfbert " + message.format(path=path)


_SAVE_ON_FULL_DISK = """
import dataclasses, os, sys
from tests.tasks import fine_tuning_test
from tfbert import BertClassifier
from tfbert.tasks import fine_tuning
config = dataclasses.replace(fine_tuning_test.CONFIG, vocab_size=3001)  # > 64 KiB of weights
model = BertClassifier(config, 3)
model.build()
try:
  fine_tuning.save_without_optimizer(model, os.path.join(sys.argv[1], "model.keras"))
except OSError as e:
  print("failed:", e)
"""


@pytest.mark.slow
def test_saving_the_model_on_a_full_disk_leaves_no_file(small_disk):
  # Before: a truncated model.keras under its final name ("File not found" when loaded).
  result = small_disk.run(_SAVE_ON_FULL_DISK, small_disk.path)
  assert result.returncode == 0, result.stderr[-3000:]
  output = os.path.join(small_disk.path, "model.keras")
  assert result.stdout.strip().splitlines()[-1].startswith(f"failed: cannot write {output}: "), (
      small_disk.kind, result.stdout)
  assert small_disk.files() == []


def test_each_config_names_only_its_own_fields_among_what_a_rerun_may_change():
  """The shared set names shared fields only; a task adds its own (once, a shared set named
  the task configs' fields, each task taking the others' names too)."""
  for config_class in (fine_tuning.FineTuningConfig, ClassifierRunConfig, SquadRunConfig,
                       NerRunConfig):
    fields = {field.name for field in dataclasses.fields(config_class)}
    assert config_class.RERUN_MAY_CHANGE <= fields, (
        config_class.__name__, sorted(config_class.RERUN_MAY_CHANGE - fields))
    assert fine_tuning.FineTuningConfig.RERUN_MAY_CHANGE <= config_class.RERUN_MAY_CHANGE
  assert {"do_predict", "postprocess"} <= SquadRunConfig.RERUN_MAY_CHANGE
  assert {"do_eval", "eval_file"} <= NerRunConfig.RERUN_MAY_CHANGE
  assert "skip_malformed_rows" in ClassifierRunConfig.RERUN_MAY_CHANGE


def _log_softmax(logits):
  logits = logits.astype(np.float64)
  shifted = logits - logits.max(axis=-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def test_eval_loss_is_the_training_loss_averaged_over_every_example():
  """Against float64 NumPy: the classifier's cross-entropy and squared error, the tagger's
  per-window mean over labelled positions (ignored: -1; a window without any counts 0),
  the span labeler's mean of start and end. float32 logits of magnitude <= 3: the model's
  float32 losses match float64 within 1e-6 relative."""
  rng = np.random.default_rng(7)
  logits = rng.normal(size=(9, 3)).astype(np.float32)
  classes = rng.integers(0, 3, 9)
  expected = -np.mean(_log_softmax(logits)[np.arange(9), classes])
  got = fine_tuning.eval_loss(BertClassifier(CONFIG, 3), {"logits": logits},
                              {"logits": classes.astype(np.int32)})
  assert got == pytest.approx(expected, rel=1e-6)
  scores = rng.normal(size=(9, 1)).astype(np.float32)
  targets = rng.normal(size=(9, 1)).astype(np.float32)
  got = fine_tuning.eval_loss(BertClassifier(CONFIG, 1), {"logits": scores},
                              {"logits": targets})
  assert got == pytest.approx(np.mean((scores.astype(np.float64) - targets) ** 2), rel=1e-6)

  tag_logits = rng.normal(size=(5, 7, 4)).astype(np.float32)
  label_ids = rng.integers(-1, 4, (5, 7)).astype(np.int32)
  label_ids[2] = -1  # A window with no labelled position.
  log_probs = _log_softmax(tag_logits)
  per_window = []
  for window in range(5):
    labelled = [p for p in range(7) if label_ids[window, p] >= 0]
    per_window.append(-np.mean([log_probs[window, p, label_ids[window, p]] for p in labelled])
                      if labelled else 0.0)
  got = fine_tuning.eval_loss(BertTokenClassifier(CONFIG, [f"t{i}" for i in range(4)]),
                              {"logits": tag_logits}, label_ids)
  assert got == pytest.approx(np.mean(per_window), rel=1e-6)

  start, end = (rng.normal(size=(6, 11)).astype(np.float32) for _ in range(2))
  starts, ends = rng.integers(0, 11, 6), rng.integers(0, 11, 6)
  expected = -np.mean(0.5 * (_log_softmax(start)[np.arange(6), starts]
                             + _log_softmax(end)[np.arange(6), ends]))
  got = fine_tuning.eval_loss(BertSpanLabeler(CONFIG), {"start_logits": start, "end_logits": end},
                              {"start_logits": starts.astype(np.int32),
                               "end_logits": ends.astype(np.int32)})
  assert got == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("epochs", [math.inf, math.nan, 0.0])
def test_a_number_of_epochs_that_gives_no_step_count_is_refused(epochs, tmp_path):
  """inf epochs used to pass the check and crash computing the step count (OverflowError)."""
  with pytest.raises(ValueError, match=r"num_train_epochs \((inf|nan|0.0)\) must be a finite "
                                       r"number > 0"):
    fine_tuning.FineTuningConfig(output_dir=str(tmp_path), num_train_epochs=epochs)


@pytest.mark.parametrize("field, value, message", [
    ("clip_norm", 0.0, "clip_norm (0.0) must be a finite number > 0, or off: 0 on the "
     "command line "
     "(--clip_norm=0), None in Python"),
    ("learning_rate", -1.0, "learning_rate (-1.0) must be >= 0"),
    ("weight_decay_rate", -0.5, "weight_decay_rate (-0.5) must be >= 0 (0: no weight decay)"),
])
def test_optimizer_settings_are_named_alone_as_the_optimizer_config_names_them(
    tmp_path, field, value, message):
  """Issue 47: the fine-tuning tools said "clip_norm must be > 0 (None: no clipping)", of a
  flag whose off value is 0, and named learning_rate with weight_decay_rate; the wording
  is `OptimizerConfig`'s (one function for clip_norm)."""
  with pytest.raises(ValueError) as error:
    fine_tuning.FineTuningConfig(output_dir=str(tmp_path), **{field: value})
  assert str(error.value) == f"FineTuningConfig: {message}"
  with pytest.raises(ValueError, match=re.escape(message)):
    optimization.OptimizerConfig(num_train_steps=10, **{field: value})


def test_an_empty_output_dir_is_refused_naming_the_setting():
  """It used to fail after reading the data with "[Errno 2] No such file or directory: ''"."""
  with pytest.raises(ValueError, match="output_dir is empty"):
    fine_tuning.FineTuningConfig(output_dir="")


def test_a_new_output_directorys_parent_says_nothing_of_the_casing(tmp_path):
  """Its parent's files were read as the new run's records: a cased tokenizer_config.json
  there refused an uncased run (or, beside a vocabulary without cased letters, decided it)."""
  (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": false}')
  vocab = tmp_path / "vocab_files" / "vocab.txt"
  vocab.parent.mkdir()
  vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n\u4e00\n")  # No cased letters.
  config = fine_tuning.FineTuningConfig(output_dir=str(tmp_path / "new_run"),
                                        vocab_file=str(vocab))
  assert fine_tuning.resolve_casing(config).do_lower_case is True  # The default, not false.


def test_settings_that_size_a_buffer_or_a_window_are_bounded(tmp_path):
  """`--train_batch_size=4 --group_by_length=1000000000` failed deep in TensorFlow with a
  negative TopKV2 dimension: the window of 4e9 rows overflowed int32."""
  with pytest.raises(ValueError, match=re.escape(
      "group_by_length (1000000000) x train_batch_size (4) is a grouping window of "
      f"4000000000 rows, more than {fine_tuning.MAX_WINDOW_ROWS}: group_by_length must be <= "
      f"{fine_tuning.MAX_WINDOW_ROWS // 4} at this batch size")):
    fine_tuning.FineTuningConfig(output_dir=str(tmp_path), train_batch_size=4,
                                 group_by_length=10**9)
  fine_tuning.FineTuningConfig(output_dir=str(tmp_path), train_batch_size=4,
                               group_by_length=fine_tuning.MAX_WINDOW_ROWS // 4)  # The bound.
  with pytest.raises(ValueError, match=re.escape(
      f"train_batch_size (2147483648) must be <= {2**31 - 1}")):
    fine_tuning.FineTuningConfig(output_dir=str(tmp_path), train_batch_size=2**31)


def test_best_metric_and_patience_without_evaluations_during_training_are_refused(tmp_path):
  """Without eval_every_steps no evaluation runs during training: --best_metric and
  --early_stopping_patience were ignored without a word (run_pretraining refuses both
  without held-out data)."""
  with pytest.raises(ValueError, match=re.escape(
      "best_metric ('f1') picks the best of the evaluations during training: it needs "
      "eval_every_steps > 0")):
    fine_tuning.FineTuningConfig(output_dir=str(tmp_path), best_metric="f1")
  with pytest.raises(ValueError, match=re.escape(
      "early_stopping_patience (2) > 0 counts evaluations during training: it needs "
      "eval_every_steps > 0")):
    fine_tuning.FineTuningConfig(output_dir=str(tmp_path), early_stopping_patience=2)
  fine_tuning.FineTuningConfig(output_dir=str(tmp_path), eval_every_steps=10, best_metric="f1",
                               early_stopping_patience=2)


def _trained_run(tmp_path, recorded, model_file=False):
  """A run directory as a training run leaves it, for `evaluated_model`: `recorded`'s
  run_config.json, a checkpoint index (checkpoints/ckpt-2) and, with `model_file`, a
  model.keras (empty: never read here)."""
  run = tmp_path / "run"
  (run / "checkpoints").mkdir(parents=True)
  (run / "checkpoints" / "ckpt-2.index").write_bytes(b"")
  (run / "run_config.json").write_text(
      recorded if isinstance(recorded, str) else recorded.to_json())
  if model_file:
    (run / "model.keras").write_bytes(b"")
  return run


def _embeddings(output_dir, **overrides):
  return EmbeddingRunConfig(**{"output_dir": str(output_dir), "do_eval": True,
                               "dev_file": "dev.tsv", **overrides})


def _classifier(output_dir, **overrides):
  return ClassifierRunConfig(**{"output_dir": str(output_dir), "task_name": "mrpc",
                                "do_eval": True, "data_dir": "glue", **overrides})


def test_an_evaluation_of_the_runs_model_takes_the_settings_the_run_recorded(
    tmp_path, caplog):
  """Sweep 9 EV29: a run trained with --pooling_mode=cls, evaluated without training and
  without the flag, was evaluated with the default mean pooling and its scores written over
  the run's. Settings not given come from the run's run_config.json, and are logged."""
  run = _trained_run(tmp_path, _embeddings(tmp_path / "run", do_train=True, train_file="t",
                                           pooling_mode="cls", max_seq_length=32,
                                           do_lower_case=True))
  caplog.set_level("INFO", logger="absl")
  config, own = fine_tuning.evaluated_model(_embeddings(run, eval_batch_size=5))
  assert own.step == 2
  assert (config.pooling_mode, config.max_seq_length, config.do_lower_case) == ("cls", 32, True)
  assert config.eval_batch_size == 5  # An evaluation setting: this run's.
  assert "its setting pooling_mode=cls (run_config.json)" in caplog.text


@pytest.mark.parametrize("recorded, given, message", [
    # EV28: a mean-pooled run evaluated with --pooling_mode=cls.
    (_embeddings("run", do_train=True, train_file="t"), _embeddings("run", pooling_mode="cls"),
     "pooling_mode: mean -> cls"),
    # EV27: an MRPC (sentence pair) run evaluated as SST-2: single sentences.
    (_classifier("run", do_train=True), _classifier("run", task_name="sst-2"),
     "task_name: mrpc -> sst-2"),
])
def test_an_evaluation_of_the_runs_model_with_another_task_or_pooling_is_refused(
    tmp_path, recorded, given, message):
  """Sweep 9 EV27/EV28: the run's model scored as another task (or pooled otherwise), its
  results written over the run's. Refused before any work, naming both values."""
  run = _trained_run(tmp_path, recorded)
  with pytest.raises(ValueError, match=re.escape(message)) as error:
    fine_tuning.evaluated_model(dataclasses.replace(given, output_dir=str(run)))
  assert "Leave the flag out" in str(error.value) and "another --output_dir" in str(error.value)


def test_the_runs_own_model_through_a_linked_output_dir_is_the_runs(tmp_path):
  """Sweep 9 EV08: --output_dir a link to the run and --init_tfbert the real path of its
  model.keras was refused as another model: paths are compared with links resolved."""
  run = _trained_run(tmp_path, _classifier("run", do_train=True), model_file=True)
  link = tmp_path / "link"
  link.symlink_to(run)
  model_file = str(run / "model.keras")
  config, own = fine_tuning.evaluated_model(_classifier(link, init_tfbert=model_file))
  assert own is None and config.init_tfbert == model_file


@pytest.mark.parametrize("recorded, model_file, message", [
    # EV11: a run_ner run's directory (its model.keras has a token classification head).
    (NerRunConfig(output_dir="run", do_train=True, train_file="t"), True,
     "{run} holds a run_ner run (token classification), not run_classifier's: pass another "
     "--output_dir, or --init_tfbert={run}/model.keras --do_train to start a sequence "
     "classification model from its encoder with --reinit_head"),
    # EV10: a run_pretraining model_dir (checkpoints, no model.keras).
    ('{"model_dir": "run", "masked_lm_prob": 0.15}', False,
     "{run} holds a run_pretraining run (pretraining), not run_classifier's: pass another "
     "--output_dir: to fine-tune its encoder, export it"),
])
def test_an_evaluation_in_another_kind_of_run_says_so_first(
    tmp_path, recorded, model_file, message):
  """Sweep 9 EV11/EV10: a classifier evaluated in a NER run's directory advised
  --reinit_head (refused again when followed); in a pretraining model_dir it said "drop
  --bert_config_file" (never given). The directory's kind of run is named first."""
  run = _trained_run(tmp_path, recorded, model_file)
  with pytest.raises(ValueError, match=re.escape(message.format(run=run))):
    fine_tuning.evaluated_model(_classifier(run))


def test_an_unreadable_run_checkpoint_is_one_message_naming_what_to_do(tmp_path):
  """Sweep 9 EV13: the run's latest checkpoint data file cut short (a full disk): a
  traceback ending in IndexError 'Read less bytes than requested'. Now one message naming
  the checkpoint, the earlier checkpoint and the run's model.keras."""
  folder = tmp_path / "checkpoints"

  class Optimizer(tf.Module):
    def __init__(self):
      super().__init__()
      self._trainable_variables = [tf.Variable(tf.zeros([4000]))]

  for step in (1, 2):
    tf.train.Checkpoint(optimizer=Optimizer()).write(str(folder / f"ckpt-{step}"))
  with open(folder / "ckpt-2.data-00000-of-00001", "r+b") as f:
    f.truncate(100)
  own = fine_tuning.RunModel(checkpoint=str(folder / "ckpt-2"), step=2,
                             model_file=str(tmp_path / "model.keras"))
  with pytest.raises(ValueError, match=re.escape(
      f"{folder / 'ckpt-2'} cannot be read as a training checkpoint (Read less bytes than "
      f"requested): to evaluate the earlier {folder / 'ckpt-1'}, move {folder / 'ckpt-2'}.* "
      f"out of {folder}; to evaluate the run's final model, pass "
      f"--init_tfbert={tmp_path / 'model.keras'}")):
    fine_tuning.restore_run_checkpoint(keras.Sequential(), own,
                                       source_heads.Source(str(tmp_path / "model.keras")))


def _squad(output_dir, **overrides):
  return SquadRunConfig(**{"output_dir": str(output_dir), "do_predict": True,
                           "predict_file": "dev.json", **overrides})


@pytest.mark.parametrize("recorded, given, message", [
    # c49: a classifier run of S=32 evaluated at S=4 (given), and at the default, given.
    (_classifier("run", do_train=True, max_seq_length=32),
     _classifier("run", max_seq_length=8), "max_seq_length: 32 -> 8"),
    (_classifier("run", do_train=True, max_seq_length=32),
     _classifier("run", given_settings=frozenset({"max_seq_length"})),
     "max_seq_length: 32 -> 128"),
    # c163: a SQuAD run's windows, field by field.
    (_squad("run", do_train=True, train_file="t",
            features=squad_features.FeatureConfig(max_seq_length=64, doc_stride=32,
                                                  max_query_length=16)),
     _squad("run", features=squad_features.FeatureConfig(max_seq_length=64, doc_stride=16,
                                                         max_query_length=16),
            given_settings=frozenset({"doc_stride", "max_seq_length"})),
     "doc_stride: 32 -> 16"),
    # Sweep 11 P1: a NER run at the default stride named it "None": the value it used.
    (NerRunConfig(output_dir="run", do_train=True, train_file="t", max_seq_length=32),
     NerRunConfig(output_dir="run", do_eval=True, eval_file="d", max_seq_length=32,
                  doc_stride=4),
     "doc_stride: 16 (the default, max_seq_length // 2) -> 4"),
])
def test_an_evaluation_of_the_runs_model_with_other_scored_settings_is_refused(
    tmp_path, recorded, given, message):
  """Sweep 10 c49/c163: an evaluation-only rerun with another --max_seq_length (or
  --doc_stride) wrote its scores over the run's while run_config.json kept the recorded
  value. Refused before any work, naming the setting and both values (recorded -> given)."""
  run = _trained_run(tmp_path, recorded)
  with pytest.raises(ValueError, match=re.escape(message)) as error:
    fine_tuning.evaluated_model(dataclasses.replace(given, output_dir=str(run)))
  assert "Leave the flag out" in str(error.value) and "another --output_dir" in str(error.value)


def test_settings_not_given_are_the_runs_even_at_their_default(tmp_path):
  """A setting the tool says was not given is the run's, whatever its value; a SQuAD
  window field not given is the run's while another, given alike, stays."""
  run = _trained_run(tmp_path, _squad("run", do_train=True, train_file="t",
                                      features=squad_features.FeatureConfig(
                                          max_seq_length=128, doc_stride=32,
                                          max_query_length=16)))
  config, _ = fine_tuning.evaluated_model(_squad(
      run, features=squad_features.FeatureConfig(max_seq_length=128, doc_stride=48),
      given_settings=frozenset({"max_seq_length"})))
  assert config.features == squad_features.FeatureConfig(128, 32, 16)
  run = _trained_run(tmp_path / "c", _classifier("run", do_train=True, max_seq_length=32))
  config, _ = fine_tuning.evaluated_model(_classifier(run, given_settings=frozenset()))
  assert config.max_seq_length == 32


def _words(count, prefix):
  return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [
      f"{prefix}{i}" for i in range(count - 5)]


def test_a_runs_model_records_its_vocabulary_and_refuses_another_when_loaded(tmp_path):
  """Rule: every .keras tfbert writes for a model with a known vocabulary records its
  fingerprint and casing (`convert.text_record`); a run's model.keras recorded none, so
  `tfbert.load(run/model.keras, vocab_file=<another>)` read its ids as other word pieces."""
  import tfbert  # pylint: disable=import-outside-toplevel
  from tfbert.checkpoints import convert  # pylint: disable=import-outside-toplevel
  run = tmp_path / "run"
  run.mkdir()
  (run / fine_tuning.VOCAB_FILE).write_text("\n".join(_words(CONFIG.vocab_size, "a")) + "\n")
  other = tmp_path / "other_vocab.txt"
  other.write_text("\n".join(_words(CONFIG.vocab_size, "b")) + "\n")
  config = fine_tuning.FineTuningConfig(output_dir=str(run), do_lower_case=True)
  model = BertClassifier(CONFIG, CLASSES)
  model.build()
  written = fine_tuning.save_trained(model, config, {"loss": 1.0}, chief=True)
  path = str(run / "model.keras")
  assert convert.read_text_record(path) == convert.text_record(
      str(run / fine_tuning.VOCAB_FILE), True)
  assert sorted(os.listdir(run)) == sorted(written + [fine_tuning.VOCAB_FILE])  # No more.
  with pytest.raises(ValueError) as refused:
    tfbert.load(path, vocab_file=str(other))
  assert path in str(refused.value) and str(other) in str(refused.value), refused.value
  back = tfbert.load(path)  # The run's own vocab.txt beside it.
  assert back.classify("a1 a2")["label"] is not None


@pytest.mark.parametrize("make, field", [
    (lambda **kw: fine_tuning.FineTuningConfig(**kw), "vocab_file"),
    (lambda **kw: fine_tuning.FineTuningConfig(**kw), "bert_config_file"),
    (lambda **kw: NerRunConfig(**kw), "train_file"),
    (lambda **kw: SquadRunConfig(**kw), "predict_file"),
    (lambda **kw: ClassifierRunConfig(task_name="sst-2", **kw), "eval_file"),
    (lambda **kw: EmbeddingRunConfig(**kw), "ir_corpus_file"),
])
def test_a_named_pipe_as_any_input_of_a_run_config_is_refused_before_any_work(
    tmp_path, make, field):
  """Rule: every run config refuses a special file (a named pipe, a device) as any input
  path, by `os.stat` only (`tfbert.runtime.paths.special_input_problems`); the configs took
  one, and the run hung reading it again (only the tools' flags were checked)."""
  fifo = tmp_path / "input"
  os.mkfifo(fifo)
  out = tmp_path / "out"
  with pytest.raises(ValueError) as refused:
    make(output_dir=str(out), **{field: str(fifo)})
  assert f"--{field} {fifo} is a named pipe: a run reads each input more than once" in str(
      refused.value), refused.value
  assert "write it to a regular file first" in str(refused.value)
  assert not out.exists()


def test_a_default_derived_from_other_settings_is_logged_as_its_value(tmp_path, caplog):
  """Sweep 11 P1: a setting the run left at a derived default (NER's doc_stride None) is
  named by the value it stands for, in the log of the settings taken from the run."""
  run = _trained_run(tmp_path, NerRunConfig(output_dir="run", do_train=True, train_file="t",
                                            max_seq_length=32))
  caplog.set_level("INFO", logger="absl")
  config, _ = fine_tuning.evaluated_model(NerRunConfig(
      output_dir=str(run), do_eval=True, eval_file="d", doc_stride=8, max_seq_length=32,
      given_settings=frozenset({"max_seq_length"})))
  assert config.doc_stride is None and config.window_stride == 16
  assert "doc_stride=16 (the default, max_seq_length // 2)" in caplog.text


@pytest.mark.parametrize("make, given, switch", [
    (lambda **kw: ClassifierRunConfig(task_name="sst-2", data_dir="sst", **kw),
     {"eval_file": "sst/dev.tsv"}, "do_eval"),
    (lambda **kw: ClassifierRunConfig(task_name="sst-2", data_dir="sst", **kw),
     {"predict_file": "sst/test.tsv"}, "do_predict"),
    (lambda **kw: NerRunConfig(train_file="t.conll", **kw),
     {"eval_file": "dev.conll"}, "do_eval"),
    (lambda **kw: NerRunConfig(train_file="t.conll", **kw),
     {"predict_file": "test.conll"}, "do_predict"),
    (lambda **kw: SquadRunConfig(train_file="t.json", **kw),
     {"predict_file": "dev.json", "predict_articles": "1:"}, "do_predict"),
    (lambda **kw: EmbeddingRunConfig(train_file="t.tsv", **kw),
     {"dev_file": "stsb/dev.tsv"}, "do_eval"),
    (lambda **kw: EmbeddingRunConfig(train_file="t.tsv", **kw),
     {"ir_queries_file": "q.tsv", "ir_corpus_file": "c.tsv", "ir_qrels_file": "r.tsv"},
     "do_eval"),
])
def test_a_file_read_only_with_a_do_switch_is_refused_without_it(tmp_path, make, given,
                                                                switch):
  """Sweep 12 S2: a dev, predict or retrieval file given without its `do_` switch was never
  opened, and the run trained and ended without a word; refused at construction, naming
  each setting and what to add or drop, and how a replayed flags.txt clears it (sweep 13
  P5: a line of a flag file cannot be dropped from the command line). Its switch on, it is
  taken; a run record written before the rule (it names the file, the switch off) still
  reads, without it."""
  out = tmp_path / "out"
  with pytest.raises(ValueError) as refused:
    make(output_dir=str(out), do_train=True, **given)
  settings = ", ".join(f"{name} {value}" for name, value in given.items())
  assert (f"{settings} {'is' if len(given) == 1 else 'are'} read only with {switch}: add "
          f"{switch}, or drop {', '.join(given)} (a flags.txt replayed: "
          f"{' '.join(f'--{name}=' for name in given)} clears it)") in str(refused.value), (
              refused.value)
  assert not out.exists()
  config = make(output_dir=str(out), do_train=True, **given, **{switch: True})
  # A rerun may drop them as told (they are not what is trained).
  assert {switch, *given} <= type(config).RERUN_MAY_CHANGE
  values = {**json.loads(config.to_json()), switch: False}
  back = type(config).from_json(json.dumps(values))
  assert not any(getattr(back, name) for name in given) and back.do_train


def test_a_vocabulary_larger_than_the_model_names_both_files_and_what_to_do(tmp_path):
  """Sweep 12 P3: it named neither the vocabulary nor the config ("the vocab has 30522
  entries, the model only 1000 (vocab_size)")."""
  model = BertClassifier(dataclasses.replace(CONFIG, vocab_size=30), CLASSES)
  config = ClassifierRunConfig(output_dir=str(tmp_path / "out"), task_name="sst-2",
                               data_dir="sst", do_train=True, vocab_file="big/vocab.txt",
                               bert_config_file="cfg71.json")
  with pytest.raises(ValueError) as refused:
    fine_tuning.check_vocab_fits(model, 41, fine_tuning.describe_vocab(config, "big/vocab.txt"),
                                 fine_tuning.describe_model_config(config))
  assert str(refused.value) == (
      "--vocab_file=big/vocab.txt has 41 entries, more than the vocab_size 30 of "
      "--bert_config_file=cfg71.json: pass the vocabulary that config was made for, or fix "
      "vocab_size")
  fine_tuning.check_vocab_fits(model, 30)  # As many: it fits.
  found = dataclasses.replace(config, vocab_file=None, bert_config_file=None,
                              init_checkpoint="ckpt/bert_model.ckpt")
  assert fine_tuning.describe_vocab(found, "ckpt/vocab.txt") == (
      "ckpt/vocab.txt (the vocabulary found without --vocab_file)")
  assert fine_tuning.describe_model_config(found) == (
      f"{os.path.join('ckpt', 'bert_config.json')} (beside "
      "--init_checkpoint=ckpt/bert_model.ckpt)")
  own = fine_tuning.RunModel(model_file="out/model.keras")
  assert fine_tuning.describe_model_config(
      dataclasses.replace(found, init_checkpoint=None, init_tfbert="out/model.keras"),
      own) == "out/model.keras (the run's model, its config)"


def test_eval_results_of_an_older_flat_format_are_dropped_and_the_step_read_from_the_run(
    tmp_path):
  """Sweep 15 S1/S2: eval_results.json keys scores by file; a flat entry of an older run
  (SQuAD's scores, naming no file) cannot be kept beside them. A run evaluated from its
  model.keras alone takes the step its train_results.json records."""
  (tmp_path / "eval_results.json").write_text(json.dumps({"exact_match": 0.0, "f1": 3.2}))
  merged = fine_tuning.merge_eval_results(str(tmp_path), {"dev": {"f1": 9.0}}, 7)
  assert merged == {"dev": {"f1": 9.0, "step": 7}}
  assert fine_tuning.evaluated_step(str(tmp_path), None) is None
  own = fine_tuning.RunModel(model_file=str(tmp_path / "model.keras"))
  assert fine_tuning.evaluated_step(str(tmp_path), own) is None
  (tmp_path / "train_results.json").write_text(json.dumps({"step": 12, "loss": 0.5}))
  assert fine_tuning.evaluated_step(str(tmp_path), own) == 12
  assert fine_tuning.evaluated_step(str(tmp_path), fine_tuning.RunModel("c/ckpt-3", 3)) == 3


@dataclasses.dataclass(frozen=True, kw_only=True)
class _ModeConfig(fine_tuning.FineTuningConfig):
  """A config whose run setting `mode` rules out a setting `extra` given here."""
  RUN_SETTINGS = fine_tuning.FineTuningConfig.RUN_SETTINGS | {"mode"}
  mode: str = "a"
  extra: str = ""

  def checks(self, num_replicas: int = 1):
    return [(self.mode != "b" or not self.extra, "mode b reads no extra")] + super().checks(
        num_replicas)


def test_a_setting_given_that_the_runs_recorded_settings_rule_out_is_named_with_its_values(
    tmp_path):
  """A setting given here that does not fit the run's recorded settings is named, with the
  recorded and the given value (it was "the run's settings do not fit this run ...:
  restore it", of an intact run_config.json)."""
  recorded = json.loads(_ModeConfig(output_dir=str(tmp_path), mode="b").to_json())
  rerun = _ModeConfig(output_dir=str(tmp_path), extra="x", given_settings=frozenset({"extra"}))
  with pytest.raises(ValueError) as error:
    fine_tuning.run_settings(rerun, recorded)
  assert "extra='x' given here (the run recorded '')" in str(error.value)
  assert "restore it" not in str(error.value)
  # Sweep 18, s08: "or pass another --output_dir" led nowhere (a new directory holds no
  # model); the way that works starts the new run from this run's model.
  assert str(error.value).endswith(
      f"leave extra out to evaluate the run as it was recorded, or pass another --output_dir "
      f"with --init_tfbert={tmp_path / 'model.keras'} to evaluate its model with the settings "
      "given here")
  rerun = _ModeConfig(output_dir=str(tmp_path), mode="a", given_settings=frozenset({"mode"}))
  with pytest.raises(ValueError, match=re.escape(
      f"with other settings (mode: b -> a): its results would be written over the run's, "
      f"scored otherwise than the run recorded. Leave the flag out to evaluate the run as it "
      f"was recorded, or pass another --output_dir with --init_tfbert="
      f"{tmp_path / 'model.keras'} to evaluate its model with the settings given here")):
    fine_tuning.run_settings(rerun, recorded)
  assert fine_tuning.run_settings(
      _ModeConfig(output_dir=str(tmp_path), given_settings=frozenset()), recorded).mode == "b"


def test_an_evaluation_of_a_runs_model_takes_its_recorded_dtype(tmp_path, caplog):
  """Sweep 29, A50/A79: an eval-only rerun of a mixed_float16 (mixed_bfloat16) run scored in
  float32 and wrote its results over the run's; another --dtype given was taken too."""
  caplog.set_level("INFO", logger="absl")
  recorded = json.loads(fine_tuning.FineTuningConfig(output_dir=str(tmp_path),
                                                     dtype="mixed_bfloat16").to_json())
  rerun = fine_tuning.FineTuningConfig(output_dir=str(tmp_path), given_settings=frozenset())
  assert fine_tuning.run_settings(rerun, recorded).dtype == "mixed_bfloat16"
  assert "with its setting dtype=mixed_bfloat16" in caplog.text
  given = fine_tuning.FineTuningConfig(output_dir=str(tmp_path), dtype="float32",
                                       given_settings=frozenset({"dtype"}))
  with pytest.raises(ValueError, match=r"other settings \(dtype: mixed_bfloat16 -> float32\)"):
    fine_tuning.run_settings(given, recorded)


def test_scores_of_another_file_under_a_recorded_key_say_whose_they_replace(tmp_path, caplog):
  """Sweep 19 S1: evaluating another dev file in a run replaced its "dev" scores and
  predictions without a word; each entry records its file, and run_squad's rule applies."""
  caplog.set_level("INFO", logger="absl")
  first, other = str(tmp_path / "sst" / "dev.tsv"), str(tmp_path / "other" / "dev.tsv")
  (tmp_path / "eval_results.json").write_text(json.dumps(
      {"dev": {"f1": 1.0, "file": first, "step": 3}, "train": {"f1": 2.0, "step": 3}}))
  merged = fine_tuning.merge_eval_results(str(tmp_path), {"dev": {"f1": 1.5, "file": first}}, 4)
  assert "replacing" not in caplog.text  # The same file: nothing said.
  merged = fine_tuning.merge_eval_results(str(tmp_path), {"dev": {"f1": 9.0, "file": other}}, 4,
                                          ["dev_predictions.tsv", "test_predictions.tsv"])
  assert merged["dev"] == {"f1": 9.0, "file": other, "step": 4}
  assert (f"replacing the scores of dev of {first} and dev_predictions.tsv with those of "
          f"{other}; to keep both") in caplog.text, caplog.text
  caplog.clear()
  (tmp_path / "eval_results.json").write_text(json.dumps({"dev": {"f1": 1.0, "step": 3}}))
  fine_tuning.merge_eval_results(str(tmp_path), {"dev": {"f1": 9.0, "file": other}}, 4)
  assert "replacing the scores of dev (their file was not recorded)" in caplog.text


def test_a_training_rerun_of_a_run_takes_its_vocabulary_and_model_config(tmp_path):
  """Sweep 19 P2: resuming a run with --do_train asked for --vocab_file, then for
  --bert_config_file ("beside the initial checkpoint", none given), although the run holds
  both, as an evaluation without training reads them."""
  out = tmp_path / "run"
  config = fine_tuning.FineTuningConfig(output_dir=str(out), do_train=True)
  with pytest.raises(ValueError, match="--vocab_file is needed: no --init_checkpoint") as error:
    fine_tuning.resolve_vocab_file(config)
  assert "initial checkpoint" not in str(error.value)
  with pytest.raises(ValueError, match="--bert_config_file is needed: no --init_checkpoint"):
    fine_tuning.initial_source(config)
  (out / "checkpoints").mkdir(parents=True)
  (out / "checkpoints" / "ckpt-5.index").write_text("")
  (out / "vocab.txt").write_text("[PAD]\n")
  with pytest.raises(ValueError, match=f"{out / 'bert_config.json'} is missing"):
    fine_tuning.initial_source(config)
  BertConfig(vocab_size=7, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
             intermediate_size=16).to_json_file(str(out / "bert_config.json"))
  assert fine_tuning.resolve_vocab_file(config) == str(out / "vocab.txt")
  bert_config, weights, source = fine_tuning.initial_source(config)
  assert (bert_config.vocab_size, weights, source.name) == (
      7, None, str(out / "checkpoints" / "ckpt-5"))
  # The paths the run recorded, which the rerun is compared with, when their files exist.
  assert fine_tuning.resumed_settings(config) == config  # No run_config.json.
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("[PAD]\n")
  (out / "run_config.json").write_text(json.dumps(
      {"vocab_file": str(vocab), "bert_config_file": str(tmp_path / "gone.json")}))
  resumed = fine_tuning.resumed_settings(config)
  assert (resumed.vocab_file, resumed.bert_config_file) == (str(vocab), None)
  assert fine_tuning.resumed_settings(dataclasses.replace(config, do_train=False)).vocab_file \
      is None  # An evaluation takes the run's settings in `evaluated_model`.


def test_a_resume_logs_that_its_weights_come_from_its_checkpoint_not_random_ones(
    tmp_path, caplog):
  """Every fine-tuning resume logged "starting from random weights (no
  init_checkpoint/init_hf_dir/init_tfbert)" just before the training loop's "resumed from
  ...": the weights come from the run's checkpoint. The runner's `build_model` passes what
  `initial_source` gives to `assign_initial_weights`, which says where they come from."""
  out = tmp_path / "run"
  (out / "checkpoints").mkdir(parents=True)
  (out / "checkpoints" / "ckpt-5.index").write_text("")
  BertConfig(vocab_size=7, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
             intermediate_size=16).to_json_file(str(out / "bert_config.json"))
  resumed = fine_tuning.FineTuningConfig(output_dir=str(out), do_train=True)
  fresh = dataclasses.replace(resumed, output_dir=str(tmp_path / "new"),
                              bert_config_file=str(out / "bert_config.json"))
  logs = {}
  for name, config in (("resumed", resumed), ("fresh", fresh)):
    caplog.clear()
    _, weights, source = fine_tuning.initial_source(config)
    with caplog.at_level("INFO", logger="absl"):
      report = fine_tuning.assign_initial_weights(None, weights, source.name, "head", True)
    logs[name] = caplog.text
    assert report.source == source.name and not report.used
  checkpoint = str(out / "checkpoints" / "ckpt-5")
  assert "random weights" not in logs["resumed"]
  assert f"the weights come from the run's checkpoint {checkpoint}" in logs["resumed"]
  assert "starting from random weights (no init_checkpoint" in logs["fresh"]


def test_an_evaluation_of_a_runs_model_reads_a_file_laid_out_otherwise(tmp_path):
  """Sweep 20 R1: an eval-only rerun of a --task_name=custom run refused a dev file in
  another layout (columns, header, delimiter), naming internal fields and a raw tab. The
  layout describes the file read; the labels, regression and pairs are the model's."""
  from tfbert.classifier import glue_data  # pylint: disable=import-outside-toplevel
  run = glue_data.CustomFormat(text_a_column=-1, label_column=0, has_header=True,
                               labels=("neg", "pos"))
  recorded = json.loads(ClassifierRunConfig(task_name="custom", custom=run,
                                            output_dir=str(tmp_path), do_train=True,
                                            train_file="train.tsv").to_json())

  def rerun(typed=("custom_text_a_column",), **custom):
    return ClassifierRunConfig(
        task_name="custom", output_dir=str(tmp_path), do_eval=True, eval_file="dev.csv",
        custom=dataclasses.replace(run, **custom),
        given_settings=frozenset({"custom", *typed}))

  for layout in ({"text_a_column": 2}, {"text_a_column": 0, "label_column": 1,
                                        "has_header": False, "delimiter": ","}):
    assert fine_tuning.run_settings(rerun(**layout), recorded).custom == dataclasses.replace(
        run, **layout)
  with pytest.raises(ValueError, match=re.escape(
      "other settings (--custom_labels=neg,pos -> --custom_labels=pos,neg)")):
    fine_tuning.run_settings(rerun(labels=("pos", "neg"), delimiter=","), recorded)
  with pytest.raises(ValueError, match=re.escape(
      "(--custom_text_b_column=unset -> --custom_text_b_column=1)")):
    fine_tuning.run_settings(rerun(text_b_column=1), recorded)
  with pytest.raises(ValueError, match=re.escape(
      "--nocustom_regression -> --custom_regression")):
    fine_tuning.run_settings(rerun(labels=(), regression=True), recorded)
  # No layout flag given: the file is read as the run's (the flags' defaults are not it).
  assert fine_tuning.run_settings(rerun(typed=("custom_labels",), text_a_column=2,
                                        has_header=False), recorded).custom == run
  names = fine_tuning.record_key_names(rerun())
  assert names["custom.has_header"] == "--custom_header"
  assert names["custom.delimiter"] == "--custom_delimiter"


def test_the_unk_share_of_a_task_file_is_reported_and_warned_over_the_threshold(tmp_path,
                                                                               caplog):
  """Sweep 22 S3: fine-tuning on text that was nearly all [UNK] (another model's vocab) said
  nothing; create_pretraining_data reported it. Each file's share is logged once per run
  (tokenizer), with a warning naming the file and the vocab above UNK_WARNING_SHARE."""
  from tfbert.classifier import classifier_features, glue_data
  from tfbert.text.tokenization import WordPieceTokenizer
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nfine\nfilm\n.\n", encoding="utf-8")
  tokenizer = WordPieceTokenizer(str(vocab), True)

  def features(*texts):
    return classifier_features.examples_to_features(
        [glue_data.InputExample(f"dev-{i}", i, i + 1, t, None, "1") for i, t in
         enumerate(texts)], tokenizer, 16, is_pair=False)

  with caplog.at_level("INFO", logger="absl"):
    fits = fine_tuning.report_unk_share("fits.tsv", features("A fine film.", "A film."),
                                        tokenizer)
    unfit = fine_tuning.report_unk_share("unfit.tsv", features("A dull movie overall."),
                                         tokenizer)
    fine_tuning.report_unk_share("unfit.tsv", features("A dull movie overall."), tokenizer)
  assert (fits, unfit) == (0.0, 0.6)  # [CLS], [SEP] and padding are not word pieces.
  assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
      ("INFO", "fits.tsv: [UNK] 0.00% of 7 word pieces"),
      ("INFO", "unfit.tsv: [UNK] 60.00% of 5 word pieces"),
      ("WARNING", f"unfit.tsv: 60.0% of its word pieces are [UNK] (over 5%): the vocabulary "
                  f"{vocab} does not fit the text; check --vocab_file (the checkpoint's own) "
                  "and --do_lower_case")]


def test_a_tool_takes_the_sequence_settings_not_given_before_its_config_checks_them(
    tmp_path, caplog):
  """Sweep 26 A1: run_squad --init_tfbert=<run of 64/24/16>/model.keras --max_seq_length=64
  (or a predict-only rerun of that run with its own --max_seq_length=64 typed) was refused:
  the window check read --max_query_length at the flag's 64 before the run's 16 was taken."""
  caplog.set_level("INFO", logger="absl")
  run = _trained_run(tmp_path / "s", _squad("run", do_train=True, train_file="t",
                                            features=squad_features.FeatureConfig(64, 24, 16)),
                     model_file=True)
  flags = {"output_dir": str(tmp_path / "new"), "init_tfbert": str(run / "model.keras"),
           "max_seq_length": 64, "doc_stride": 128, "max_query_length": 64, "do_predict": True,
           "predict_file": "dev.json"}
  given = frozenset({"max_seq_length", "init_tfbert", "output_dir"})
  with pytest.raises(ValueError, match=r"max_seq_length \(64\) must be greater than"):
    cli.config_from_values(SquadRunConfig, flags)  # What the tool built before.
  taken = fine_tuning.source_sequence_values(flags, given)
  assert taken == {**flags, "doc_stride": 24, "max_query_length": 16}
  assert cli.config_from_values(SquadRunConfig, taken).features == (
      squad_features.FeatureConfig(64, 24, 16))
  assert "its run's setting max_query_length=16" in caplog.text
  # A rerun in the run's own directory: its record, whatever --init_tfbert says.
  rerun = {**flags, "output_dir": str(run), "init_tfbert": None}
  assert fine_tuning.source_sequence_values(rerun, given)["max_query_length"] == 16
  # A setting given stays; without the record of what was given, nothing is taken.
  assert fine_tuning.source_sequence_values(
      flags, given | {"max_query_length"})["max_query_length"] == 64
  assert fine_tuning.source_sequence_values(flags, None) == flags


def test_a_new_run_from_a_runs_model_takes_its_sequence_settings_unless_given(
    tmp_path, caplog):
  """Sweep 22 S1: --init_tfbert=<run>/model.keras into a new --output_dir evaluated a
  model trained at S=32 (SQuAD: 64/32/16) at the defaults (128; 384/128/64) without a word,
  while its casing came from the run. A sequence setting not given is the source run's,
  logged; one given is this run's, logged where it differs; every task alike."""
  caplog.set_level("INFO", logger="absl")
  run = _trained_run(tmp_path / "c", _classifier("run", do_train=True, max_seq_length=32),
                     model_file=True)
  new = _classifier(tmp_path / "new", init_tfbert=str(run / "model.keras"),
                    given_settings=frozenset())
  assert fine_tuning.source_run_settings(new).max_seq_length == 32
  assert "its run's setting max_seq_length=32" in caplog.text
  given = dataclasses.replace(new, max_seq_length=64,
                              given_settings=frozenset({"max_seq_length"}))
  assert fine_tuning.source_run_settings(given).max_seq_length == 64
  assert "max_seq_length=64 (the source run recorded 32)" in caplog.text
  # <run>/best/model.keras: the record one level up; NER's stride too; a new SQuAD run
  # takes each window setting not given.
  run = _trained_run(tmp_path / "n", NerRunConfig(output_dir="run", do_train=True,
                                                  train_file="t", max_seq_length=32,
                                                  doc_stride=8), model_file=True)
  (run / "best").mkdir()
  (run / "best" / "model.keras").write_bytes(b"")
  ner = fine_tuning.source_run_settings(NerRunConfig(
      output_dir=str(tmp_path / "new"), do_eval=True, eval_file="e",
      init_tfbert=str(run / "best" / "model.keras")))
  assert (ner.max_seq_length, ner.doc_stride) == (32, 8)
  run = _trained_run(tmp_path / "s", _squad("run", do_train=True, train_file="t",
                                            features=squad_features.FeatureConfig(64, 32, 16)),
                     model_file=True)
  squad = fine_tuning.source_run_settings(_squad(
      tmp_path / "new", init_tfbert=str(run / "model.keras"),
      features=squad_features.FeatureConfig(max_seq_length=128, doc_stride=20),
      given_settings=frozenset({"doc_stride"})))
  assert squad.features == squad_features.FeatureConfig(64, 20, 16)
  # flags.txt holds the values used, so that --flagfile=<new run>/flags.txt replays them.
  assert fine_tuning.sourced_flagfile(
      "--doc_stride=20\n--max_query_length=64\n--max_seq_length=128\n--seed=1\n",
      _squad(tmp_path / "new", features=squad_features.FeatureConfig(128, 20)), squad) == (
          "--doc_stride=20\n--max_query_length=16\n--max_seq_length=64\n--seed=1\n")
  embeddings = fine_tuning.source_run_settings(_embeddings(
      tmp_path / "new", init_tfbert=str(tmp_path / "c" / "run" / "model.keras")))
  assert embeddings.max_seq_length == 32  # Another task's run: the same positions.


def test_a_runs_own_vocabulary_is_taken_whatever_rows_its_table_leaves_unused(tmp_path):
  """Sweep 32, A13: a run trained from a config of vocab_size 30522 with the cased vocabulary
  (28,996 entries: allowed, the rows past it unused) had its own model.keras refused by every
  later run ("... 1526 fewer than the vocab_size ... Pass the vocabulary the model was
  trained with", which it was). The source's own vocab.txt is its vocabulary; another one as
  short is still refused."""
  run = tmp_path / "run"
  run.mkdir()
  tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(200)]
  (run / "vocab.txt").write_text("".join(f"{t}\n" for t in tokens))
  (run / "model.keras").write_bytes(b"")  # Only its place is read here.
  BertConfig(vocab_size=400, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
             intermediate_size=9).to_json_file(str(tmp_path / "bert_config.json"))
  config = fine_tuning.FineTuningConfig(output_dir=str(tmp_path / "out"),
                                        init_tfbert=str(run / "model.keras"),
                                        bert_config_file=str(tmp_path / "bert_config.json"))
  own = str(run / "vocab.txt")
  assert fine_tuning.is_sources_vocab(config, own)
  fine_tuning._check_source_vocab_fits(config, own)  # pylint: disable=protected-access
  other = tmp_path / "other.txt"
  other.write_text("".join(f"{t}\n" for t in tokens[:5] + [f"x{i}" for i in range(200)]))
  assert not fine_tuning.is_sources_vocab(config, str(other))
  with pytest.raises(ValueError, match=r"has 205 entries, 195 fewer than the vocab_size 400"):
    fine_tuning._check_source_vocab_fits(config, str(other))  # pylint: disable=protected-access
