"""Tests for tfbert.training.training_loop, through `fine_tuning.train` on a tiny classifier.

Dropout is on (0.1) everywhere it matters: its masks are keyed by the checkpointed
micro-step and the global replica id, so a resumed run, the `fit` path and the loop must
draw the same masks. The data is random token ids with random labels: the loop's promises
are about sameness, not learning (tests/classifier/classifier_run_test.py learns).
"""

import dataclasses
import glob
import json
import logging
import math
import os
import re
import shutil
import signal
import time
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfbert import BertClassifier, BertConfig
from tfbert.pretraining import pretraining_run
from tfbert.runtime import validation
from tfbert.tasks import fine_tuning
from tfbert.training import distribution, training_loop

# One layer: the loop's promises (resume, replicas, masks, `fit`, XLA) are about the step
# around the model, which a second layer only makes longer to trace and compile.
CONFIG = BertConfig(vocab_size=43, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=19, max_position_embeddings=13, type_vocab_size=2,
                    hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
# Two layers where examples' logits must stay far apart (the sharded prediction test: one
# layer left two of its 13 examples 8.5e-6 apart, below its tolerance's reach).
TWO_LAYERS = dataclasses.replace(CONFIG, num_hidden_layers=2)
SEQ, CLASSES, EXAMPLES = 11, 3, 29


def _examples():
  rng = np.random.default_rng(5)
  lengths = rng.integers(4, SEQ + 1, EXAMPLES)
  mask = (np.arange(SEQ)[None] < lengths[:, None]).astype(np.int32)
  features = {"input_ids": rng.integers(1, CONFIG.vocab_size, (EXAMPLES, SEQ)).astype(np.int32)
              * mask, "input_mask": mask, "segment_ids": np.zeros((EXAMPLES, SEQ), np.int32)}
  return features, {"logits": rng.integers(0, CLASSES, EXAMPLES).astype(np.int32)}


def _config(tmp_path, name="run", **overrides):
  values = dict(output_dir=str(tmp_path / name), do_train=True, train_batch_size=8,
                gradient_accumulation_steps=2, learning_rate=3e-3, clip_norm=0.5, log_steps=2,
                save_checkpoints_steps=3, seed=11)
  return fine_tuning.FineTuningConfig(**{**values, **overrides})


def _initial(config=CONFIG):
  keras.utils.set_random_seed(2)
  model = BertClassifier(config, CLASSES, dropout_rate=0.1)
  model.build()
  return model.get_weights()


def _model(strategy, initial, config=CONFIG):
  keras.utils.set_random_seed(2)  # The same layer seeds, so the same dropout streams.
  with strategy.scope():
    model = BertClassifier(config, CLASSES, dropout_rate=0.1)
    model.build()
  model.set_weights(initial)
  return model


def _strategy(replicas):
  return distribution.create_strategy("one_device" if replicas == 1 else "mirrored", replicas)


def _train(config, initial, replicas=1, steps=7, evaluate=None, **kwargs):
  strategy = _strategy(replicas)
  model = _model(strategy, initial)
  result = fine_tuning.train(model, strategy, config, _examples(), EXAMPLES, steps=steps,
                             total_steps=steps, evaluate=evaluate, **kwargs)
  return model, result


def _metrics(run_dir):
  with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
    return [{k: v for k, v in json.loads(line).items() if k != "examples_per_second"}
            for line in f]


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory):
  """The uninterrupted one-device run of the default `_config` (7 steps): (its output
  directory, its final weights, its result). The reference of several tests; they only
  read it (a test that reruns it works on a copy, `_copy`)."""
  folder = tmp_path_factory.mktemp("straight")
  model, result = _train(_config(folder, "straight"), _initial())
  assert result["steps"] == 7 and result["finished"]
  return folder / "straight", model.get_weights(), result


@pytest.fixture(scope="module")
def straight(straight_run):
  """(output directory, final weights) of `straight_run`."""
  return straight_run[:2]


def _stopped_fixture(tmp_path_factory, step):
  folder = tmp_path_factory.mktemp(f"stopped_at_{step}")
  _, stopped = _train(_config(folder, "stopped", stop_at_step=step), _initial())
  assert stopped["steps"] == step and not stopped["finished"]
  return folder / "stopped"


@pytest.fixture(scope="module")
def stopped_at_five(tmp_path_factory):
  """The default one-device run stopped at step 5 (checkpoints 3 and 5; the log window 5-6
  cut in two): its directory, which tests resume from a copy of (`_copy`)."""
  return _stopped_fixture(tmp_path_factory, 5)


