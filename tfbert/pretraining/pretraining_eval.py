"""Held-out MLM and NSP evaluation during pretraining (google-research/bert's `--do_eval`).

The evaluation reads its held-out data in file order (no shuffle, no repeat) in batches of
`eval_batch_size` sequences, dropout off, and sums over every batch and replica what
`tfbert.losses.pretraining_loss.pretraining_losses` counts. The data is `eval_input_files`
(TFRecords, `record_dataset`) or, for a raw-text run, `eval_text_files` packed and masked
as the training text is (`tfbert.pretraining.raw_text_run.eval_dataset`): their masks are
drawn from the example's place in the files, so every evaluation masks the same tokens.
The metrics are those of training, under the same names, so TensorBoard draws the eval run
over the train run:

  mlm_loss      masked-LM cross-entropy averaged over masked tokens (`masked_lm_weights`)
  mlm_accuracy  fraction of masked tokens predicted right, weighted the same way
  mlm_perplexity  exp(mlm_loss): the masked-LM perplexity (held-out only)
  nsp_loss      next-sentence cross-entropy averaged over sequences
  nsp_accuracy  fraction of sequences whose next-sentence label is predicted right
  loss          mlm_loss + nsp_loss

With the objective "mlm" (a model without NSP head) the `nsp_*` metrics are absent and
`loss` is `mlm_loss`.

(google-research/bert's `masked_lm_loss`, `masked_lm_accuracy`, `next_sentence_loss`,
`next_sentence_accuracy`.) Each worker reads its own shard of the files
(`input_pipeline.shard_files`), and every worker runs the same number of batches: at most
`max_eval_steps`, and no more than the fewest full batches any worker's shard holds (a
worker that ran out first would leave the others waiting in the all-reduce). The count is
known before the first batch, from the record counts of the pre-run file check. So the
same evaluation sees the same examples at every step it runs, each once. (For raw text,
"records" are the packed sequences each file yields, counted before the run.)
"""

import math
from typing import Mapping, Sequence

import tensorflow as tf

from tfbert.losses import pretraining_loss
from tfbert.pretraining import input_pipeline
from tfbert.training import distribution

SUMS = pretraining_loss.sum_names("mlm_nsp")  # The objective "mlm" sums the first three.


