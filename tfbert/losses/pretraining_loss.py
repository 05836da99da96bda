"""google-research/bert's pretraining loss, normalized exactly over the applied step.

Loss = MLM loss + NSP loss (`run_pretraining.py`), where the MLM loss is the
`masked_lm_weights`-weighted mean cross-entropy over masked tokens and the NSP loss is the
mean over sequences. With the objective "mlm" (`OBJECTIVES`: a model without a
next-sentence head, RoBERTa's choice) the loss is the MLM term alone, normalized the same way.

**Exact normalization.** Every anchor divides by the masked-token count of each micro-batch
on each replica, so with data parallelism or accumulation the step is a mean of means and
only approximates one big batch (huggingface/transformers#24725). tfbert divides each
replica's *sums* by the counts of the whole applied step, so that adding every replica's
and micro-step's gradients (the accumulation wrapper with `reduction="sum"`) gives exactly
the big-batch gradient:

    loss_replica = sum(w * CE over its masked tokens) / N_window
                 + sum(CE_nsp over its sequences) / E_window

N_window and E_window are the masked-token weight and the sequence count of all micro-batches
of the window on all replicas. They cannot be known from one micro-batch, so the input
pipeline attaches them (`tfbert.pretraining.input_pipeline`: features `window_mlm_weight`,
`window_examples`, counted per worker over its `gradient_accumulation_steps` micro-batches).
With one
worker they are the global values already (each replica receives a slice of the worker's
batch, carrying the same window values); with several workers one scalar all-reduce per
micro-step sums the workers' values. Without these features (e.g. `train_on_batch` on a
hand-made batch) the micro-batch's own global counts are used: exact for one micro-step per
applied step, a mean of micro-step means otherwise.

Shape legend: B batch (per replica), P masked positions, V vocabulary.
"""

from typing import Mapping

import tensorflow as tf

# What a pretrainer learns (`BertPretrainer(objective=...)`, --objective): google-research/bert's
# masked LM + next-sentence prediction, or the masked LM alone (no NSP head, no
# `next_sentence_labels` needed). The first is the default: Google's data and checkpoints.
OBJECTIVES = ("mlm_nsp", "mlm")
MLM_SUMS = ("mlm_loss_sum", "mlm_weight", "mlm_correct")
NSP_SUMS = ("nsp_loss_sum", "nsp_count", "nsp_correct")