@pytest.fixture(scope="module")
def stopped_at_three(tmp_path_factory):
  """The default one-device run stopped at step 3 (ckpt-3 alone): its directory."""
  return _stopped_fixture(tmp_path_factory, 3)


def _copy(run_dir, tmp_path, name):
  """A copy of the run directory `run_dir` as `tmp_path / name`, to resume or rerun (the
  checkpoint state names its checkpoints relative to its directory)."""
  shutil.copytree(run_dir, tmp_path / name)
  return tmp_path / name


def _straight_run(tmp_path, straight, replicas):
  """(output directory, weights) of the uninterrupted run on `replicas` replicas."""
  if replicas == 1:
    return straight
  model, result = _train(_config(tmp_path, "straight"), _initial(), replicas)
  assert result["steps"] == 7 and result["finished"]
  return tmp_path / "straight", model.get_weights()


@pytest.mark.slow
@pytest.mark.parametrize("replicas", [1, 2])
def test_a_stopped_run_resumes_exactly_as_the_uninterrupted_one(tmp_path, replicas, straight,
                                                               request):
  """Stopped at 5 (checkpoints at 3 and 5; the log window 5-6 cut in two), then resumed to 7:
  weights and every log line equal the straight run's, bit for bit (deterministic float32:
  the same ops on the same data and masks). One device: the stop is `stopped_at_five`'s."""
  initial = _initial()
  straight_dir, straight_weights = _straight_run(tmp_path, straight, replicas)
  if replicas == 1:
    _copy(request.getfixturevalue("stopped_at_five"), tmp_path, "split")
  else:
    _, stopped = _train(_config(tmp_path, "split", stop_at_step=5), initial, replicas)
    assert stopped["steps"] == 5 and not stopped["finished"]
  resumed, result = _train(_config(tmp_path, "split"), initial, replicas)
  assert result["steps"] == 7
  for a, b in zip(straight_weights, resumed.get_weights()):
    np.testing.assert_array_equal(a, b)
  assert _metrics(tmp_path / "split") == _metrics(straight_dir)
  assert [r["step"] for r in _metrics(straight_dir)] == [2, 4, 6, 7]


@pytest.mark.slow
def test_a_finished_run_rerun_reports_its_last_logged_loss(tmp_path, straight_run):
  """Rerunning a finished run trains nothing; it reported a NaN loss (nothing logged in
  this process) and now reports the last line the run logged. The finished run is
  `straight_run`, rerun on a copy."""
  _copy(straight_run[0], tmp_path, "run")
  first = straight_run[2]
  _, again = _train(_config(tmp_path), _initial())
  assert first["steps"] == again["steps"] == 7 and again["finished"]
  assert again["resumed_finished"] and "resumed_finished" not in first
  assert np.isfinite(first["loss"]) and again["loss"] == first["loss"]
  assert again["loss"] == _metrics(tmp_path / "run")[-1]["loss"]


