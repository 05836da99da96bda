"""Tests for tfbert.tasks.length_buckets: batches cut to their length bucket, exactly, and
`fine_tuning.shuffled_batches`' grouping by length.

The training proofs use a tiny token classifier: its loss averages each window's labelled
positions only, the loss most exposed to padding (a per-position mean over all S positions
would change with every cut). S 37, bucket step 8 (lengths 8, 16, 24, 32, 37), windows of
3 to 37 tokens, most of them short, so most batches are cut and to several lengths.
"""

import dataclasses
import functools
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfbert import BertConfig, BertTokenClassifier
from tfbert.tasks import fine_tuning, length_buckets
from tfbert.training import distribution

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Without dropout for the equalities: dropout masks are drawn for the batch's shape, so a
# batch cut to L draws other (equally distributed) masks than the same batch padded to S.
# One layer: a layer's attention reads the mask as a second one does, and each run (and each
# XLA compilation, one per concrete shape) traces half as much.
CONFIG = BertConfig(vocab_size=47, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=19, max_position_embeddings=37, type_vocab_size=2,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
DROPOUT = dataclasses.replace(CONFIG, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
SEQ, STEP, EXAMPLES = 37, 8, 31
LABELS = ("O", "B-X", "I-X")
BUCKETS = (8, 16, 24, 32, 37)


def _lengths():
  rng = np.random.default_rng(7)
  lengths = rng.integers(3, 14, EXAMPLES)
  lengths[[4, 17]] = [37, 29]  # Two long windows: some batches need 32 or S.
  return lengths


def _examples():
  """(inputs, {"logits": tags}) of EXAMPLES windows, tags -1 on [CLS], [SEP] and padding."""
  rng = np.random.default_rng(5)
  lengths = _lengths()
  mask = (np.arange(SEQ)[None] < lengths[:, None]).astype(np.int32)
  ids = rng.integers(5, CONFIG.vocab_size, (EXAMPLES, SEQ)).astype(np.int32) * mask
  tags = np.where(mask == 1, rng.integers(0, len(LABELS), (EXAMPLES, SEQ)), -1)
  tags[:, 0] = -1
  tags[np.arange(EXAMPLES), lengths - 1] = -1
  inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(mask)}
  return inputs, {"logits": tags.astype(np.int32)}


def test_bucket_lengths_are_multiples_below_s_then_s():
  assert length_buckets.bucket_lengths(SEQ, STEP) == BUCKETS
  assert length_buckets.bucket_lengths(16, 16) == (16,)
  assert length_buckets.bucket_lengths(16, 64) == (16,)
  with pytest.raises(ValueError, match="length_bucket must be > 0"):
    length_buckets.bucket_lengths(16, 0)


def _batches(length_bucket, count=16, batch=4):
  dataset = fine_tuning.shuffled_batches(_examples(), EXAMPLES, batch, seed=3,
                                         length_bucket=length_bucket)
  return [tf.nest.map_structure(lambda t: t.numpy(), b) for b in dataset.take(count)]


def test_each_batch_is_its_uncut_batch_up_to_the_bucket_of_its_longest_window():
  cut, full = _batches(STEP), _batches(0)
  seen = set()
  for (inputs, labels), (full_inputs, full_labels) in zip(cut, full):
    longest = int(full_inputs["input_mask"].sum(axis=1).max())
    length = min(b for b in BUCKETS if b >= longest)
    seen.add(length)
    for name, value in inputs.items():
      assert value.shape == (4, length), name
      np.testing.assert_array_equal(value, full_inputs[name][:, :length])
      assert not full_inputs[name][:, length:].any()  # Only padding was cut.
    np.testing.assert_array_equal(labels["logits"], full_labels["logits"][:, :length])
    assert (full_labels["logits"][:, length:] == -1).all()
  assert len(seen) >= 3, seen  # Several buckets: the stream really varies in length.
  assert all(full_inputs["input_ids"].shape == (4, SEQ) for full_inputs, _ in full)


def test_the_texts_of_a_pair_are_cut_to_the_bucket_of_the_longest_and_scores_stay_whole():
  """The encoder reads a pair's texts as one batch: one length for all of them."""
  inputs, _ = _examples()

  def first(n):
    return {name: np.where(np.arange(SEQ)[None] < n, value, 0) for name, value in inputs.items()}

  pairs = ({"anchor": first(5), "positive": first(12)}, np.arange(EXAMPLES, dtype=np.float32))
  (parts, scores), = fine_tuning.shuffled_batches(pairs, EXAMPLES, 31, seed=1,
                                                  length_bucket=STEP).take(1)
  assert parts["anchor"]["input_ids"].shape == parts["positive"]["input_ids"].shape == (31, 16)
  np.testing.assert_array_equal(np.sort(scores), np.arange(EXAMPLES))


def _grouped_rows(start=0, count=24, batch=4, window_steps=2, step_rows=8):
  """Example indices of the grouped stream's batches, from batch `start`."""
  inputs, _ = _examples()
  index = {"input_ids": inputs["input_ids"], "input_mask": inputs["input_mask"],
           "row": np.arange(EXAMPLES, dtype=np.int32)}
  dataset = fine_tuning.shuffled_batches(index, EXAMPLES, batch, seed=3, start=start,
                                         group_by_length=window_steps, step_rows=step_rows)
  return [b["row"].numpy().tolist() for b in dataset.take(count)]


def test_grouping_sorts_each_window_into_steps_of_similar_length_and_seeks():
  """Windows of 2 applied steps of 8 rows: a window holds the ungrouped stream's rows; its
  steps hold the 8 longest and the 8 shortest, in a seeded order; a start seeks into it."""
  grouped, plain = _grouped_rows(), _grouped_rows(window_steps=0)
  lengths = _lengths()
  for w in range(0, 24, 4):  # 4 batches of 4 per window.
    rows = sum(grouped[w:w + 4], [])
    assert sorted(rows) == sorted(sum(plain[w:w + 4], []))
    steps = [rows[:8], rows[8:]]
    by_length = sorted(steps, key=lambda step: -lengths[step].max())
    assert lengths[by_length[0]].min() >= lengths[by_length[1]].max()
  longer_first = [lengths[sum(grouped[w:w + 2], [])].sum()
                  > lengths[sum(grouped[w + 2:w + 4], [])].sum() for w in range(0, 24, 4)]
  assert True in longer_first and False in longer_first  # The steps' order is shuffled.
  assert _grouped_rows(start=5, count=19) == grouped[5:]  # Resume mid-window.
  with pytest.raises(ValueError, match="multiple of the batch size"):
    _grouped_rows(step_rows=6)


def test_per_position_outputs_are_padded_back_to_s_and_per_example_ones_left():
  @tf.function(input_signature=[tf.TensorSpec([None, None, 3]), tf.TensorSpec([None, 3])])
  def pad(tokens, pooled):
    return length_buckets.pad_outputs({"tokens": tokens, "pooled": pooled}, 5)
  out = pad(tf.ones([2, 3, 3]), tf.ones([2, 3]))
  np.testing.assert_array_equal(out["tokens"].numpy()[:, :3], 1.0)
  np.testing.assert_array_equal(out["tokens"].numpy()[:, 3:], 0.0)
  assert out["tokens"].shape == (2, 5, 3) and out["pooled"].shape == (2, 3)


def _model(config):
  return BertTokenClassifier(config, LABELS,
                             dropout_rate=config.hidden_dropout_prob)


@functools.cache
def _initial_weights():
  keras.utils.set_random_seed(2)
  model = _model(CONFIG)
  model.build()
  return tuple(model.get_weights())


def _initial():
  """The initial weights (built once per process; fresh copies, so no run can change them)."""
  return [np.array(w) for w in _initial_weights()]


def _config(tmp_path, name, **overrides):
  values = dict(output_dir=str(tmp_path / name), do_train=True, train_batch_size=8,
                gradient_accumulation_steps=2, learning_rate=3e-3, clip_norm=0.5, log_steps=2,
                save_checkpoints_steps=3, seed=11, length_bucket=STEP, group_by_length=2)
  return fine_tuning.FineTuningConfig(**{**values, **overrides})


def _train(config, initial, replicas=1, steps=6, bert_config=CONFIG, strategy=None):
  strategy = strategy or distribution.create_strategy(
      "one_device" if replicas == 1 else "mirrored", replicas)
  keras.utils.set_random_seed(2)  # The same layer seeds, so the same dropout streams.
  with strategy.scope():
    model = _model(bert_config)
    model.build()
  model.set_weights(initial)
  traces = []
  step = model.train_step

  def counted(data):
    traces.append(data[0]["input_ids"].shape[1])  # Static None: one trace for all lengths.
    return step(data)

  model.train_step = counted
  result = fine_tuning.train(model, strategy, config, _examples(), EXAMPLES, steps=steps,
                             total_steps=steps)
  return model.get_weights(), result, traces


def train_on(strategy, output_dir):
  """The replica run of `test_accumulation_and_replicas_with_buckets_equal_one_batch` under
  `strategy` (a worker of tests/multi_worker.py): 1 micro-step per applied step, its batch
  of 8 dealt to the replicas, 4 each."""
  config = _config(pathlib.Path(output_dir).parent, pathlib.Path(output_dir).name,
                   gradient_accumulation_steps=1)
  return _train(config, _initial(), strategy=strategy)


def _deviation(a, b):
  return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
  """The uninterrupted bucketed one-device run (2 micro-steps of 4 per applied step)."""
  return _train(_config(tmp_path_factory.mktemp("buckets"), "straight"), _initial())


@pytest.mark.slow
def test_bucketed_training_traces_once_and_trains_as_padded_batches_do(tmp_path, straight):
  """Cut batches compute what padded ones do (the padding is masked and unlabelled): the
  same weights up to float summation order (~1e-7, lifted by Adam to ~1e-6), while a
  step on other data or masks moves them ~1e-2. One trace of the step for every length."""
  weights, result, traces = straight
  assert result["steps"] == 6 and traces == [None]
  padded, _, padded_traces = _train(_config(tmp_path, "padded", length_bucket=0), _initial())
  assert padded_traces == [SEQ]
  assert _deviation(weights, padded) < 1e-5
  assert _deviation(weights, _initial()) > 1e-3  # It trained.


# The child of the XLA test: 2 applied steps of 2 micro-batches, the step compiled by XLA, on
# the one-layer tagger (XLA compiles per concrete shape whatever the depth).
_XLA_CHILD = """
import pathlib, sys
from tests.tasks import length_buckets_test as T
_, result, traces = T._train(T._config(pathlib.Path(sys.argv[1]), "xla", jit_compile=True),
                             T._initial(), steps=2)
print("TRACES", len(traces), "STEPS", result["steps"], flush=True)
"""


@pytest.mark.slow  # ~15 s: a fresh process (XLA's compilation log) compiling 3 lengths.
def test_xla_compiles_the_step_once_per_bucket_length_it_meets(tmp_path):
  """With `jit_compile`, one Python trace of the step and one XLA compilation per distinct
  bucket length among the micro-batches read (XLA compiles per concrete shape; counted from
  TensorFlow's own log line per compilation, `device_compiler=1`), not one per batch."""
  stream = fine_tuning.shuffled_batches(_examples(), EXAMPLES, 4, seed=11, length_bucket=STEP,
                                        group_by_length=2, step_rows=8)
  lengths = [int(inputs["input_ids"].shape[1]) for inputs, _ in stream.take(4)]
  assert len(set(lengths)) == 3 < len(lengths), lengths  # A repeat and several buckets.
  env = {**os.environ, "TF_CPP_VMODULE": "device_compiler=1", "TF_CPP_MIN_LOG_LEVEL": "0"}
  run = subprocess.run([sys.executable, "-c", _XLA_CHILD, str(tmp_path)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600, check=False)
  assert run.returncode == 0, run.stderr[-3000:]
  assert "TRACES 1 STEPS 2" in run.stdout
  assert run.stderr.count("Compilation of XLA executable time") == len(set(lengths))


@pytest.mark.slow
def test_accumulation_and_replicas_with_buckets_equal_one_batch(tmp_path, straight):
  """Micro-batches and replicas cut to different lengths within one applied step: 2
  micro-batches of 4 on one device, 2 replicas of 4, and one batch of 8 (cut to its own
  longest window) train alike."""
  weights = straight[0]
  replicas, _, _ = _train(_config(tmp_path, "replicas", gradient_accumulation_steps=1),
                          _initial(), replicas=2)
  # Replica r of step i reads batch 2i + r of 4: the micro-batches of the one-device run.
  assert _deviation(weights, replicas) < 1e-5
  big, _, _ = _train(_config(tmp_path, "big", gradient_accumulation_steps=1), _initial())
  assert _deviation(weights, big) < 1e-5


@pytest.mark.slow  # ~12 s: two worker processes.
def test_two_workers_with_strongly_cut_batches_end_as_one_process(tmp_path, straight):
  """2 worker processes (MultiWorkerMirroredStrategy, a replica each), every micro-batch
  cut (S 37; lengths 8 to 37, most 8 or 16): each worker cuts its own part of a step to its
  own length, and the workers hold identical weights, within 1e-5 of the one-device run
  (the same rows per applied step, summed in another order)."""
  from tests import multi_worker  # pylint: disable=import-outside-toplevel
  output = str(tmp_path / "mw")
  for worker in multi_worker.launch_workers(multi_worker.worker_command("buckets", output),
                                            cwd=ROOT, timeout=600):
    assert worker.returncode == 0, worker.stdout[-3000:]
  chief, other = (np.load(f"{output}.{index}.npz") for index in (0, 1))
  assert int(chief["steps"]) == int(other["steps"]) == 6
  chief = [chief[f"arr_{i}"] for i in range(len(straight[0]))]
  other = [other[f"arr_{i}"] for i in range(len(straight[0]))]
  for a, b in zip(chief, other):
    np.testing.assert_array_equal(a, b)  # The workers agree exactly.
  assert _deviation(chief, straight[0]) < 1e-5
  assert _deviation(chief, _initial()) > 1e-3  # It trained.


@pytest.mark.slow
def test_a_stopped_bucketed_run_with_dropout_resumes_bit_for_bit(tmp_path):
  """Stopped at 3 (checkpoint at 3), resumed to 6: the stream resumes at its position, so
  the same batches are cut to the same lengths and draw the same dropout masks."""
  def run(name, **more):
    return _train(_config(tmp_path, name, **more), _initial(), bert_config=DROPOUT)

  straight, _, _ = run("straight")
  _, stopped, _ = run("split", stop_at_step=3)
  assert stopped["steps"] == 3
  resumed, result, _ = run("split")
  assert result["steps"] == 6
  for a, b in zip(straight, resumed):
    np.testing.assert_array_equal(a, b)


def test_bucketed_prediction_scores_every_real_position_as_padded_prediction():
  keras.utils.set_random_seed(4)
  strategy = distribution.create_strategy("one_device", 1)
  with strategy.scope():
    model = _model(CONFIG)
    model.build()
  inputs, _ = _examples()
  cut = fine_tuning.predict(model, strategy, inputs, 6, length_bucket=STEP)["logits"]
  full = fine_tuning.predict(model, strategy, inputs, 6)["logits"]
  assert cut.shape == full.shape == (EXAMPLES, SEQ, len(LABELS))
  real = inputs["input_mask"] == 1
  np.testing.assert_allclose(cut[real], full[real], rtol=1e-5, atol=1e-6)
  lengths = _lengths()
  # Batches of 6 in order: past a batch's bucket the outputs are the zeros of padding.
  for start in range(0, EXAMPLES, 6):
    longest = lengths[start:start + 6].max()
    bucket = min(b for b in BUCKETS if b >= longest)
    assert not cut[start:start + 6, bucket:].any()


def test_a_negative_length_bucket_is_refused(tmp_path):
  with pytest.raises(ValueError, match=r"length_bucket \(-1\) must be >= 0"):
    dataclasses.replace(_config(tmp_path, "x"), length_bucket=-1)
