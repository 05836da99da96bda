"""The main job's SQuAD part: fine-tune the freshly pretrained BERT, evaluate, export, serve.

1. `tfbert_tools.demos.squad_synthetic` writes a small SQuAD v1.1-format set (train and dev,
   offline).
2. The pretrained encoder (the pretraining part's Google-format export) gets a fresh span
   head; its untrained answers are scored first, as the baseline.
3. `tfbert.squad.squad_run` fine-tunes it (AdamW, warmup, `MirroredStrategy` over 2 logical CPU
   devices), writes `predictions.json` / `nbest_predictions.json` and scores them with the
   reference SQuAD v1.1 evaluation, then exports a SavedModel with a raw-text signature.
4. The SavedModel is loaded back and answers a dev question from its raw text.
"""

import dataclasses
import json
import os

import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SavedModel's in-graph tokenizer ops)

from tfbert.checkpoints import pretrained
from tfbert.squad import squad_export, squad_features, squad_postprocess, squad_run
from tfbert_tools.demos import quiet
from tfbert_tools.demos.squad_synthetic import synthetic_squad, write_squad_json

MAX_SEQ_LENGTH, DOC_STRIDE, MAX_QUERY_LENGTH = 64, 32, 16
EVAL_EVERY_STEPS = 150  # Also the checkpoint interval: evaluation curves and resume points.
# The fine-tuning recipe (24 epochs of batch 32: 906 steps). Evaluated F1 first plateaus
# near 20-30, then jumps to ~100; the step of that jump varies with the seeds and the CPU
# (oneDNN's kernels, and so the rounding, differ between CPUs). Measured on an AMD Zen 4
# over 3 pretraining x 3 fine-tuning seeds: peak 2e-3 with 10% warmup jumped late,
# or too late (final F1 77.75, 80.75, 98.54 in 3 runs); 3e-4 too slowly (97.19, 70.16);
# 1e-3 with 20% warmup jumped by step 450 in all 9 runs (final F1 98.75 to 100).
LEARNING_RATE, WARMUP_PROPORTION = 1e-3, 0.2


@dataclasses.dataclass(frozen=True)
class SquadDemoSummary:
  """What the SQuAD part did and where it wrote it."""
  data_dir: str
  train_questions: int
  dev_questions: int
  baseline: dict
  scores: dict
  train: dict
  evals: list  # metrics.jsonl's evaluation lines: {"step", "exact_match", "f1", ...}
  run_dir: str
  export_dir: str
  question: str
  context: str
  answer: str
  gold: str

  def format(self) -> str:
    def score(s):
      return f"EM {s['exact_match']:.2f} / F1 {s['f1']:.2f}"
    trained = (" (done before: resumed finished run)" if self.train.get("resumed_finished") else
               f" (loss {self.train['loss']:.4f}, {self.train['examples_per_second']:.0f} "
               "examples/s)")
    return "\n".join([
        f"SQuAD-format data: {self.train_questions} train / {self.dev_questions} dev questions "
        f"in {self.data_dir}",
        f"before fine-tuning (pretrained encoder, fresh span head): {score(self.baseline)}",
        f"fine-tuned {self.train['steps']} steps{trained}: {score(self.scores)} "
        "(reference SQuAD v1.1 evaluation)",
        "evaluated during training (F1 by applied step): " +
        ", ".join(f"{e['step']}: {e['f1']:.1f}" for e in self.evals),
        f"run directory: {self.run_dir} (predictions.json, nbest_predictions.json, "
        "eval_results.json, best/ = the best F1's model, checkpoints/)",
        f"rerun the same command to resume; view train and eval curves with: tensorboard "
        f"--logdir {self.run_dir}",
        f"SavedModel: {self.export_dir} (signatures answer_question, and serving_default "
        "and serving_hf for ids with Google's or Hugging Face's input names)",
        f"served from the SavedModel: Q: {self.question!r}",
        f"  context: {self.context!r}",
        f"  answer: {self.answer!r} (gold {self.gold!r})"])


def data_files(data_dir: str) -> tuple[str, str]:
  """The paths `make_data` writes in `data_dir`: (train, dev)."""
  return os.path.join(data_dir, "train.json"), os.path.join(data_dir, "dev.json")