def eval_steps(records: Mapping[str, int], num_workers: int, batch_size: int,
               max_eval_steps: int) -> int:
  """Batches every worker can evaluate: min(max_eval_steps, fewest full batches of a shard).

  Args:
    records: records per eval file (all files).
    num_workers: workers sharing the evaluation.
    batch_size: global sequences per batch (`eval_batch_size`).
    max_eval_steps: the most batches.

  Raises:
    ValueError: a worker's shard holds less than one batch (the files are named).
  """
  per_worker = batch_size // num_workers
  full = []
  for worker in range(num_workers):
    shard = sorted(records)[worker::num_workers]  # As `input_pipeline.shard_files` deals.
    full.append(sum(records[f] for f in shard) // per_worker)
  if min(full) < 1:
    raise ValueError(f"the eval files {sorted(records)} hold fewer than one eval batch of "
                     f"{per_worker} sequences for a worker (full batches per worker: {full}); "
                     "lower eval_batch_size or add eval data")
  return min(max_eval_steps, min(full))


def metrics_from_sums(sums: Mapping[str, float]) -> dict[str, float]:
  """The eval metrics (module docstring) from the summed counts of `SUMS` (without the
  `nsp_*` ones for the objective "mlm": then no `nsp_*` metrics)."""
  mlm_loss = sums["mlm_loss_sum"] / max(sums["mlm_weight"], 1e-12)
  metrics = {"mlm_loss": mlm_loss, "mlm_perplexity": math.exp(min(mlm_loss, 700.0)),
             "mlm_accuracy": sums["mlm_correct"] / max(sums["mlm_weight"], 1e-12)}
  if "nsp_count" not in sums:
    return {**metrics, "loss": mlm_loss}
  nsp_loss = sums["nsp_loss_sum"] / max(sums["nsp_count"], 1e-12)
  return {**metrics, "nsp_loss": nsp_loss,
          "nsp_accuracy": sums["nsp_correct"] / max(sums["nsp_count"], 1e-12),
          "loss": mlm_loss + nsp_loss}


def metric_names(objective: str) -> list[str]:
  """The names of the scalars an evaluation of `objective` returns (`metrics_from_sums`'
  keys), sorted: known from the config alone, so `best_metric` is checked before any work.

  Raises:
    ValueError: `objective` is not one of `pretraining_loss.OBJECTIVES`.
  """
  return sorted(metrics_from_sums({name: 1.0 for name in pretraining_loss.sum_names(objective)}))


def record_dataset(files: Sequence[str], strategy: tf.distribute.Strategy, *, batch_size: int,
                   seq_length: int, max_predictions: int, objective: str,
                   num_workers: int = 1, worker_index: int = 0) -> tf.data.Dataset:
  """This worker's eval batches of TFRecord `files`: file order, each record once.

  Args:
    files: the eval files (all workers').
    strategy: the run's strategy.
    batch_size: global sequences per batch; a multiple of the replica count.
    seq_length, max_predictions: S and P of the records.
    objective: the model's (`pretraining_loss.OBJECTIVES`): "mlm" reads no NSP labels.
    num_workers, worker_index: this worker's place (`distribution.worker_info`).

  Returns:
    Per-replica batches (`input_pipeline.pretraining_dataset` features), a window of the
    worker's local replicas at a time (`distribution.LocalBatches` deals them).
  """
  local_replicas = strategy.num_replicas_in_sync // num_workers
  return input_pipeline.pretraining_dataset(
      list(files), batch_size // strategy.num_replicas_in_sync, seq_length=seq_length,
      max_predictions=max_predictions, num_workers=num_workers, worker_index=worker_index,
      shuffle=False, repeat=False, gradient_accumulation_steps=local_replicas,
      deterministic=True, next_sentence_labels=pretraining_loss.uses_nsp(objective))


class Evaluator:
  """Evaluates `model` on this worker's eval batches; call it for the metrics.

  Args:
    model: the `BertPretrainer` being trained (built under `strategy`).
    strategy: the run's strategy.
    dataset: this worker's per-replica eval batches in a fixed order, read from the start at
      every call (`record_dataset`, `raw_text_run.eval_dataset`).
    batch_size: global sequences per batch.
    steps: batches per evaluation (`eval_steps`).
  """

  def __init__(self, model, strategy: tf.distribute.Strategy, dataset: tf.data.Dataset, *,
               batch_size: int, steps: int):
    self.model, self.strategy, self.steps, self.dataset = model, strategy, steps, dataset
    self.sums = pretraining_loss.sum_names(model.objective)
    self.examples = steps * batch_size
    self._sums = tf.function(self._sums_fn)

  def _replica_sums(self, features):
    outputs = self.model(features, training=False, masked_positions_only=True)
    terms = pretraining_loss.pretraining_losses(outputs, features, 1.0, 1.0)
    return {name: terms[name] for name in self.sums}

  def _sums_fn(self, count):
    batches = distribution.LocalBatches(self.strategy, self.dataset)  # From the start.
    totals = {name: tf.constant(0.0) for name in self.sums}
    for _ in tf.range(count):
      sums = self.strategy.run(self._replica_sums, args=(next(batches),))
      totals = {name: totals[name] + self.strategy.reduce("SUM", sums[name], axis=None)
                for name in self.sums}
    return totals

  def __call__(self) -> dict[str, float]:
    """The eval metrics of the model as it is now."""
    sums = {name: float(value) for name, value in self._sums(tf.constant(self.steps)).items()}
    return metrics_from_sums(sums)
