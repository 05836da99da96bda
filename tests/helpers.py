"""Shared test helpers: odd-sized configs and models loaded from Google-name dicts.

Odd sizes (batch 13, seq 7, hidden 32, intermediate 37, vocab 101) make a swapped axis fail
loudly instead of broadcasting silently.
"""

import gc
import json
import os
import subprocess
import sys

import keras
import numpy as np

from tests import numpy_reference
from tfbert.checkpoints import pretrained
from tfbert.checkpoints.google_checkpoint import assign_google_weights, google_weights
from tfbert.config import BertConfig
from tfbert.models import BertSpanLabeler
from tfbert.pretraining import pretraining_data

# initializer_range 0.2: with 0.02 activations stay near 0, attention is almost uniform and
# the two GELU flavours agree to ~1e-6 (see numpy_reference.random_google_weights), which
# would let a wrong activation pass a 2e-5 parity test.
ODD_CONFIG = dict(vocab_size=101, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                  intermediate_size=37, hidden_act="gelu", hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, max_position_embeddings=19,
                  type_vocab_size=3, initializer_range=0.2)
BATCH, SEQ, PREDICTIONS = 13, 7, 3
# The repository root (tests/.. ): where tools/ and tfbert/ are.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def odd_config(**overrides) -> BertConfig:
  return BertConfig(**{**ODD_CONFIG, **overrides})


def random_features(config: BertConfig, seed: int = 0, batch: int = BATCH, seq: int = SEQ):
  """Padded int32 features with google-research/bert names, plus MLM positions [B, P]."""
  input_ids, input_mask, segment_ids = numpy_reference.random_inputs(
      config.to_dict(), batch, seq, seed)
  rng = np.random.default_rng(seed + 1)
  positions = rng.integers(0, seq, size=(batch, PREDICTIONS)).astype(np.int32)
  return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
          "masked_lm_positions": positions}


def loaded(model, weights, **kwargs):
  """Assigns a Google-name dict to `model` strictly and returns the model."""
  assign_google_weights(model, weights, "test weights", **kwargs)
  return model


def random_span_labeler(config: BertConfig, seed: int):
  """A float32 `BertSpanLabeler` with random Google-name weights, span head included."""
  weights = numpy_reference.random_google_weights(config.to_dict(), seed=seed)
  rng = np.random.default_rng(seed)
  weights["cls/squad/output_weights"] = rng.normal(0, 0.5, (2, config.hidden_size))
  weights["cls/squad/output_bias"] = rng.normal(0, 0.5, (2,))
  return loaded(BertSpanLabeler(config, dtype="float32"), weights, allow_unused=True)


def live_instances(cls) -> int:
  """How many objects of `cls` (or a subclass) the process holds after a full collection."""
  gc.collect()
  return sum(isinstance(o, cls) for o in gc.get_objects())


def checkpoint_saved(checkpoints_dir, step: int) -> bool:
  """Whether the checkpoint of applied `step` is saved whole in `checkpoints_dir`: listed in
  the `checkpoint` state file, which TensorFlow's CheckpointManager renames into place after
  the bundle's files (`ckpt-<step>.index` appears before: a kill between the two leaves a
  save the rerun does not resume from)."""
  state = os.path.join(str(checkpoints_dir), "checkpoint")
  if not os.path.exists(state):
    return False
  with open(state, encoding="utf-8") as f:
    return f'ckpt-{step}"' in f.read()


def max_abs_diff(a, b) -> float:
  return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def saved_weight_deviation(output_a, output_b) -> float:
  """Largest |difference| of any weight between two runs' `model.keras` (Google names)."""
  a, b = (google_weights(keras.saving.load_model(os.path.join(str(d), "model.keras")))
          for d in (output_a, output_b))
  return max(max_abs_diff(a[name], b[name]) for name in a)


