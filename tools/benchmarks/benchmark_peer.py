"""The throughput peer: TF Model Garden's BERT trained the way Model Garden trains it.

tf-models-official 2.20 (`official`) is built on tf_keras (Keras 2), so its models are
never mixed into a Keras 3 model (docs/pitfalls.md). They run in their own process
(`tfbert_tools.benchmarks.benchmark` starts it with this module's `run_step_case`), or beside
tfbert's independent model in one process, window by window (`run_interleaved`). For the
same `StepCase` as tfbert:

* encoder: `official.nlp.modeling.networks.BertEncoder`, tanh-gelu (`tf_utils.
  get_activation("gelu")`, google-research/bert's), dropout 0.1 and attention dropout 0.1,
  512 positions, 2 token types;
* pretraining: `models.BertPretrainerV2` with a gelu MLM transform and a 2-way
  `ClassificationHead(inner_dim=H)` named "next_sentence"; loss as
  `official/nlp/tasks/masked_lm.py` `build_losses`: sparse cross-entropy over the masked
  positions weighted by `masked_lm_weights` and divided by their sum, plus the mean NSP
  cross-entropy, both on float32 logits;
* SQuAD: `models.BertSpanLabeler`; loss as `official/nlp/tasks/question_answering.py`
  (v1.1): the mean of the start and end sparse cross-entropies (batch means);
* optimizer: `legacy_adamw.AdamWeightDecay` (weight decay 0.01 except LayerNorm and biases,
  gradient clipping by global norm 1.0);
* step: a `tf.function(jit_compile=...)` doing what `official/core/base_task.py`
  `train_step` does on one device without loss scaling: forward, loss, gradients, apply.

The precision policy is set with `tf_keras.mixed_precision.set_global_policy`. The peer
additionally computes its encoder's pooler (unused by both heads); `benchmark_mfu` counts
the same model FLOPs for both sides.

Shape legend: B batch, S sequence, P masked positions, V vocabulary.
"""

import dataclasses
import statistics
from typing import Callable

import keras
import tensorflow as tf
import tf_keras
from official.modeling import tf_utils
from official.modeling.optimization import legacy_adamw
from official.nlp.modeling import layers, models, networks

from tfbert_tools.benchmarks import benchmark

DESCRIPTION = ("TF Model Garden (tf-models-official) networks.BertEncoder + "
               "models.BertPretrainerV2 / models.BertSpanLabeler, legacy_adamw."
               "AdamWeightDecay, tf.function train step as official/core/base_task.py")
# google-research/bert's AdamW exclusions, as Model Garden's BERT configs give them.
WEIGHT_DECAY_EXCLUSIONS = ("LayerNorm", "layer_norm", "bias")


def encoder(case: benchmark.StepCase) -> networks.BertEncoder:
  """Model Garden's BERT encoder of `case`'s shape."""
  return networks.BertEncoder(
      vocab_size=case.vocab_size, hidden_size=case.hidden_size, num_layers=case.num_layers,
      num_attention_heads=case.num_heads, inner_dim=case.intermediate_size,
      inner_activation=tf_utils.get_activation("gelu"), output_dropout=0.1,
      attention_dropout=0.1, max_sequence_length=max(512, case.seq_length), type_vocab_size=2)


def model(case: benchmark.StepCase) -> tf_keras.Model:
  """`BertPretrainerV2` (MLM + NSP) or `BertSpanLabeler`, as `case.task` says."""
  if case.task == "pretraining":
    return models.BertPretrainerV2(
        encoder(case), mlm_activation=tf_utils.get_activation("gelu"),
        classification_heads=[layers.ClassificationHead(
            inner_dim=case.hidden_size, num_classes=2, name="next_sentence")])
  return models.BertSpanLabeler(encoder(case))


def optimizer(learning_rate: float = 1e-4) -> legacy_adamw.AdamWeightDecay:
  """Model Garden's (Keras 2) AdamW with BERT's weight-decay exclusions and clipping 1.0."""
  return legacy_adamw.AdamWeightDecay(
      learning_rate, weight_decay_rate=0.01,
      exclude_from_weight_decay=list(WEIGHT_DECAY_EXCLUSIONS), gradient_clip_norm=1.0)


def features(case: benchmark.StepCase, batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
  """Model Garden's input names for google-research/bert's features."""
  names = {"input_word_ids": "input_ids", "input_mask": "input_mask",
           "input_type_ids": "segment_ids"}
  if case.task == "pretraining":
    names["masked_lm_positions"] = "masked_lm_positions"
  return {theirs: batch[ours] for theirs, ours in names.items()}


def pretraining_loss(batch: dict[str, tf.Tensor], outputs: dict[str, tf.Tensor]) -> tf.Tensor:
  """`official/nlp/tasks/masked_lm.py` `build_losses` (no auxiliary losses): float32 scalar.

  Args:
    batch: `masked_lm_ids` int32 [B, P], `masked_lm_weights` float32 [B, P],
      `next_sentence_labels` int32 [B].
    outputs: `mlm_logits` [B, P, V] and `next_sentence` [B, 2] of `BertPretrainerV2`.
  """
  mlm = tf_keras.losses.sparse_categorical_crossentropy(
      batch["masked_lm_ids"], tf.cast(outputs["mlm_logits"], tf.float32), from_logits=True)
  weights = batch["masked_lm_weights"]
  mlm_loss = tf.math.divide_no_nan(tf.reduce_sum(mlm * weights), tf.reduce_sum(weights))
  nsp_loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
      batch["next_sentence_labels"], tf.cast(outputs["next_sentence"], tf.float32),
      from_logits=True))
  return mlm_loss + nsp_loss