def make_data(data_dir: str, train_paragraphs: int = 300, dev_paragraphs: int = 40
              ) -> tuple[str, str]:
  """Writes train (seed 1) and dev (seed 2) SQuAD JSON files; returns their paths
  (`data_files`)."""
  os.makedirs(data_dir, exist_ok=True)
  train, dev = data_files(data_dir)
  return (write_squad_json(train, synthetic_squad(train_paragraphs, seed=1, fillers=1)),
          write_squad_json(dev, synthetic_squad(dev_paragraphs, seed=2, fillers=1)))


def run_squad_demo(workdir: str, pretrained_checkpoint: str, epochs: float = 24.0,
                   learning_rate: float = LEARNING_RATE, batch_size: int = 32,
                   warmup_proportion: float = WARMUP_PROPORTION,
                   seed: int = 1) -> SquadDemoSummary:
  """Fine-tunes `pretrained_checkpoint` on the synthetic set, evaluates, exports, serves.

  Abseil's C++ log level follows TF_CPP_MIN_LOG_LEVEL (`quiet`), as in the other parts.

  Args:
    workdir: where `squad_data/`, `squad_baseline/` and `squad_run/` are written.
    pretrained_checkpoint: a Google-format checkpoint prefix with `bert_config.json`
      beside it (the pretraining part's `export/google/bert_model.ckpt`).
    epochs: passes over the training features.
    learning_rate: AdamW peak rate (linear warmup, then linear decay to 0).
    batch_size: training windows per applied step.
    warmup_proportion: the share of the steps warming up.
    seed: the fine-tuning seed (the span head's initial weights, data order, dropout).

  Returns:
    a `SquadDemoSummary`.
  """
  quiet.follow_tf_cpp_min_log_level()
  data_dir = os.path.join(workdir, "squad_data")
  train_file, dev_file = make_data(data_dir)
  run_dir = os.path.join(workdir, "squad_run")
  export_dir = os.path.join(run_dir, "export")
  base = squad_run.SquadRunConfig(
      output_dir=os.path.join(workdir, "squad_baseline"), do_predict=True,
      train_file=train_file, predict_file=dev_file, init_checkpoint=pretrained_checkpoint,
      vocab_file=pretrained.minilm_vocab_file(),
      features=squad_features.FeatureConfig(max_seq_length=MAX_SEQ_LENGTH,
                                            doc_stride=DOC_STRIDE,
                                            max_query_length=MAX_QUERY_LENGTH),
      postprocess=squad_postprocess.PostprocessConfig(n_best_size=10, max_answer_length=8),
      train_batch_size=batch_size, learning_rate=learning_rate, num_train_epochs=epochs,
      warmup_proportion=warmup_proportion, distribution_strategy="mirrored", num_cpu_devices=2,
      seed=seed, verbose=0)
  baseline = squad_run.run_squad(base)
  trained = squad_run.run_squad(dataclasses.replace(
      base, output_dir=run_dir, do_train=True, export_dir=export_dir,
      eval_every_steps=EVAL_EVERY_STEPS, save_checkpoints_steps=EVAL_EVERY_STEPS))
  with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
    evals = [row for row in map(json.loads, f) if row.get("split") == "eval"]
  with open(dev_file, encoding="utf-8") as f:
    paragraph = json.load(f)["data"][0]["paragraphs"][0]
  qa = paragraph["qas"][0]
  served = tf.saved_model.load(export_dir).signatures[squad_export.SQUAD_TEXT_SIGNATURE](
      question=tf.constant([qa["question"]]), context=tf.constant([paragraph["context"]]))
  return SquadDemoSummary(
      data_dir=data_dir, train_questions=_count_questions(train_file),
      dev_questions=_count_questions(dev_file),
      baseline=baseline["scores"], scores=trained["scores"], train=trained["train"],
      evals=evals, run_dir=run_dir, export_dir=export_dir, question=qa["question"],
      context=paragraph["context"], answer=served["answer"].numpy()[0].decode("utf-8"),
      gold=qa["answers"][0]["text"])


def _count_questions(path: str) -> int:
  with open(path, encoding="utf-8") as f:
    return sum(len(p["qas"]) for a in json.load(f)["data"] for p in a["paragraphs"])