def check_objective(objective: str, what: str = "objective") -> str:
  """`objective` if it is one of `OBJECTIVES`.

  Raises:
    ValueError: naming `what` (the field or flag) and the choices.
  """
  if objective not in OBJECTIVES:
    raise ValueError(f"{what} must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
  return objective


def uses_nsp(objective: str) -> bool:
  """Whether `objective` trains the next-sentence head (and reads `next_sentence_labels`)."""
  return check_objective(objective) == "mlm_nsp"


def sum_names(objective: str) -> tuple[str, ...]:
  """The summed statistics `pretraining_losses` returns for `objective` (besides `loss`)."""
  return MLM_SUMS + (NSP_SUMS if uses_nsp(objective) else ())


def metric_names(objective: str) -> tuple[str, ...]:
  """The metrics of `objective`, all weighted means (`loss` is their losses' sum)."""
  return ("mlm_loss", "mlm_accuracy") + (("nsp_loss", "nsp_accuracy") if uses_nsp(objective)
                                         else ())


def _replicas_per_worker() -> int:
  strategy = tf.distribute.get_strategy()
  try:
    return len(strategy.extended.worker_devices)
  except RuntimeError:  # The default strategy has no worker devices: one replica.
    return 1


def _num_workers() -> int:
  replicas = tf.distribute.get_strategy().num_replicas_in_sync
  return max(1, replicas // _replicas_per_worker())


def _global_sum(value: tf.Tensor) -> tf.Tensor:
  context = tf.distribute.get_replica_context()
  if context is None or context.num_replicas_in_sync == 1:
    return value
  return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def window_normalizers(features: Mapping[str, tf.Tensor], micro_steps: int
                       ) -> tuple[tf.Tensor, tf.Tensor]:
  """The masked-token weight N and sequence count E of the whole applied step.

  Args:
    features: This replica's features; see module docstring.
    micro_steps: Micro-steps per applied step (used only without window features).

  Returns:
    (N, E) float32 scalars, identical on every replica.
  """
  if "window_mlm_weight" in features:
    mlm_weight = tf.cast(features["window_mlm_weight"][0], tf.float32)
    examples = tf.cast(features["window_examples"][0], tf.float32)
    if _num_workers() > 1:  # Each worker's pipeline counted its own share of the window.
      per_worker = float(_replicas_per_worker())
      mlm_weight = _global_sum(mlm_weight) / per_worker
      examples = _global_sum(examples) / per_worker
    return mlm_weight, examples
  weights = tf.cast(features["masked_lm_weights"], tf.float32)
  local = tf.stack([tf.reduce_sum(weights), tf.cast(tf.shape(weights)[0], tf.float32)])
  total = _global_sum(local) * float(micro_steps)
  return total[0], total[1]


@tf.function(jit_compile=True, autograph=False)
def _softmax_minus_onehot(probs: tf.Tensor, d_loss: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
  """`d_loss * (probs - onehot(labels))`, [N, V] float32, as one XLA loop.

  One pass over `probs`: a multiply then `tf.tensor_scatter_nd_sub` copies the [N, V]
  product once more (17 against 9 ms for [640, 30522] on this 2-core CPU).
  """
  d_loss = d_loss[:, tf.newaxis]  # [N, 1]
  column = tf.range(tf.shape(probs)[1])[tf.newaxis, :]  # [1, V]
  return probs * d_loss - tf.where(column == labels[:, tf.newaxis], d_loss, 0.0)


def sparse_cross_entropy(labels: tf.Tensor, logits: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """Softmax cross-entropy and argmax hits over a large vocabulary, in three passes.

  Same values as `tf.nn.sparse_softmax_cross_entropy_with_logits` and
  `argmax(logits) == labels`. The forward pass is TensorFlow's softmax (oneDNN's, one
  cache-blocked pass per row) and an argmax. The argmax gives the accuracy and the row's
  peak logit, whose probability is exactly `1 / sum(exp(logits - peak))` (`exp(0) = 1`),
  so the loss `(peak - logit[label]) - log(1 / sum)` needs no further pass over [N, V] and
  cannot overflow: `1 / sum >= 1 / V`. The softmax is kept for the gradient
  `d_loss * (softmax - onehot(labels))`, one XLA loop (`_softmax_minus_onehot`).
  Forward and gradient for [640, 30522] on this 2-core CPU: 60.8 ms against 119.8 ms for
  TensorFlow's fused kernel plus argmax (tools/benchmark.py --benchmark=kernels), and 26
  against 41 ms for the previous exp/sum/scatter ops in a scratch A/B
  (docs/benchmark_history.md).

  Args:
    labels: int32 [N] in [0, V).
    logits: float32 [N, V].

  Returns:
    (cross-entropy float32 [N], hits float32 [N] of 0/1); only the first is differentiable.
  """

  @tf.custom_gradient
  def fused(logits):
    probs = tf.nn.softmax(logits, axis=-1)  # [N, V]
    top = tf.argmax(logits, axis=-1, output_type=tf.int32)  # [N]
    peak = tf.gather(logits, top[:, tf.newaxis], batch_dims=1)  # [N, 1], the row maximum
    top_prob = tf.gather(probs, top[:, tf.newaxis], batch_dims=1)  # [N, 1], 1 / sum
    label_logit = tf.gather(logits, labels[:, tf.newaxis], batch_dims=1)  # [N, 1]
    # peak - label first: exact when they are close (Sterbenz), so a large peak does not
    # round away the log term's low bits.
    loss = tf.squeeze((peak - label_logit) - tf.math.log(top_prob), -1)
    hit = tf.cast(tf.equal(top, labels), tf.float32)

    def grad(d_loss, d_hit):
      del d_hit  # Accuracy has no gradient.
      return _softmax_minus_onehot(probs, d_loss, labels)

    return (loss, hit), grad

  return fused(logits)


def pretraining_losses(outputs: Mapping[str, tf.Tensor], features: Mapping[str, tf.Tensor],
                       mlm_normalizer: tf.Tensor, nsp_normalizer: tf.Tensor
                       ) -> dict[str, tf.Tensor]:
  """Per-replica loss terms and statistics.

  Args:
    outputs: `BertPretrainer` outputs: float32 `mlm_logits` [B, P, V] and, for the objective
      "mlm_nsp", `nsp_logits` [B, 2] (without them the loss is the MLM term alone).
    features: int `masked_lm_ids` [B, P], float `masked_lm_weights` [B, P] and, with
      `nsp_logits`, int `next_sentence_labels` [B] or [B, 1].
    mlm_normalizer, nsp_normalizer: N and E of the applied step (`window_normalizers`).

  Returns:
    dict with `loss` (this replica's share of the step loss, to differentiate),
    `mlm_loss_sum`, `mlm_weight`, `mlm_correct` and, with `nsp_logits`, `nsp_loss_sum`,
    `nsp_count`, `nsp_correct` (`sum_names`).
  """
  ids = tf.cast(features["masked_lm_ids"], tf.int32)
  weights = tf.cast(features["masked_lm_weights"], tf.float32)
  mlm_logits = tf.cast(outputs["mlm_logits"], tf.float32)
  vocab_size = tf.shape(mlm_logits)[-1]
  mlm_ce, mlm_hit = sparse_cross_entropy(tf.reshape(ids, [-1]),
                                         tf.reshape(mlm_logits, [-1, vocab_size]))
  mlm_ce = tf.reshape(mlm_ce, tf.shape(ids))  # [B, P]
  mlm_hit = tf.reshape(mlm_hit, tf.shape(ids))
  mlm_loss_sum = tf.reduce_sum(mlm_ce * weights)
  mlm = {"mlm_loss_sum": mlm_loss_sum, "mlm_weight": tf.reduce_sum(weights),
         "mlm_correct": tf.reduce_sum(mlm_hit * weights)}
  if "nsp_logits" not in outputs:  # Objective "mlm".
    return {"loss": mlm_loss_sum / mlm_normalizer, **mlm}
  labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
  nsp_logits = tf.cast(outputs["nsp_logits"], tf.float32)
  nsp_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, nsp_logits)  # [B]
  nsp_loss_sum = tf.reduce_sum(nsp_ce)
  nsp_hit = tf.cast(tf.equal(tf.argmax(nsp_logits, -1, output_type=tf.int32), labels),
                    tf.float32)
  return {
      "loss": mlm_loss_sum / mlm_normalizer + nsp_loss_sum / nsp_normalizer, **mlm,
      "nsp_loss_sum": nsp_loss_sum, "nsp_count": tf.cast(tf.size(labels), tf.float32),
      "nsp_correct": tf.reduce_sum(nsp_hit),
  }