def squad_loss(batch: dict[str, tf.Tensor], outputs) -> tf.Tensor:
  """`official/nlp/tasks/question_answering.py` (v1.1) `build_losses`: float32 scalar.

  Args:
    batch: `start_positions`, `end_positions` int32 [B].
    outputs: [start_logits, end_logits], each [B, S], of `BertSpanLabeler`.
  """
  start_logits, end_logits = outputs
  start = tf_keras.losses.sparse_categorical_crossentropy(
      batch["start_positions"], tf.cast(start_logits, tf.float32), from_logits=True)
  end = tf_keras.losses.sparse_categorical_crossentropy(
      batch["end_positions"], tf.cast(end_logits, tf.float32), from_logits=True)
  return (tf.reduce_mean(start) + tf.reduce_mean(end)) / 2


def peer_step(case: benchmark.StepCase, batch: dict[str, tf.Tensor]) -> Callable[[], float]:
  """Model Garden's training step for `case` on `batch`, synchronized by reading the loss."""
  network, adamw = model(case), optimizer()
  loss_fn = pretraining_loss if case.task == "pretraining" else squad_loss
  inputs = features(case, batch)

  @tf.function(jit_compile=case.jit_compile)
  def train_step(inputs, batch):
    with tf.GradientTape() as tape:
      loss = loss_fn(batch, network(inputs, training=True))
    variables = network.trainable_variables
    grads = tape.gradient(loss, variables)
    adamw.apply_gradients(list(zip(grads, variables)))
    return loss

  return lambda: float(train_step(inputs, batch))


def run_step_case(case: benchmark.StepCase) -> dict:
  """Runs a Model Garden `case` in this process; see `benchmark.measure_step_case`."""
  if case.implementation != "model_garden":
    raise ValueError(f"benchmark_peer runs model_garden cases, not {case.implementation!r}")
  tf_keras.utils.set_random_seed(case.seed)
  tf_keras.mixed_precision.set_global_policy(case.dtype_policy)
  return benchmark.measure_step_case(case, peer_step)


def run_interleaved(case: benchmark.StepCase) -> dict:
  """tfbert's step and the peer's in this one process, timed window by window.

  Both steps are built on the same synthetic batch (`benchmark.synthetic_step_batch`) and
  warmed up (`case.warmup_steps` each). Then each of `case.windows` rounds times one window
  of each, the order swapped every round. A slowdown of the machine that lasts a window or
  more then slows both sides of a round, which alternating processes (a minute or more per
  run) cannot promise on a VM whose speed drifts. The two models are independent: the peer
  is never mixed into a Keras 3 model.

  Returns:
    dict with `case`; `runs`, per round and implementation, in the round's order: `case`
    (with its implementation) and `examples_per_second`; `ratios` (tfbert / peer per round)
    and `median_ratio`; `first_losses` of each implementation; `peak_rss_mib` of the
    process (both models).
  """
  keras.mixed_precision.set_global_policy(case.dtype_policy)
  tf_keras.mixed_precision.set_global_policy(case.dtype_policy)
  keras.utils.set_random_seed(case.seed)
  tf_keras.utils.set_random_seed(case.seed)
  batch = benchmark.step_batch_tensors(case)
  cases = {name: dataclasses.replace(case, implementation=name)
           for name in benchmark.IMPLEMENTATIONS}
  steps = {"tfbert": benchmark.tfbert_step(cases["tfbert"], batch),
           "model_garden": peer_step(cases["model_garden"], batch)}
  first_losses = {name: step() for name, step in steps.items()}  # Traces each step.
  for step in steps.values():
    for _ in range(case.warmup_steps - 1):
      step()
  rounds = benchmark.alternating_rounds(
      benchmark.IMPLEMENTATIONS, lambda name: benchmark.window_rate(steps[name], case)[0],
      case.windows)
  runs = [{"case": dataclasses.asdict(cases[name]), "examples_per_second": rate}
          for pairs in rounds for name, rate in pairs]
  ratios = [dict(pairs)["tfbert"] / dict(pairs)["model_garden"] for pairs in rounds]
  return {"case": dataclasses.asdict(case), "runs": runs, "ratios": ratios,
          "median_ratio": statistics.median(ratios), "first_losses": first_losses,
          "peak_rss_mib": benchmark.peak_rss_mib()}