def serve_in_fresh_process(script: str, work_dir, arrays: dict, *args: str):
  """Runs `script` in a fresh Python where tfbert is not importable (PYTHONPATH dropped).

  The script gets argv `inputs.npz outputs.npz *args`: `arrays` saved as the inputs, and the
  path to write its output arrays to; it prints a JSON report as its last stdout line.

  Returns:
    (output arrays by name, the report).
  """
  inputs_path, outputs_path = work_dir / "inputs.npz", work_dir / "outputs.npz"
  np.savez(inputs_path, **arrays)
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  env["TF_CPP_MIN_LOG_LEVEL"] = "2"
  run = subprocess.run([sys.executable, "-c", script, str(inputs_path), str(outputs_path),
                        *map(str, args)], cwd=work_dir, env=env, capture_output=True,
                       text=True, timeout=300, check=False)
  assert run.returncode == 0, run.stderr[-3000:]
  with np.load(outputs_path) as outputs:
    return dict(outputs), json.loads(run.stdout.strip().splitlines()[-1])


def pydoc_records(folder, seq_length: int, max_predictions: int, *, max_documents: int,
                  num_shards: int) -> str:
  """Pretraining records of the first `max_documents` pydoc-topics documents (the embedded
  English corpus), MiniLM's uncased vocabulary, one pass; returns `folder` as a str."""
  corpus = pretraining_data.pydoc_corpus(os.path.join(folder, "corpus.txt"),
                                         max_documents=max_documents)
  pretraining_data.create_pretraining_data(
      [corpus], str(folder), pretraining_data.PretrainingDataConfig(
          vocab_file=pretrained.minilm_vocab_file(), max_seq_length=seq_length,
          max_predictions_per_seq=max_predictions, dupe_factor=1, num_shards=num_shards),
      log_every_seconds=1e9)
  return str(folder)


def pydoc_text_files(folder, *, max_documents: int, num_files: int) -> str:
  """The first `max_documents` pydoc-topics documents dealt round-robin into `num_files`
  text files `part-<i>.txt` (blank lines between documents); returns their glob pattern."""
  corpus = pretraining_data.pydoc_corpus(os.path.join(folder, "corpus.tmp"),
                                         max_documents=max_documents)
  with open(corpus, encoding="utf-8") as f:
    documents = f.read().strip().split("\n\n")
  os.remove(corpus)
  for index in range(num_files):
    with open(os.path.join(folder, f"part-{index}.txt"), "w", encoding="utf-8") as f:
      f.write("\n\n".join(documents[index::num_files]) + "\n")
  return os.path.join(str(folder), "part-*.txt")


def tensorboard_scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
  """Every scalar of the TensorBoard event files in `log_dir`: {tag: [(step, value)]}."""
  import glob  # pylint: disable=import-outside-toplevel

  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  tags: dict[str, list[tuple[int, float]]] = {}
  for path in sorted(glob.glob(os.path.join(str(log_dir), "events.out.tfevents.*"))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        tags.setdefault(value.tag, []).append(
            (int(event.step), float(tf.make_ndarray(value.tensor))))
  return tags


def untrained_tfbert(directory, model_class, config: BertConfig, seed: int = 7) -> dict:
  """`{"init_tfbert": path}` of a `model_class(config)` of random weights drawn with `seed`,
  saved once per directory as `untrained.keras`: what a prediction-only test scores. A run
  that does not train needs a model to evaluate (`fine_tuning.evaluated_model`): random
  weights are never its default."""
  from tfbert.checkpoints import convert  # noqa: PLC0415 - only the tests that use it
  path = os.path.join(directory, "untrained.keras")
  if not os.path.exists(path):
    keras.utils.set_random_seed(seed)
    model = model_class(config)
    model.build()
    convert.save_tfbert_model(model, path)
  return {"init_tfbert": path}


def printed_scores(eval_results: dict) -> str:
  """The line a fine-tuning tool prints of the scores it wrote to `eval_results` (the
  content of eval_results.json): each file's scores as the run returned them, without the
  applied `step` the file records beside them."""
  return json.dumps({name: {k: v for k, v in values.items() if k != "step"}
                     for name, values in eval_results.items()}, sort_keys=True)