@pytest.mark.slow
@pytest.mark.parametrize("part", ["index", "data-00000-of-00001"])
def test_a_cut_newest_checkpoint_is_named_and_the_run_resumes_from_the_previous(
    tmp_path, part, caplog, straight, stopped_at_five):
  """The newest checkpoint cut in half (a full disk, an interrupted copy): the rerun names
  it in one warning line, resumes from the one before and ends bit for bit as the straight
  run (deterministic float32)."""
  initial = _initial()
  _copy(stopped_at_five, tmp_path, "cut")  # ckpt-3, ckpt-5.
  path = tmp_path / "cut" / "checkpoints" / f"ckpt-5.{part}"
  data = path.read_bytes()
  path.write_bytes(data[:len(data) // 2])
  with caplog.at_level(logging.INFO, logger="absl"):
    resumed, result = _train(_config(tmp_path, "cut"), initial)
  warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
  assert len(warnings) == 1 and "\n" not in warnings[0], warnings
  assert warnings[0].startswith(f"{tmp_path / 'cut' / 'checkpoints' / 'ckpt-5'} cannot be read")
  assert warnings[0].endswith(f"resuming from the previous checkpoint, "
                              f"{tmp_path / 'cut' / 'checkpoints' / 'ckpt-3'}")
  assert result["steps"] == 7
  for a, b in zip(straight[1], resumed.get_weights()):
    np.testing.assert_array_equal(a, b)


def test_a_cut_only_checkpoint_stops_the_rerun_with_one_line(tmp_path, stopped_at_three):
  initial = _initial()
  _copy(stopped_at_three, tmp_path, "run")  # ckpt-3 alone.
  path = tmp_path / "run" / "checkpoints" / "ckpt-3.index"
  path.write_bytes(path.read_bytes()[:10])
  with pytest.raises(ValueError, match=r"ckpt-3 cannot be read \(.*\) and no older checkpoint "
                     r"is kept in .*; remove it to start over") as error:
    _train(_config(tmp_path), initial)
  assert "\n" not in str(error.value)


def test_a_checkpoint_of_one_replica_is_refused_by_a_run_of_two_naming_both(
    tmp_path, stopped_at_three):
  """The replica layout is part of a checkpoint (its metrics window, its batches): a run
  resumed on 2 replicas from a checkpoint of 1 is refused with both counts named (it was
  "trained another model", misleading a user who changed only --num_cpu_devices)."""
  initial = _initial()
  _copy(stopped_at_three, tmp_path, "run")
  with pytest.raises(ValueError, match=r"ckpt-3 was written by a run with 1 replica\(s\) per "
                                       r"worker, and this run has 2: a run resumes with the "
                                       r"replicas it started with"):
    _train(_config(tmp_path), initial, replicas=2)


@pytest.mark.slow
def test_the_loop_trains_as_keras_fit_does(tmp_path, straight):
  """The same `train_step`, data stream and dropout masks under `fit` (`compile_and_fit`);
  the loop's run is `straight`."""
  initial = _initial()
  strategy = _strategy(1)
  fitted = _model(strategy, initial)
  config = _config(tmp_path, "fit")
  summary = fine_tuning.compile_and_fit(
      fitted, strategy, fine_tuning.shuffled_batches(_examples(), EXAMPLES, 4, config.seed,
                                                     length_bucket=config.length_bucket),
      dataclasses.replace(config, verbose=0), steps=7, total_steps=7, num_examples=EXAMPLES)
  assert summary["steps"] == 7
  moved = max(float(np.abs(a - b).max()) for a, b in zip(initial, fitted.get_weights()))
  deviation = max(float(np.abs(a - b).max())
                  for a, b in zip(straight[1], fitted.get_weights()))
  # Two tf.functions around the same step may fuse float ops differently (~1e-7 relative,
  # lifted by Adam to ~1e-6); other data, masks or schedules move weights by ~1e-2.
  assert moved > 1e-2 and deviation < 1e-5, (moved, deviation)


@pytest.mark.parametrize("field", ["log_steps", "save_checkpoints_steps", "keep_checkpoint_max"])
def test_each_loop_setting_below_one_is_named_alone(field):
  """`--keep_checkpoint_max=0` said "--log_steps (1), --save_checkpoints_steps (100) and
  --keep_checkpoint_max (0) must be >= 1", naming two settings that were fine (sweep 34,
  A64)."""
  config = types.SimpleNamespace(log_steps=1, save_checkpoints_steps=100, keep_checkpoint_max=5,
                                 eval_every_steps=0, early_stopping_patience=0,
                                 stop_at_step=None)
  setattr(config, field, 0)
  assert validation.failures(training_loop.schedule_checks(config)) == [
      f"{field} (0) must be >= 1"]


def test_checkpoints_rotate_and_keep_the_newest(tmp_path):
  _train(_config(tmp_path, save_checkpoints_steps=1, keep_checkpoint_max=2), _initial(),
         steps=5)
  kept = sorted(glob.glob(str(tmp_path / "run" / "checkpoints" / "ckpt-*.index")))
  assert [os.path.basename(p) for p in kept] == ["ckpt-4.index", "ckpt-5.index"]


def _scripted(values):
  """An evaluation returning `values` in turn ({"accuracy": v, "eval_loss": -v})."""
  calls = iter(values)

  def evaluate():
    value = next(calls)
    return {"accuracy": value, "eval_loss": -value}

  return evaluate


@pytest.mark.slow  # 3.5 s or more in the suite's profile (tracing, a run).
def test_evaluation_keeps_the_best_model_and_stops_early(tmp_path):
  """Evaluations every 2 steps score 0.5, 0.7, 0.6, 0.65: with patience 2 the run stops at
  step 8 (two evaluations after the best, at 4), keeps the model of step 4 in best/, and a
  rerun trains no further."""
  config = _config(tmp_path, eval_every_steps=2, best_metric="accuracy",
                   early_stopping_patience=2, save_checkpoints_steps=100)
  model, result = _train(config, _initial(), steps=20,
                         evaluate=_scripted([0.5, 0.7, 0.6, 0.65, 0.9]))
  assert result["steps"] == 8 and result["finished"] and result["stopped_early"]
  evals = [r for r in _metrics(tmp_path / "run") if r.get("split") == "eval"]
  assert [(r["step"], r["accuracy"]) for r in evals] == [(2, 0.5), (4, 0.7), (6, 0.6),
                                                          (8, 0.65)]
  best = tmp_path / "run" / fine_tuning.BEST_DIR
  with open(best / "eval_results.json", encoding="utf-8") as f:
    assert json.load(f) == {"step": 4, "best_metric": "accuracy", "accuracy": 0.7,
                            "eval_loss": -0.7}
  assert os.path.isfile(best / "model.keras")
  assert os.path.isdir(tmp_path / "run" / "eval")  # TensorBoard's eval run beside train.
  # A checkpoint was saved where it stopped; the rerun restores it and stops at once.
  assert tf.train.latest_checkpoint(str(tmp_path / "run" / "checkpoints")).endswith("ckpt-8")
  _, again = _train(config, _initial(), steps=20, evaluate=_scripted([]))
  assert again["steps"] == 8 and again["stopped_early"]


def test_a_loss_metric_is_minimized():
  state = training_loop.EvalState()
  assert state.improves(3.0, "eval_loss")
  state.best_value.assign(3.0)
  assert state.improves(2.0, "eval_loss") and not state.improves(4.0, "eval_loss")
  assert state.improves(4.0, "accuracy") and not state.improves(2.0, "accuracy")
  # exp(mlm_loss): maximizing it (as any name not ending in "loss" was) kept the worst model.
  assert state.improves(2.0, "mlm_perplexity") and not state.improves(4.0, "mlm_perplexity")
  # Sweep 30, B70/B71: a task metric `mse` was maximized (best/ kept step 1 of 6; early
  # stopping stopped while it improved). Errors are minimized too.
  for name in ("mse", "eval_mae", "RMSE", "error", "wer", "cer"):
    assert state.improves(2.0, name) and not state.improves(4.0, name), name
  assert state.improves(4.0, "spearman") and state.improves(4.0, "ndcg@10")


def _bare_loop(run_dir, best_metric="accuracy", evaluation=None, evaluates=True):
  """A `TrainingLoop` of an untrained tiny classifier in `run_dir`, restored: its evaluation
  state without a step run."""
  strategy = _strategy(1)
  with strategy.scope():
    model = BertClassifier(CONFIG, CLASSES)
    model.build()
    optimizer = keras.optimizers.SGD()
    model.compile(optimizer=optimizer)
    optimizer.build(model.trainable_variables)
  config = training_loop.LoopConfig(num_train_steps=8, train_batch_size=8, eval_every_steps=2,
                                    best_metric=best_metric if evaluates else "")
  loop = training_loop.TrainingLoop(strategy, model, config, str(run_dir),
                                    evaluate=(lambda: {}) if evaluates else None,
                                    evaluation=evaluation)
  loop.restore()
  return loop


def _state(loop):
  state = loop.eval_state
  return (float(state.best_value.numpy()), int(state.best_step.numpy()),
          int(state.evals_since_best.numpy()))


def test_a_resume_that_evaluates_otherwise_starts_the_best_over(tmp_path, caplog):
  """A rerun may change the held-out data and `best_metric` (`RERUN_MAY_CHANGE`); the best
  value is recorded with both, and a resume that evaluates otherwise starts the best and
  the patience count over, logging the old best. It used to compare scores of two
  evaluations: a 0.5 on new data was no improvement on 0.9 measured on the old."""
  dev = {"data": [{"file": "/data/dev.tsv", "bytes": 4, "sha256": "a" * 64}]}
  loop = _bare_loop(tmp_path, evaluation=dev)
  loop.eval_state.best_value.assign(0.9)
  loop.eval_state.best_step.assign(2)
  loop.eval_state.evals_since_best.assign(1)
  loop.save()
  # The same evaluation, or a run that does not evaluate (its checkpoints keep the record).
  assert _state(_bare_loop(tmp_path, evaluation=dev)) == (0.9, 2, 1)
  _bare_loop(tmp_path, evaluates=False).save()
  assert _state(_bare_loop(tmp_path, evaluation=dev)) == (0.9, 2, 1)

  edited = {"data": [{**dev["data"][0], "sha256": "b" * 64}]}
  with caplog.at_level(logging.INFO, logger="absl"):
    loop = _bare_loop(tmp_path, evaluation=edited)
  assert math.isnan(_state(loop)[0]) and _state(loop)[1:] == (-1, 0)
  assert ("the evaluation differs from the one the checkpoint's best accuracy was measured "
          "on (data: /data/dev.tsv: same size, other content (sha256 aaaaaaaaaaaa -> "
          "bbbbbbbbbbbb)): that best (0.9000 at applied step 2, 1 evaluation(s) since) is not "
          "compared with this run's; the best value and the patience count start over"
          ) in caplog.text
  assert json.loads(loop.eval_state.evaluation.numpy()) == {"best_metric": "accuracy",
                                                             **edited}

  caplog.clear()  # (Nothing was saved: the checkpoint still holds dev.tsv's best.)
  with caplog.at_level(logging.INFO, logger="absl"):
    loop = _bare_loop(tmp_path, best_metric="eval_loss", evaluation=dev)
  assert 'best_metric: "accuracy" -> "eval_loss"' in caplog.text
  assert math.isnan(_state(loop)[0])

  # A checkpoint written before the record: compared as before, and said so.
  loop.eval_state.best_value.assign(0.7)
  loop.eval_state.best_step.assign(4)
  loop.eval_state.evaluation.assign("")
  loop.save()
  caplog.clear()
  with caplog.at_level(logging.INFO, logger="absl"):
    assert _state(_bare_loop(tmp_path, evaluation=dev)) == (0.7, 4, 0)
  assert "does not record what its best value was measured on" in caplog.text


def test_a_nan_best_metric_neither_improves_nor_counts_toward_early_stopping(tmp_path, caplog):
  """Pearson of constant dev targets is NaN at every evaluation: it used to count as "no
  improvement", so patience 1 stopped the run at its first evaluation ("best nan at applied
  step -1"). A NaN is skipped with a warning; a later real value is the best."""
  loop = _bare_loop(tmp_path, best_metric="pearson")
  loop.config = dataclasses.replace(loop.config, early_stopping_patience=1)
  values = iter([float("nan"), float("nan"), 0.5])
  loop.evaluate = lambda: {"pearson": next(values)}
  with caplog.at_level(logging.WARNING, logger="absl"):
    loop._evaluate(2)  # pylint: disable=protected-access
    loop._evaluate(4)  # pylint: disable=protected-access
  assert not loop.stopped_early and _state(loop)[1:] == (-1, 0)
  assert caplog.text.count("best_metric pearson is NaN") == 1
  assert ("eval at applied step 2: best_metric pearson is NaN (undefined): an evaluation where "
          "it is NaN neither improves the best nor counts toward early_stopping_patience (said "
          "once)") in caplog.text
  loop._evaluate(6)  # pylint: disable=protected-access
  assert _state(loop) == (0.5, 6, 0) and not loop.stopped_early


@pytest.mark.slow  # ~8 s: a run stopped after its first evaluation, and its resume.
def test_fine_tuning_resumed_on_an_edited_dev_file_starts_the_best_over(tmp_path):
  """`fine_tuning.train`'s `eval_files` are recorded by content: dev.tsv edited in place
  (same size) between the stop and the resume makes the resume's first score (0.5) the best,
  where a comparison with 0.9, measured on the old file, stopped the run (patience 1)."""
  dev = tmp_path / "dev.tsv"
  dev.write_text("a\t1\n")
  config = _config(tmp_path, eval_every_steps=2, best_metric="accuracy",
                   early_stopping_patience=1, save_checkpoints_steps=100)
  initial = _initial()
  _train(dataclasses.replace(config, stop_at_step=2), initial, steps=8,
         evaluate=_scripted([0.9]), eval_files=[str(dev)])
  dev.write_text("b\t0\n")
  _, result = _train(config, initial, steps=8, evaluate=_scripted([0.5, 0.4]),
                     eval_files=[str(dev)])
  assert result["steps"] == 6 and result["stopped_early"]  # 0.4 at 6: no better than 0.5.
  with open(tmp_path / "run" / fine_tuning.BEST_DIR / "eval_results.json",
            encoding="utf-8") as f:
    assert json.load(f)["step"] == 4


def test_an_unknown_best_metric_names_the_evaluations_scalars(tmp_path):
  config = _config(tmp_path, eval_every_steps=2, best_metric="f1")
  with pytest.raises(ValueError, match=r"best_metric 'f1' is not among .*accuracy, eval_loss"):
    _train(config, _initial(), evaluate=_scripted([0.5]))


def _signalling_at_the_second_evaluation(signum):
  """An `evaluate` scoring 0.1, then 0.2 after sending `signum` to this process (delivered
  on return to the main thread's bytecode: during the run's second evaluation)."""
  scores = _scripted([0.1, 0.2])

  def evaluate():
    result = scores()
    if result["accuracy"] == 0.2:
      os.kill(os.getpid(), signum)
    return result

  return evaluate


@pytest.mark.slow
def test_sigterm_saves_at_the_step_reached_and_the_rerun_continues(tmp_path, straight):
  """SIGTERM during step 4's evaluation: the run saves at 4 and raises `Preempted` (the
  tools' exit status 75); the rerun ends equal to the uninterrupted run (`straight`: an
  evaluation trains nothing, so its weights and training log lines are the evaluating
  run's), with every evaluation logged once."""
  initial = _initial()
  config = _config(tmp_path, "preempted", eval_every_steps=2)
  handler = signal.getsignal(signal.SIGTERM)
  with pytest.raises(training_loop.Preempted) as preempted:
    _train(config, initial, evaluate=_signalling_at_the_second_evaluation(signal.SIGTERM))
  assert preempted.value.step == 4 and preempted.value.exit_status == 75
  assert preempted.value.checkpoint.endswith("ckpt-4")
  assert signal.getsignal(signal.SIGTERM) == handler  # The loop's handler is gone again.
  resumed, _ = _train(config, initial, evaluate=_scripted([0.3, 0.4]))
  for a, b in zip(straight[1], resumed.get_weights()):
    np.testing.assert_array_equal(a, b)
  rows = _metrics(tmp_path / "preempted")
  assert [r for r in rows if r.get("split") != "eval"] == _metrics(straight[0])
  assert [(r["step"], r["accuracy"]) for r in rows if r.get("split") == "eval"] == [
      (2, 0.1), (4, 0.2), (6, 0.3), (7, 0.4)]
  # Each evaluation right after the training line of its step, as the straight run logs them.
  assert [(r["step"], r.get("split")) for r in rows] == [
      pair for r in _metrics(straight[0])
      for pair in [(r["step"], None)] + [(r["step"], "eval")] * (r["step"] in (2, 4, 6, 7))]


@pytest.mark.slow  # ~4 s: two runs to their fourth step.
def test_a_first_ctrl_c_saves_at_the_step_reached_and_a_second_one_stops_the_save(
    tmp_path, monkeypatch):
  """Sweep 22 H2: one Ctrl-C before a new run's first checkpoint (step ~630 of 4750) threw
  every step away and left the directory populated. The first Ctrl-C is read as SIGTERM
  is: the run saves at the step reached (here 4, during its evaluation; the first checkpoint
  would be 6) and raises `Interrupted` (exit 130) naming it; a second one, during that save,
  stops at once, naming what is kept. The loop's handlers are gone again after either."""
  initial = _initial()
  handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
  config = _config(tmp_path, eval_every_steps=2, save_checkpoints_steps=6)
  with pytest.raises(training_loop.Interrupted) as interrupted:
    _train(config, initial, evaluate=_signalling_at_the_second_evaluation(signal.SIGINT))
  checkpoint = str(tmp_path / "run" / "checkpoints" / "ckpt-4")
  assert (interrupted.value.step, interrupted.value.checkpoint) == (4, checkpoint)
  assert interrupted.value.exit_status == 130 and str(interrupted.value) == (
      f"interrupted (Ctrl-C): saved {checkpoint} at applied step 4; run the same command "
      "again to resume")
  assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
  assert tf.train.latest_checkpoint(str(tmp_path / "run" / "checkpoints")) == checkpoint

  def second_ctrl_c(self):  # The save, cut by a second Ctrl-C.
    os.kill(os.getpid(), signal.SIGINT)
    raise AssertionError("a second Ctrl-C stops the save at once")

  monkeypatch.setattr(training_loop.TrainingLoop, "save", second_ctrl_c)
  with pytest.raises(training_loop.Interrupted) as interrupted:
    _train(_config(tmp_path, "again", eval_every_steps=2, save_checkpoints_steps=6),
           initial, evaluate=_signalling_at_the_second_evaluation(signal.SIGINT))
  assert interrupted.value.checkpoint is None and interrupted.value.step is None
  assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers


def test_ctrl_c_during_a_save_leaves_no_temporary_and_names_the_kept_checkpoint(tmp_path):
  """Sweep 17 H1: Ctrl-C inside the save of ckpt-1000 left checkpoints/ckpt-1000_temp/ and
  said only "interrupted"."""
  loop = _bare_loop(tmp_path / "run")
  kept = loop.save()
  checkpoints = tmp_path / "run" / "checkpoints"

  def cut_save(*_):  # What a sharded save holds when Ctrl-C comes before its merge.
    os.makedirs(checkpoints / "ckpt-1000_temp")
    raise KeyboardInterrupt

  loop._loop = cut_save
  with pytest.raises(training_loop.Interrupted) as interrupted:
    loop.train(batches=None)
  assert not (checkpoints / "ckpt-1000_temp").exists() and interrupted.value.exit_status == 130
  assert str(interrupted.value) == (
      f"interrupted (Ctrl-C): removed the unfinished save {checkpoints / 'ckpt-1000_temp'}; "
      f"kept {kept}; run the same command again to resume from it")


@pytest.mark.parametrize("replicas, batch_size", [(1, 4), (2, 4), (2, 6)])
def test_sharded_prediction_scores_every_example_once_in_order(replicas, batch_size):
  """13 examples in global batches of 4 or 6 (the last padded): each output row is the
  model's output on its own example, none dropped, none twice."""
  strategy = _strategy(replicas)
  model = _model(strategy, _initial(TWO_LAYERS), TWO_LAYERS)
  features = {k: v[:13] for k, v in _examples()[0].items()}
  outputs = fine_tuning.predict(model, strategy, features, batch_size)
  assert outputs["logits"].shape == (13, CLASSES)
  expected = model(features, training=False)["logits"].numpy()
  # One example's logits do not depend on its batch mates: only float rounding of the
  # batched matmuls differs (~1e-7).
  np.testing.assert_allclose(outputs["logits"], expected, atol=1e-6)
  # The examples' logits are far apart at that tolerance: a row moved, dropped or doubled
  # would show.
  gaps = np.abs(expected[:, None] - expected[None]).max(-1) + np.eye(13)
  assert gaps.min() > 1e-5


@pytest.mark.slow
def test_xla_compiled_steps_train_as_graph_steps(tmp_path, straight):
  """`jit_compile` (one device): the same masks and data; XLA fuses float ops differently
  (~1e-7 relative, lifted by Adam to ~1e-6), while another step or mask moves ~1e-2."""
  xla, _ = _train(_config(tmp_path, "xla", jit_compile=True), _initial())
  deviation = max(float(np.abs(a - b).max())
                  for a, b in zip(straight[1], xla.get_weights()))
  assert deviation < 1e-5, deviation


@pytest.mark.slow
def test_the_speed_leaves_out_the_first_step_which_traces(tmp_path, monkeypatch):
  """The first call of the step traces it (with XLA also compiles it); here it is made to
  take 3 s more. A speed that counted it would give < 8 examples/s for the first window
  (3 applied steps of 8 examples in > 3 s); the tiny model's 2 timed steps take well under
  2 s, so the speed left without it is > 8 examples/s. (A window of the first step alone, log
  every step, has no speed point and the next one has: tests/squad/squad_run_test.py's
  evaluation test shows it in metrics.jsonl and TensorBoard.)"""
  real = training_loop.graph_micro_steps
  calls = []
  # The loop's clock, moved on by 3 s during the first call instead of sleeping 3 s.
  clock = types.SimpleNamespace(jump=0.0)
  clock.perf_counter = lambda: time.perf_counter() + clock.jump

  def slow_first(strategy, train_step):
    micro_steps = real(strategy, train_step)

    def timed(iterator, count):
      calls.append(int(count))
      if len(calls) == 1:
        clock.jump += 3.0
      return micro_steps(iterator, count)
    return timed

  monkeypatch.setattr(training_loop, "graph_micro_steps", slow_first)
  monkeypatch.setattr(training_loop, "time", clock)
  _train(_config(tmp_path, "windows", log_steps=3, save_checkpoints_steps=6), _initial(),
         steps=6)
  with open(tmp_path / "windows" / "metrics.jsonl", encoding="utf-8") as f:
    rows = [json.loads(line) for line in f]
  assert [r["step"] for r in rows] == [3, 6]
  assert rows[0]["examples_per_second"] > 8.0, rows[0]
  assert calls[0] == 2  # The first step (2 micro-steps) ran alone.


@pytest.mark.parametrize("entry", ["best", "checkpoints", "eval", "export", "train"])
def test_a_file_where_the_run_creates_a_directory_is_refused_naming_it(tmp_path, entry):
  """A file `train` in the run directory failed mid-run with TensorFlow's "Not a directory
  [Op:CreateSummaryFileWriter]", naming no path (sweep 8, RE10, DF03): refused when the run
  config is built, before any work, naming the path and what is there."""
  run = tmp_path / "run"
  run.mkdir()
  (run / entry).write_text("x")
  path = re.escape(str(run / entry))
  with pytest.raises(ValueError, match=rf"--output_dir {re.escape(str(run))}: {path} is a "
                                       rf"file, where the run keeps its {entry}/ directory"):
    _config(tmp_path)
  (run / entry).unlink()
  (run / entry).symlink_to(tmp_path / "gone")
  with pytest.raises(ValueError, match=rf"{path} is a symbolic link to .*gone, which does "
                                       "not exist"):
    _config(tmp_path)
  (run / entry).unlink()
  (run / entry).symlink_to(tmp_path)  # A link to a directory is one.
  _config(tmp_path)
  assert entry in training_loop.RUN_ENTRIES


def test_the_loop_refuses_a_file_where_it_creates_a_directory(tmp_path):
  (tmp_path / "train").write_text("x")
  with pytest.raises(ValueError, match=rf"the run directory {re.escape(str(tmp_path))}: "
                                       rf"{re.escape(str(tmp_path / 'train'))} is a file"):
    _bare_loop(tmp_path)
  assert not (tmp_path / "checkpoints").exists()  # Refused before creating any.


def test_a_rerun_already_at_stop_at_step_names_it_and_the_steps_left(tmp_path, caplog):
  """A run resumed at its --stop_at_step (a flags.txt of an older run replayed) trains
  nothing: the line names --stop_at_step, the steps left and what to do, not "nothing more
  to train" (sweep18 S1: c22). `_loop` returns before touching the model."""
  config = training_loop.LoopConfig(num_train_steps=540, train_batch_size=8, stop_at_step=530)
  loop = types.SimpleNamespace(config=config, step=530, stopped_early=False,
                               directory=str(tmp_path))
  with caplog.at_level(logging.INFO):
    result = training_loop.TrainingLoop._loop(loop, None, None, None)
  assert result["step"] == 530 and "resumed_finished" not in result
  message = "\n".join(r.getMessage() for r in caplog.records)
  assert "nothing more to train" not in message
  assert re.search(r"already at applied step 530, at --stop_at_step=530: trained nothing; 10 "
                   r"applied steps remain .* at applied step 540 .*no model\.keras, evaluation"
                   r".*Rerun without --stop_at_step", message), message


def test_the_stop_at_step_line_names_the_flag_that_sets_the_runs_end_in_each_tool():
  """Sweep 22 P1: run_pretraining's --stop_at_step line named --max_train_steps, a flag it
  does not have (its run's end is --num_train_steps). Each tool's loop config says which."""
  pretraining = pretraining_run.loop_config(types.SimpleNamespace(
      num_train_steps=540, train_batch_size=8, gradient_accumulation_steps=1, log_steps=10,
      save_checkpoints_steps=100, keep_checkpoint_max=5, evaluates=False, stop_at_step=530,
      jit_compile=False, run_eagerly=False, dtype="float32"))
  message = training_loop.stop_at_step_message(530, pretraining)
  assert "at applied step 540 (--num_train_steps)" in message, message
  assert "max_train_steps" not in message
  fine_tuned = fine_tuning.loop_config(
      fine_tuning.FineTuningConfig(output_dir="run", stop_at_step=530), 540, evaluates=False)
  assert ("at applied step 540 (--max_train_steps, or the schedule's end: --num_train_epochs)"
          in training_loop.stop_at_step_message(530, fine_tuned))


def test_a_finished_rerun_says_its_evaluation_during_training_is_not_rerun(tmp_path, caplog):
  """Sweep 22 p04: a finished run_pretraining run rerun with new --eval_input_files said
  'nothing more to train' and nothing of the evaluation it did not run. The line says so,
  and names the step of the last evaluation logged."""
  (tmp_path / "metrics.jsonl").write_text(
      '{"step": 2, "loss": 1.0}\n{"step": 2, "split": "eval", "loss": 2.0}\n')
  config = training_loop.LoopConfig(num_train_steps=2, train_batch_size=8)
  for evaluate, note in [(lambda: {}, "; the evaluation during training is not rerun (the "
                          "last, at applied step 2, is in metrics.jsonl)"), (None, "")]:
    loop = types.SimpleNamespace(config=config, step=2, stopped_early=False,
                                 directory=str(tmp_path), evaluate=evaluate)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="absl"):
      result = training_loop.TrainingLoop._loop(loop, None, None, None)
    assert result["resumed_finished"]
    assert [r.getMessage() for r in caplog.records] == [
        f"the run is at applied step 2: nothing more to train{note}"]
