"""BERT models: the encoder composed with task heads.

Each model keeps its encoder as `self.encoder` and its heads under fixed attribute names
(`mlm_head`, `nsp_head`, `span_head`, `classifier_head`); `tfbert.checkpoints.google_names` maps
those onto google-research/bert's checkpoint scopes.

Shape legend: B batch, S sequence, P masked positions, H hidden, V vocabulary, C classes.
"""

import math
from collections.abc import Iterable
from typing import NamedTuple, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging
from keras.src.trainers import compile_utils

from tfbert.encoder import OUTPUT_NAMES, BertEncoder, as_config, build_once, read_inputs
from tfbert.layers import dropout
from tfbert.layers.heads import ClassifierHead, MaskedLMHead, NextSentenceHead, SpanHead
from tfbert.losses import pretraining_loss
from tfbert.runtime import validation
from tfbert.text import feature_checks
from tfbert.text.text_calls import (
  RawTextFit,
  RawTextPredict,
  build_optimizer,
  implementation,
  unweighted_batch,
)
from tfbert.training.accumulation import check_global_clipping, find_accumulator
from tfbert.training.metric_direction import minimized

SPAN_OUTPUT_NAMES = ("start_logits", "end_logits")  # What a span labeler serves.

# Metrics of BertPretrainer (objective "mlm_nsp"), all weighted means over the logged steps.
PRETRAINING_METRICS = pretraining_loss.metric_names("mlm_nsp")
# What BertPretrainer reads besides the encoder's features: its labels (google-research/bert's
# names) and the pipeline's window totals (`tfbert.losses.pretraining_loss`).
PRETRAINING_LABELS = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
                      "next_sentence_labels")
WINDOW_FEATURES = ("window_mlm_weight", "window_examples")


@keras.saving.register_keras_serializable(package="tfbert")
class BertPretrainer(RawTextPredict, keras.Model):
  """BERT with the MLM and NSP heads of google-research/bert `run_pretraining.py`.

  Args:
    config: A `BertConfig` (or its dict).
    objective: "mlm_nsp" (both heads) or "mlm": no NSP head (`nsp_head` is None), no
      `nsp_logits`, no `nsp_*` metrics, no `next_sentence_labels` read, and the pooler,
      which only the NSP head reads, is not trained (`pretraining_loss.OBJECTIVES`).
    **kwargs: Forwarded to `keras.Model`.

  Call args:
    features: dict with int32 `input_ids`, `input_mask`, `segment_ids` [B, S] and
      `masked_lm_positions` [B, P] (google-research/bert's feature names). Without
      `masked_lm_positions` every position is predicted (P = S).
    training: Whether dropout is active.
    masked_positions_only: Compute the last layer only where the heads read it (position 0
      and `masked_lm_positions`; see `BertEncoder`'s `output_positions`). Same logits;
      `sequence_output` is then [B, P, H] at the masked positions. `train_step` uses it.

  Returns:
    dict with `sequence_output` [B, S, H], `pooled_output` [B, H], float32 `mlm_logits`
    [B, P, V] and (objective "mlm_nsp") float32 `nsp_logits` [B, 2].
  """

  input_names = feature_checks.FEATURE_NAMES + PRETRAINING_LABELS + WINDOW_FEATURES

  @validation.typed_arguments()
  def __init__(self, config, objective: str = "mlm_nsp", **kwargs):
    super().__init__(**kwargs)
    self.config = as_config(config)
    self.objective = pretraining_loss.check_objective(objective)
    c, policy = self.config, self.dtype_policy
    self.encoder = BertEncoder(c, name="encoder", dtype=policy)
    self.mlm_head = MaskedLMHead(c.vocab_size, c.hidden_size, c.hidden_act,
                                 c.initializer_range, name="mlm_head", dtype=policy)
    self.nsp_head = (NextSentenceHead(c.initializer_range, name="nsp_head", dtype=policy)
                     if pretraining_loss.uses_nsp(objective) else None)
    self.trackers = {name: keras.metrics.Mean(name=name)
                     for name in pretraining_loss.metric_names(objective)}

  def build(self, input_shape=None):
    build_once(self.encoder)
    build_once(self.mlm_head)
    if self.nsp_head is not None:
      build_once(self.nsp_head, (None, self.config.hidden_size))
    self.built = True

  def call(self, features, training=None, masked_positions_only=False):
    positions = features.get("masked_lm_positions")
    sparse = masked_positions_only and positions is not None
    outputs = self.encoder(features, training=training,
                           output_positions=positions if sparse else None)
    seq = outputs["sequence_output"]  # [B, S, H], or [B, P, H] if sparse
    if positions is None:
      input_ids = read_inputs(features)[0]
      positions = tf.broadcast_to(tf.range(tf.shape(input_ids)[1]), tf.shape(input_ids))
    table = self.encoder.embeddings.word_embeddings.embeddings
    result = {
        "sequence_output": seq,
        "pooled_output": outputs["pooled_output"],
        "mlm_logits": self.mlm_head(seq, None if sparse else positions, table),
    }
    if self.nsp_head is not None:
      result["nsp_logits"] = self.nsp_head(outputs["pooled_output"])
    return result

  def trained_variables(self) -> list:
    """The variables the objective trains: all trainable ones, but for "mlm" not the
    pooler (only the NSP head reads it; left out, it is neither updated nor decayed)."""
    if self.nsp_head is not None:
      return self.trainable_variables
    pooler = {id(v) for v in self.encoder.pooler.trainable_variables}
    return [v for v in self.trainable_variables if id(v) not in pooler]

  def train_step(self, data):
    """One micro-step: forward, exactly normalized loss, gradients, apply, metrics.

    `data` is a feature dict with google-research/bert's names (labels included:
    `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`), optionally with the
    pipeline's window features; see `tfbert.losses.pretraining_loss`.
    """
    features = self._labelled_features(data)
    steps, reduction = accumulation(self.optimizer)
    mlm_normalizer, nsp_normalizer = pretraining_loss.window_normalizers(features, steps)
    with tf.GradientTape() as tape, dropout.step_keys(step_number(self)):
      # The last layer only at position 0 and the masked positions: nothing else is read.
      outputs = self(features, training=True, masked_positions_only=True)
      terms = pretraining_loss.pretraining_losses(outputs, features, mlm_normalizer,
                                                  nsp_normalizer)
      # The loss is normalized over the whole window; a "mean" accumulator divides by k.
      loss = terms["loss"] * (float(steps) if reduction == "mean" else 1.0)
      scaled_loss = self.optimizer.scale_loss(loss)
    variables = self.trained_variables()
    grads = dense_gradients(tape.gradient(scaled_loss, variables))
    self.optimizer.apply(grads, variables)
    self._update_trackers(terms)
    return self.get_metrics_result()

  def test_step(self, data):
    """Keras `evaluate` (and `fit`'s `validation_data`): the training step's metrics and
    `loss` on `data` without dropout or update, exact weighted means over every batch and
    replica (Keras reads the trackers across replicas at the end)."""
    features = self._labelled_features(data)
    mlm_normalizer, nsp_normalizer = pretraining_loss.window_normalizers(features, 1)
    outputs = self(features, training=False, masked_positions_only=True)
    self._update_trackers(pretraining_loss.pretraining_losses(outputs, features,
                                                              mlm_normalizer, nsp_normalizer))
    return self.get_metrics_result()

  def export(self, filepath, format="tf_saved_model", **kwargs):  # noqa: A002  Keras' name.
    """Keras' `Model.export`: refused, naming tfbert's exporters (`export_model`)."""
    return export_model(self, filepath, format, **kwargs)

  def checked_inputs(self, x, what: str = "x", training: bool = False):
    """`text_calls.CheckedInputs.checked_inputs`, and `next_sentence_labels` refused for the
    objective "mlm", which has no NSP head to read them (sweep 33, B189: ignored)."""
    if self.nsp_head is None and isinstance(x, dict) and "next_sentence_labels" in x:
      raise ValueError(f"{what}['next_sentence_labels']: this BertPretrainer's objective is "
                       f"{self.objective!r}, without the NSP head that reads them; drop them, "
                       "or build it with objective='mlm_nsp'")
    return super().checked_inputs(x, what, training)

  def _labelled_features(self, data) -> dict:
    """The features of a training or evaluation batch, checked at trace time to hold the
    labels pretraining reads (it takes them among the features, as google-research/bert's
    records hold them) and nothing it does not read.

    Raises:
      ValueError: labels given apart (y), a label missing or of another shape.
    """
    features, labels = unweighted_batch(self, data)
    feature_checks.check_specs(features, self.config, self.input_names, "x")
    nsp = self.nsp_head is not None
    needed = PRETRAINING_LABELS if nsp else PRETRAINING_LABELS[:3]
    form = (f"{type(self).__name__} trains and evaluates on features holding its labels: "
            "masked_lm_positions and masked_lm_ids int [B, P], masked_lm_weights float [B, P]"
            + (", next_sentence_labels int [B] (0: B follows A, 1: random)" if nsp else ""))
    if labels is not None:
      raise ValueError(f"{form}; got labels (y) apart from x: put them in x")
    missing = [name for name in needed if name not in features]
    if missing:
      raise ValueError(f"{form}; x has no {', '.join(missing)}")
    shape = tf.TensorShape(getattr(features.get("next_sentence_labels"), "shape", None))
    if shape.rank is not None and shape.rank > 1 and shape[1:].num_elements() != 1:
      raise ValueError(f"{form}; x['next_sentence_labels'] has shape {shape.as_list()}, not "
                       "one label per sequence (one-hot labels: pass their argmax(-1))")
    return feature_checks.graph_checked_labels(self.encoder, features, needed)

  def _update_trackers(self, terms):
    weight = terms["mlm_weight"]  # 0 adds nothing (and leaves the count 0: NaN, no data).
    mlm_weight = tf.maximum(weight, 1e-12)
    self.trackers["mlm_loss"].update_state(terms["mlm_loss_sum"] / mlm_weight, weight)
    self.trackers["mlm_accuracy"].update_state(terms["mlm_correct"] / mlm_weight, weight)
    if "nsp_count" not in terms:
      return
    count = terms["nsp_count"]
    self.trackers["nsp_loss"].update_state(terms["nsp_loss_sum"] / count, count)
    self.trackers["nsp_accuracy"].update_state(terms["nsp_correct"] / count, count)

  @property
  def metrics(self):
    return list(self.trackers.values()) + [metric_directions(tuple(self.trackers))]

  def get_metrics_result(self):
    """Weighted means since the last reset, plus `loss` = MLM loss (+ NSP loss)."""
    result = {name: tracker.result() for name, tracker in self.trackers.items()}
    for name in ("mlm_loss", "mlm_accuracy"):
      # No prediction weighed (every masked_lm_weights 0): NaN, as a mean of nothing is,
      # not Keras' 0.0, which read as a perfect loss (sweep 31, B55).
      result[name] = tf.where(self.trackers[name].count > 0, result[name],
                              tf.constant(math.nan, result[name].dtype))
    result["loss"] = result["mlm_loss"] + result.get("nsp_loss", 0.0)
    return result

  def hf_task(self, labels: Optional[Sequence[str]] = None) -> dict:
    """The task fields of this model's Hugging Face `config.json` (`hf_task_fields`):
    `BertForPreTraining`, or `BertForMaskedLM` for the objective "mlm"."""
    architecture = "BertForPreTraining" if self.nsp_head is not None else "BertForMaskedLM"
    return hf_task_fields(architecture, _no_labels(self, labels))

  def fill_mask(self, texts, top_k: int = 5, batch_size: int = 32, verbose="auto"):
    """The MLM head's top-k tokens for each `[MASK]` of raw text
    (`tfbert.inference.raw_text.fill_mask`; needs text settings: `tfbert.load`)."""
    return implementation(self).fill_mask(self, texts, top_k, batch_size, verbose)

  def served_outputs(self, features) -> dict:
    """What its exports serve: its encoder's (`BertEncoder.served_outputs`); with int32
    `masked_lm_positions` [B, P] among the features, also float32 `mlm_logits` [B, P, V]
    there (the `fill_mask` signature's; `tfbert.pretraining.pretraining_export`)."""
    outputs = self.encoder(features, training=False)
    served = {name: tf.cast(outputs[name], tf.float32) for name in OUTPUT_NAMES}
    if "masked_lm_positions" in features:
      served["mlm_logits"] = tf.cast(self.mlm_head(
          outputs["sequence_output"], features["masked_lm_positions"],
          self.encoder.embeddings.word_embeddings.embeddings), tf.float32)
    return served

  def get_config(self):
    return {**super().get_config(), "config": self.config.to_dict(),
            "objective": self.objective}


class _MetricDirection(keras.metrics.Metric):
  """A metric's name and whether more is better, for Keras' monitors with mode "auto".

  `EarlyStopping`, `ModelCheckpoint` and `ReduceLROnPlateau` look a monitored name (less
  its "val_" prefix) up among the `CompileMetrics` / `MetricsList` entries of
  `model.metrics` and read its `_direction`; anything but "loss" unknown there is refused
  ("Pass `mode='max'`"). tfbert's models report their metrics from their own steps, so
  `monitor="val_accuracy"` was refused. This marker holds no state and is never reported:
  the models' `get_metrics_result` reads their trackers, and `test_step` returns its own.
  """

  def __init__(self, name: str, direction: str):
    super().__init__(name=name)
    self._direction = direction  # Keras' attribute: "up" or "down".

  def update_state(self, *args, **kwargs):
    del args, kwargs

  def reset_state(self):
    pass

  def result(self):
    return tf.constant(0.0)


def _spread(n: tf.Tensor, total: tf.Tensor, squares: tf.Tensor) -> tf.Tensor:
  """n^2 x the variance of n values from their sum and sum of squares (float64 scalars);
  0 where it is within float64 rounding of 0 (1e-10 of n x the sum of squares: values whose
  spread is under 1e-5 of their size, as a constant column's sums leave it)."""
  spread = n * squares - total ** 2
  return tf.where(spread > 1e-10 * n * squares, spread, tf.zeros_like(spread))


def metric_directions(names: Sequence[str]) -> keras.metrics.Metric:
  """A Keras `MetricsList` of `_MetricDirection`s: a loss or an error is minimized
  (`tfbert.training.metric_direction`), any other (accuracy, pearson) maximized."""
  return compile_utils.MetricsList(
      [_MetricDirection(name, "down" if minimized(name) else "up") for name in names],
      name="metric_directions")


def step_number(model: keras.Model) -> tf.Tensor:
  """The number of this micro-step, checkpointed with the optimizer: the dropout keys' step.

  The accumulator's micro-step counter (every micro-step, skipped windows included), else
  `iterations` (a plain optimizer applies every step); with Keras' built-in accumulation,
  whose `iterations` counts applied steps, its counter of `apply` calls. An optimizer not
  built yet is built here (with the model, so that it gets every variable), as its `apply`
  would do later in the same step.
  """
  optimizer = model.optimizer
  if not optimizer.built:
    build_optimizer(model)
  accumulator = find_accumulator(optimizer)
  if accumulator is not None:
    return tf.convert_to_tensor(accumulator.micro_step)
  if getattr(optimizer, "gradient_accumulation_steps", None):
    return tf.convert_to_tensor(optimizer._iterations)  # pylint: disable=protected-access
  return tf.convert_to_tensor(optimizer.iterations)


def dense_gradients(grads: list) -> list:
  """`grads` with every `tf.IndexedSlices` (an embedding table's rows looked up) made dense.

  Keras 3's Adam and AdamW update a sparse gradient row by row, and a row looked up twice in
  a batch (a token id, segment 0) had its second moment summed from the two parts' squares,
  not the square of their sum: the segment-0 row moved 0.0046 where the dense update moves
  0.0100 (sweep 30, B74). tfbert's optimizers densify anyway (google-research/bert's dense
  moments), so the same step now reaches every optimizer.
  """
  return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]


def accumulation(optimizer) -> tuple[int, str]:
  """(micro-steps per applied step, reduction) of an optimizer stack; (1, "sum") if plain.

  Called by every `train_step` (in its replica context): a Keras clipping argument that
  would clip each replica's gradient apart is refused there (`check_global_clipping`).
  """
  context = tf.distribute.get_replica_context()
  check_global_clipping(optimizer, context.num_replicas_in_sync if context is not None else 1)
  accumulator = find_accumulator(optimizer)
  return (1, "sum") if accumulator is None else (accumulator.steps, accumulator.reduction)


class _FineTuningStep:
  """The `train_step` and `test_step` of the fine-tuning models (mixed into `keras.Model`
  subclasses).

  One micro-step: forward with dropout keyed by the checkpointed micro-step counter and
  the global replica id (`tfbert.layers.dropout.step_keys`: a replica's masks do not depend
  on how replicas are spread over processes, nor on where a run was resumed), the sum of
  `example_losses` over the replica's batch divided by the global batch's examples (counted
  over every replica, whose shares may differ: the gradients are summed across replicas,
  and their sum is the gradient of the global batch's mean; a tagger's example without a
  labelled position is not counted, `counted`: k micro-batches then equal one batch of k*B
  when each holds as many counted examples),
  scaled (mixed_float16), applied through the optimizer stack (a "mean" accumulator
  averages its k micro-steps; a "sum" one gets the loss divided by k here). The running
  metric is `loss`, the mean over every example since the last reset. The same step runs
  under `fit` and `tfbert.training.training_loop`.

  `test_step` (Keras `evaluate`, `fit(validation_data=...)`) needs no `loss` in `compile`:
  it returns the model's own `loss` and its task metric (`metric_terms`, `metric_values`),
  from float64 sums kept apart from the training metrics and all-reduced
  over the replicas in every step, so they are the exact means over every example
  whatever the strategy. The names always differ from training's (`loss` alone), which is
  what makes Keras report the step's values rather than the training metrics.
  """

  def _create_trackers(self):
    self.trackers = {"loss": keras.metrics.Mean(name="loss")}

  def _create_eval_sums(self):
    """Evaluation's float64 sums (`test_step`), made at the end of `__init__` (in the
    strategy's scope the model is made in). Not in `metrics`: not in the training loop's
    checkpointed metrics window."""
    self.eval_sums = {name: keras.metrics.Sum(name=f"eval_{name}", dtype="float64")
                      for name in ("loss_sum", "examples") + self.metric_term_names()}

  def metric_term_names(self) -> tuple[str, ...]:
    """The names of `metric_terms`."""
    raise NotImplementedError

  def example_losses(self, outputs, labels) -> tf.Tensor:
    """float32 [B] loss of each example."""
    raise NotImplementedError

  def metric_terms(self, outputs, labels) -> dict[str, tf.Tensor]:
    """The batch's sums (scalars) that the task metric is computed from."""
    raise NotImplementedError

  def counted(self, losses, labels) -> tf.Tensor:
    """float32 [B]: 1 for each example the loss is a mean over, 0 for one without a label
    (its loss 0 would otherwise pull the mean down). Every example, by default."""
    del labels
    return tf.ones_like(losses)

  def metric_values(self, sums: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """The task metric from the sums over every batch and replica (with `examples`)."""
    raise NotImplementedError

  def label_forms(self) -> dict[str, "LabelForm"]:
    """The training labels by output name (`_labels` checks them)."""
    raise NotImplementedError

  def check_label_values(self, x, y, what: str = "y"):
    """`x`, the values of its labels `y` checked (`check_label_values`; a dataset's by a
    `map`), from the calls' entry (`tfbert.text.text_calls.CheckedInputs`)."""
    return check_label_values(self, x, y, what)

  def _checked_batch(self, data) -> tuple:
    """(features, labels) of a batch, checked at trace time (`feature_checks.check_specs`,
    `_labels`) before the step builds or runs anything: a refused batch leaves the model
    and its optimizer as they were."""
    features, labels = unweighted_batch(self, data)
    feature_checks.check_specs(features, self.config, self.input_names, "x")
    for name, form in self.label_forms().items():
      _check_label_length(self, _labels(self, labels, name), form, features, name, labels)
    return features, labels

  def train_step(self, data):
    features, labels = self._checked_batch(data)
    steps, reduction = accumulation(self.optimizer)
    with tf.GradientTape() as tape, dropout.step_keys(step_number(self)):
      losses = self.example_losses(self(features, training=True), labels)
      count = tf.reduce_sum(self.counted(losses, labels))
      # The global batch's examples: replicas may hold unequal shares (a last batch of 5 on
      # 2 replicas holds 3 and 2; of 1, 1 and 0), and the mean is over all of them.
      total = sum_over_replicas(count)
      loss = (tf.reduce_sum(losses) / tf.maximum(total, 1.0)
              / float(steps if reduction == "sum" else 1))
      scaled_loss = self.optimizer.scale_loss(loss)
    grads = dense_gradients(tape.gradient(scaled_loss, self.trainable_variables))
    self.optimizer.apply(grads, self.trainable_variables)
    # A replica without examples adds nothing (its mean of none was NaN: sweep 29, B104).
    self.trackers["loss"].update_state(tf.math.divide_no_nan(tf.reduce_sum(losses), count),
                                       sample_weight=count)
    return self.get_metrics_result()

  def test_step(self, data):
    features, labels = self._checked_batch(data)
    outputs = self(features, training=False)
    losses = self.example_losses(outputs, labels)                          # [B]
    terms = {"loss_sum": tf.reduce_sum(losses),
             "examples": tf.reduce_sum(self.counted(losses, labels)),
             **self.metric_terms(outputs, labels)}
    names = sorted(terms)
    for name in names:
      self.eval_sums[name].update_state(tf.cast(terms[name], tf.float64))
    local = tf.stack([self.eval_sums[name].result() for name in names])   # This replica's.
    sums = dict(zip(names, tf.unstack(sum_over_replicas(local))))
    loss = sums["loss_sum"] / tf.maximum(sums["examples"], 1.0)
    return {name: tf.cast(value, tf.float32)
            for name, value in {"loss": loss, **self.metric_values(sums)}.items()}

  def reset_metrics(self):
    super().reset_metrics()
    for tracker in self.eval_sums.values():
      tracker.reset_state()

  def export(self, filepath, format="tf_saved_model", **kwargs):  # noqa: A002  Keras' name.
    """Keras' `Model.export`: refused, naming tfbert's exporters (`export_model`)."""
    return export_model(self, filepath, format, **kwargs)

  @property
  def metrics(self):
    zero = tf.constant(0.0, tf.float64)
    reported = self.metric_values(  # The names `test_step` reports besides "loss".
        {name: zero for name in ("loss_sum", "examples") + self.metric_term_names()})
    return list(self.trackers.values()) + [metric_directions(sorted(reported))]

  def get_metrics_result(self):
    return {name: tracker.result() for name, tracker in self.trackers.items()}


def sum_over_replicas(local: tf.Tensor) -> tf.Tensor:
  """The sum of `local` over the replicas in sync, in every replica.

  Through `merge_call` and the strategy's `reduce`, not the replica context's `all_reduce`:
  under `MirroredStrategy` that runs collective ops whose instance keys restart with each
  new strategy object, so a second strategy in one process had its reduce matched with
  the first's ("Shape mismatch in the collective instance 100"; TF 2.20, measured).
  """
  context = tf.distribute.get_replica_context()
  if context is None or context.num_replicas_in_sync == 1:
    return local
  return context.merge_call(
      lambda strategy, value: strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None),
      args=(local,))


def export_model(model: keras.Model, filepath: str, format: str = "tf_saved_model",  # noqa: A002
                 **kwargs) -> None:
  """What Keras' `model.export(...)` does for a tfbert model: refuse, naming tfbert's exporters.

  Keras' own export cannot trace a model whose inputs are a dict of [B, S] features
  ("No input shape was provided"), and tfbert's exporters do more: validated id signatures
  under Google's and Hugging Face's names, raw-text signatures, labels, the serving dtype.
  (They live above this module, in `tfbert.serving`, so it cannot call them.)

  Raises:
    NotImplementedError: always, naming `filepath` and what to call instead.
  """
  del kwargs
  raise NotImplementedError(
      f"{type(model).__name__}.export({filepath!r}, format={format!r}): Keras' export cannot "
      "trace tfbert's dict inputs; use tfbert.serving.export.export_ids_saved_model(model, "
      "path) for the id signatures (Google's and Hugging Face's input names), the task "
      "exporters or the tools' --export_dir for raw text, tools/export_onnx.py (ONNX), "
      "tools/export_tflite.py (TFLite)")


class LabelForm(NamedTuple):
  """The training labels of one output of a head."""
  text: str  # What they are, for the messages: "int class ids [B] in [0, 3)".
  rank: int  # Their rank; one more with a last dimension of 1 is read too.
  class_ids: bool  # Integer ids (else real numbers: regression scores).
  bound: Optional[int] = None  # Class ids are in [0, bound); None: [0, S) (positions).
  ignored: tuple[int, ...] = ()  # Ids the loss skips besides those.


# The tag ids a BertTokenClassifier's loss skips: tfbert.tagging.tagging_features.IGNORE
# (-1) and Hugging Face's ignore index (-100, its `CrossEntropyLoss(ignore_index=-100)`).
IGNORED_TAG_IDS = (-1, -100)


def _labels(model: keras.Model, labels, name: str) -> tf.Tensor:
  """`labels[name]` of a dict of labels, else `labels` itself (a head of one output),
  checked at trace time against the head's `label_forms`: the one reading of the labels
  of every fine-tuning head, in `fit`, `evaluate` and the training loop alike.

  Raises:
    ValueError: no labels; a dict without the head's keys or with others; a single array
      for a head of two outputs; strings; class ids that are not integers; one-hot or
      probability labels where class ids are expected (said so), or another rank.
  """
  forms, head = model.label_forms(), type(model).__name__
  expected = "{" + ", ".join(f"{key!r}: {form.text}" for key, form in forms.items()) + "}"
  alone = " (or that array alone)" if len(forms) == 1 else ""
  if labels is None:
    raise ValueError(f"{head} trains and evaluates on labels: pass y, or a dataset of "
                     f"(features, labels), with labels {expected}{alone}; got none")
  if isinstance(labels, dict):
    if set(labels) != set(forms):
      raise ValueError(f"{head}'s labels are {expected}{alone}; got a dict with keys "
                       f"{sorted(labels)}")
    value, where = labels[name], f"{head}'s labels[{name!r}]"
  elif len(forms) > 1:
    raise ValueError(f"{head}'s labels are {expected}; got a {type(labels).__name__}")
  else:
    value, where = labels, f"{head}'s labels"
  return _checked_label(tf.convert_to_tensor(value), forms[name], where)


def _check_label_length(model, value, form: "LabelForm", features, name: str, labels) -> None:
  """Per-position labels [B, S] (a tagger's) of another S than the features', when both
  are known: refused naming both (it was TensorFlow's "Dimensions must be equal ... node
  Equal": sweep 31, B48)."""
  ids = features.get("input_ids") if isinstance(features, dict) else None
  if form.rank < 2 or ids is None:
    return
  length, got = tf.TensorShape(getattr(ids, "shape", None)), value.shape
  if (length.rank == 2 and got.rank == 2 and length[1] is not None and got[1] is not None
      and length[1] != got[1]):
    key = f"[{name!r}]" if isinstance(labels, dict) else ""
    raise ValueError(_other_length(f"{type(model).__name__}'s labels{key}", got.as_list(),
                                   length.as_list(), form))


def _other_length(where: str, got: list, ids: list, form: "LabelForm") -> str:
  """The message refusing per-position labels of shape `got` for features `ids` of another
  S (`_check_label_length` at trace time, `check_label_values` for known values)."""
  return (f"{where} have shape {got} but x['input_ids'] has {ids}: the head trains on "
          f"{form.text}, one per position")


def _check_labels_on_text(where: str, values: np.ndarray, form: "LabelForm", x) -> None:
  """Labels that no text position holds (sweep 33): per-position labels [B, S] where none
  is labelled are refused (B178, B181: the loss and accuracy of no token read 0.0); a
  labelled one on padding (B182: scored) and a position label [B] on padding (B185:
  trained toward a pad) are warned of, naming the first. Padding is read from
  `x['input_mask']` when its values are at hand.

  Raises:
    ValueError: no labelled position, naming the labels and the rule.
  """
  if form.rank >= 2 and form.ignored and values.size and np.isin(values, form.ignored).all():
    raise ValueError(f"{where} label no position (every one is "
                     f"{' or '.join(map(str, form.ignored))}): there is nothing to train on "
                     "or score; label at least the first word piece of each word")
  mask = x.get("input_mask") if isinstance(x, dict) else None
  if mask is None or not _known_values(mask):
    return
  mask = np.asarray(mask)
  if mask.ndim != 2 or mask.shape[0] != values.shape[0]:
    return  # Another shape: the features' own check names it.
  if form.rank >= 2 and values.shape == mask.shape:
    on_pad = (mask == 0) & ~np.isin(values, form.ignored)
  elif form.rank == 1 and form.bound is None and values.ndim == 1:
    inside = (values >= 0) & (values < mask.shape[1])
    on_pad = inside & (np.take_along_axis(
        mask, np.clip(values, 0, mask.shape[1] - 1)[:, None].astype(np.int64), 1)[:, 0] == 0)
  else:
    return
  if on_pad.any():  # Warned, not refused: a caller may mean it (a test of the loss alone).
    at = tuple(int(i) for i in np.argwhere(on_pad)[0])
    position = at[1] if len(at) > 1 else int(values[at])
    logging.warning("%s label %d padding position(s) (x['input_mask'] 0 there), the first "
                    "position %d of example %d: they are trained on and scored; the head "
                    "reads %s of the text's own positions", where, int(on_pad.sum()),
                    position, at[0], form.text)


def _span_order(starts, ends):
  """bool [B] (arrays or tensors): True where a span ends before it starts."""
  return ends < starts


def check_label_values(model: keras.Model, x, y, what: str = "y"):
  """Checks the values of labels `y` known before a Keras call runs (arrays, lists,
  eager tensors, or a dict of them) against `model`'s `label_forms`, at the entry of `fit`,
  `evaluate`, `train_on_batch` and `test_on_batch` (`tfbert.text.text_calls`): class ids,
  tag ids and positions out of their range, which the training step leaves to
  `sparse_softmax_cross_entropy_with_logits` (a multi-line kernel error on a CPU, NaN
  losses on a GPU). Nothing is added to the step. A `tf.data.Dataset` of (x, y) gets the
  same check as a `map` of its batches (`_dataset_label_check`: in the input pipeline, not
  in the step, so XLA does not drop it); a generator's labels are not checked.

  Args:
    model: a fine-tuning model (`label_forms`).
    x: its features (a span labeler's positions are in [0, S) of their `input_ids`), or a
      dataset of (features, labels) batches.
    y: the labels as given (None with a dataset).
    what: their name in the messages ("y", "validation_data[1]").

  Returns:
    `x`: the same, or a dataset with its labels checked.

  Raises:
    ValueError: "BertClassifier's labels hold 5 at [0]: the head trains on int class ids
      [B] in [0, 2)", or any error of `_labels` (dtype, shape).
  """
  if isinstance(x, tf.data.Dataset) and y is None:
    return _dataset_label_check(model, x)
  leaves = list(y.values()) if isinstance(y, dict) else [y]
  if y is None or not all(_known_values(leaf) for leaf in leaves):
    return x
  ids = x.get("input_ids") if isinstance(x, dict) else None
  length = getattr(ids, "shape", (None, None))
  length = length[1] if len(length) == 2 else None
  forms, head = model.label_forms(), type(model).__name__
  for name, form in forms.items():
    if not form.class_ids:
      continue
    where = (f"{head}'s labels" if what == "y" else f"{head}'s {what}") + (
        f"[{name!r}]" if isinstance(y, dict) else "")
    values = np.asarray(_labels(model, y, name))
    if form.rank >= 2 and length is not None and values.ndim >= 2 and values.shape[1] != length:
      raise ValueError(_other_length(where, list(values.shape), list(ids.shape), form))
    bound = length if form.bound is None else form.bound
    outside = _outside(values, bound, form.ignored)
    if outside.any():
      at = np.argwhere(outside)[0]
      known = f" (S = {bound} here)" if form.bound is None else ""
      raise ValueError(f"{where} hold {values[tuple(at)]} at [{', '.join(map(str, at))}]: "
                       f"the head trains on {form.text}{known}")
    _check_labels_on_text(where, values, form, x)
  if set(forms) == set(SPAN_OUTPUT_NAMES):
    starts, ends = (np.asarray(_labels(model, y, name)) for name in SPAN_OUTPUT_NAMES)
    swapped = _span_order(starts, ends)
    if swapped.any():
      at = int(np.argwhere(swapped)[0][0])
      raise ValueError(f"{head}'s {what}: example {at} ends at {ends[at]}, before it starts "
                       f"at {starts[at]}: {SPAN_ORDER} (swapped keys?)")
  return x


SPAN_ORDER = ("the end_logits position of a span is at or after its start_logits position "
              "(0 and 0 for no answer)")


def _dataset_label_check(model: keras.Model, dataset: tf.data.Dataset) -> tf.data.Dataset:
  """`dataset` of (x, y) batches with each batch's class ids, tag ids or positions asserted
  in range (`check_label_values`) by a `map`: the assert runs in the input pipeline, and
  `tfbert.text.feature_checks.graph_checks` raises its failure as a ValueError. Datasets of
  another element form (no labels, other labels: refused by the step) are returned as
  they are."""
  spec = dataset.element_spec
  if not (isinstance(spec, tuple) and len(spec) == 2):
    return dataset
  forms = {name: form for name, form in model.label_forms().items() if form.class_ids}
  labels_spec = spec[1]
  if not forms or (isinstance(labels_spec, dict) and set(labels_spec) != set(forms)) or (
      not isinstance(labels_spec, dict) and len(forms) > 1):
    return dataset
  specs = labels_spec if isinstance(labels_spec, dict) else {next(iter(forms)): labels_spec}
  if not all(isinstance(s, tf.TensorSpec) and s.dtype.is_integer for s in specs.values()):
    return dataset
  ids = spec[0].get("input_ids") if isinstance(spec[0], dict) else None
  for name, s in specs.items():
    if (isinstance(ids, tf.TensorSpec) and ids.shape.rank == 1 and s.shape.rank is not None
        and s.shape.rank < forms[name].rank):
      # One example per element: the batch check's boolean_mask failed on a scalar
      # ("mask cannot be scalar": sweep 31, B23).
      raise ValueError(f"{type(model).__name__}: the dataset's labels"
                       f"{f'[{name!r}]' if isinstance(labels_spec, dict) else ''} have shape "
                       f"{s.shape.as_list()}, one example's: the model takes batches "
                       f"({forms[name].text}); batch the dataset, e.g. dataset.batch(32)")

  def check(features, labels):
    values = labels if isinstance(labels, dict) else {next(iter(forms)): labels}
    ids = features.get("input_ids") if isinstance(features, dict) else None
    asserts = []
    for name, form in forms.items():
      value = tf.cast(values[name], tf.int64)
      bound = form.bound
      if bound is None and ids is not None:
        bound = tf.cast(tf.shape(ids)[1], tf.int64)
      outside = _outside(value, bound, form.ignored)
      shown = tf.concat([tf.boolean_mask(value, outside), [0]], 0)[0]
      key = f" {name}" if isinstance(labels, dict) else ""
      asserts.append(feature_checks.marked_assert(
          tf.logical_not(tf.reduce_any(outside)), f"labels{key} hold", shown,
          f": {type(model).__name__} trains on {form.text}"))
    if set(forms) == set(SPAN_OUTPUT_NAMES) and isinstance(labels, dict):
      starts, ends = (tf.reshape(tf.cast(values[name], tf.int64), [-1])
                      for name in SPAN_OUTPUT_NAMES)
      swapped = _span_order(starts, ends)
      shown = tf.concat([tf.boolean_mask(ends, swapped), [0]], 0)[0]
      asserts.append(feature_checks.marked_assert(
          tf.logical_not(tf.reduce_any(swapped)), "labels end_logits hold", shown,
          f" before their start_logits: {SPAN_ORDER} (swapped keys?)"))
    with tf.control_dependencies(asserts):
      return features, tf.nest.map_structure(tf.identity, labels)

  return dataset.map(check, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def _outside(values, bound, ignored: Sequence[int]):
  """bool, the shape of `values` (a numpy array, or a tensor in the dataset's check): True
  where a label is outside [0, `bound`) (`bound` None: no upper end) and not one of the
  `ignored` ids. Operators only, so that both checks share one rule."""
  outside = values < 0
  if bound is not None:
    outside = outside | (values >= bound)
  for value in ignored:
    outside = outside & (values != value)
  return outside


def _known_values(value) -> bool:
  """Whether `value` is labels whose values are at hand (not a dataset, a generator or a
  symbolic tensor)."""
  if tf.is_tensor(value):
    return hasattr(value, "numpy") and not isinstance(value, tf.SparseTensor)
  return isinstance(value, (np.ndarray, list, tuple, int, np.integer)) or (
      hasattr(value, "__array__") and not isinstance(value, (str, bytes)))


def _checked_label(value: tf.Tensor, form: LabelForm, where: str) -> tf.Tensor:
  """`value` of the shape and dtype `form` says ([B, 1] class ids read as [B])."""
  shape, dtype = value.shape, value.dtype
  if dtype == tf.string:
    raise ValueError(f"{where} are strings: the head trains on {form.text} (a classifier's "
                     "fit(texts, labels) on raw text takes its label names)")
  one_more = shape.rank == form.rank + 1 and shape[-1] != 1  # [B, C] where [B] is read.
  if one_more and form.class_ids:
    raise ValueError(f"{where} have shape {shape.as_list()}: one-hot or probabilities over "
                     f"the classes, where the head trains on {form.text}; pass the class "
                     "ids, e.g. labels.argmax(-1)")
  if one_more or shape.rank not in (None, form.rank, form.rank + 1):
    raise ValueError(f"{where} have shape {shape.as_list()}: the head trains on {form.text}")
  if form.class_ids and not dtype.is_integer:
    raise ValueError(f"{where} are {dtype.name}: the head trains on {form.text}, integers "
                     "(a fraction would be cut off); cast them, e.g. with .astype('int32')")
  if not (dtype.is_integer or dtype.is_floating):
    raise ValueError(f"{where} are {dtype.name}: the head trains on {form.text}")
  if form.class_ids and shape.rank == form.rank + 1:
    value = tf.squeeze(value, -1)  # [B, 1] class ids, as Keras' sparse losses read them.
  elif form.class_ids and shape.rank is None:  # Traced for [B] and [B, 1] alike (Keras).
    value = tf.reshape(value, tf.shape(value)[:form.rank])
  return value


@keras.saving.register_keras_serializable(package="tfbert")
class BertSpanLabeler(RawTextPredict, _FineTuningStep, keras.Model):
  """BERT with the SQuAD span head of google-research/bert `run_squad.py`.

  Training labels: {"start_logits", "end_logits"}: int [B] positions; the loss is
  google-research/bert's (start cross-entropy + end cross-entropy) / 2.

  Returns:
    dict with float32 `start_logits` and `end_logits` [B, S].
  """

  @validation.typed_arguments()
  def __init__(self, config, **kwargs):
    super().__init__(**kwargs)
    self._create_trackers()
    self.config = as_config(config)
    self.encoder = BertEncoder(self.config, name="encoder", dtype=self.dtype_policy)
    self.span_head = SpanHead(self.config.initializer_range, name="span_head",
                              dtype=self.dtype_policy)
    self._create_eval_sums()

  def build(self, input_shape=None):
    build_once(self.encoder)
    build_once(self.span_head, (None, None, self.config.hidden_size))
    self.built = True

  def call(self, features, training=None):
    seq = self.encoder(features, training=training)["sequence_output"]
    return self.span_head(seq)

  def label_forms(self) -> dict[str, LabelForm]:
    """{"start_logits", "end_logits"}: int [B] positions."""
    return {name: LabelForm("int positions [B] in [0, S)", 1, True, None)
            for name in SPAN_OUTPUT_NAMES}

  def example_losses(self, outputs, labels):
    """float32 [B]: the mean of the start and end positions' cross-entropies."""
    return 0.5 * sum(tf.nn.sparse_softmax_cross_entropy_with_logits(
        tf.cast(_labels(self, labels, name), tf.int32), tf.cast(outputs[name], tf.float32))
        for name in ("start_logits", "end_logits"))

  def metric_term_names(self):
    return ("exact",)

  def metric_terms(self, outputs, labels):
    """`exact`: windows whose start and end are both predicted right (argmax)."""
    right = [tf.equal(tf.argmax(outputs[name], axis=-1, output_type=tf.int32),
                      tf.cast(_labels(self, labels, name), tf.int32))
             for name in ("start_logits", "end_logits")]
    return {"exact": tf.reduce_sum(tf.cast(right[0] & right[1], tf.float32))}

  def metric_values(self, sums):
    """`accuracy`: the fraction of windows whose span is predicted exactly."""
    return {"accuracy": sums["exact"] / tf.maximum(sums["examples"], 1.0)}

  def hf_task(self, labels: Optional[Sequence[str]] = None) -> dict:
    """The task fields of this model's Hugging Face `config.json` (`hf_task_fields`)."""
    return hf_task_fields("BertForQuestionAnswering", _no_labels(self, labels))

  def answer(self, questions, contexts=None, batch_size: int = 32, verbose="auto"):
    """Answers with score and character offsets for raw (question, context) text, windowed
    as `tools/run_squad.py` (`tfbert.inference.raw_text.answer`; needs text settings)."""
    return implementation(self).answer(self, questions, contexts, batch_size, verbose)

  def served_outputs(self, features) -> dict:
    """What its exports serve: float32 `start_logits`, `end_logits` [B, S]."""
    outputs = self(features, training=False)
    return {name: tf.cast(outputs[name], tf.float32) for name in SPAN_OUTPUT_NAMES}

  def get_config(self):
    return {**super().get_config(), "config": self.config.to_dict()}


@keras.saving.register_keras_serializable(package="tfbert")
class BertClassifier(RawTextFit, _FineTuningStep, keras.Model):
  """BERT with the classifier head of google-research/bert `run_classifier.py`.

  Args:
    config: A `BertConfig` (or its dict).
    num_classes: C, an int >= 1 (1 for regression such as STS-B; `checked_num_classes`).
    dropout_rate: Dropout on the pooled output in training.
    labels: the class names in class-id order (C distinct ones, so C >= 2; kept in the saved
      model and written by every export), or None (none for regression).

  Training labels: {"logits": int [B] class ids} (the loss is the softmax cross-entropy),
  or float [B, 1] scores for C = 1 (the squared error, as Hugging Face does for STS-B); the
  array alone, and [B, 1] class ids, are read too (`label_forms`, checked by `_labels`).

  Returns:
    float32 `logits` [B, C] in a dict.
  """

  @validation.typed_arguments("num_classes", "labels")
  def __init__(self, config, num_classes: int, dropout_rate: float = 0.1,
               labels: Optional[Sequence[str]] = None, **kwargs):
    super().__init__(**kwargs)
    self._create_trackers()
    self.config = as_config(config)
    self.num_classes = num_classes = checked_num_classes(num_classes)
    self.dropout_rate = dropout_rate = validation.checked_rate("dropout_rate", dropout_rate)
    if labels is not None and num_classes == 1:
      raise ValueError(f"labels={_listed(labels)} with num_classes=1: a classifier needs at "
                       "least 2 label names (num_classes >= 2); a regression (num_classes=1, "
                       "one score) takes no labels: leave labels= out")
    self.labels = None if labels is None else tuple(_checked_labels(labels, num_classes))
    self.encoder = BertEncoder(self.config, name="encoder", dtype=self.dtype_policy)
    self.classifier_head = ClassifierHead(num_classes, dropout_rate,
                                          self.config.initializer_range,
                                          name="classifier_head", dtype=self.dtype_policy)
    self._create_eval_sums()

  def build(self, input_shape=None):
    build_once(self.encoder)
    build_once(self.classifier_head, (None, self.config.hidden_size))
    self.built = True

  def call(self, features, training=None):
    pooled = self.encoder(features, training=training)["pooled_output"]
    return {"logits": self.classifier_head(pooled, training=training)}

  def label_forms(self) -> dict[str, LabelForm]:
    """{"logits": int class ids [B]}, or float scores [B] for regression (C = 1)."""
    if self.num_classes == 1:
      return {"logits": LabelForm("float scores [B]", 1, False)}
    return {"logits": LabelForm(f"int class ids [B] in [0, {self.num_classes})", 1, True,
                                self.num_classes)}

  def example_losses(self, outputs, labels):
    """float32 [B]: cross-entropy of the class ids, or squared error of the scores (C = 1)."""
    logits, labels = tf.cast(outputs["logits"], tf.float32), _labels(self, labels, "logits")
    if self.num_classes == 1:
      scores = tf.reshape(tf.cast(labels, tf.float32), [-1, 1])
      return tf.reduce_mean(tf.square(logits - scores), axis=-1)
    return tf.nn.sparse_softmax_cross_entropy_with_logits(tf.cast(labels, tf.int32), logits)

  def metric_term_names(self):
    return ("x", "y", "xx", "yy", "xy") if self.num_classes == 1 else ("correct",)

  def metric_terms(self, outputs, labels):
    """`correct` class ids; for regression the sums of Pearson's r (scores x, labels y)."""
    logits, labels = tf.cast(outputs["logits"], tf.float64), _labels(self, labels, "logits")
    if self.num_classes == 1:
      x, y = tf.reshape(logits, [-1]), tf.reshape(tf.cast(labels, tf.float64), [-1])
      return {"x": tf.reduce_sum(x), "y": tf.reduce_sum(y), "xx": tf.reduce_sum(x * x),
              "yy": tf.reduce_sum(y * y), "xy": tf.reduce_sum(x * y)}
    predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
    right = tf.equal(predicted, tf.reshape(tf.cast(labels, tf.int32), [-1]))
    return {"correct": tf.reduce_sum(tf.cast(right, tf.float32))}

  def metric_values(self, sums):
    """`accuracy`; for regression `pearson` (Pearson's r of scores and labels, as GLUE's
    STS-B; NaN when either is constant, as `scipy.stats.pearsonr` and the tools' GLUE
    metrics: a correlation is undefined there, and 0 would read as a measured one)."""
    n = tf.maximum(sums["examples"], 1.0)
    if self.num_classes == 1:
      covariance = n * sums["xy"] - sums["x"] * sums["y"]
      variances = (_spread(n, sums["x"], sums["xx"]) * _spread(n, sums["y"], sums["yy"]))
      return {"pearson": tf.where(variances > 0.0,
                                  covariance / tf.sqrt(tf.maximum(variances, 1e-300)),
                                  tf.constant(math.nan, variances.dtype))}
    return {"accuracy": sums["correct"] / n}

  def hf_task(self, labels: Optional[Sequence[str]] = None) -> dict:
    """The task fields of this model's Hugging Face `config.json` (`hf_task_fields`).

    Args:
      labels: the class names in class-id order (C of them); None: the model's own
        (`labels`), else Hugging Face's `LABEL_<i>`. A regression model (C = 1) takes none;
        a model with labels takes only those.
    """
    if self.num_classes == 1:
      if labels is not None:
        raise ValueError("a regression classifier (1 output) has no labels")
      return hf_task_fields("BertForSequenceClassification", ["LABEL_0"],
                            problem_type="regression")
    if labels is not None and self.labels is not None and tuple(labels) != self.labels:
      raise ValueError(f"labels {list(labels)} differ from the classifier's "
                       f"{list(self.labels)}")
    return hf_task_fields("BertForSequenceClassification",
                          _checked_labels(labels if labels is not None else self.labels,
                                          self.num_classes))

  def classify(self, texts, batch_size: int = 32, verbose="auto"):
    """Class names with probabilities (regression: scores) for raw texts or pairs
    (`tfbert.inference.raw_text.classify`; needs text settings: `tfbert.load`)."""
    return implementation(self).classify(self, texts, batch_size, verbose)

  def served_outputs(self, features) -> dict:
    """What its exports serve: float32 `logits`, `probabilities` (softmax) [B, C]; for
    regression (C = 1), `score` [B]."""
    logits = tf.cast(self(features, training=False)["logits"], tf.float32)  # [B, C]
    if self.num_classes == 1:
      return {"score": logits[:, 0]}
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

  def get_config(self):
    return {**super().get_config(), "config": self.config.to_dict(),
            "num_classes": self.num_classes, "dropout_rate": self.dropout_rate,
            "labels": None if self.labels is None else list(self.labels)}


@keras.saving.register_keras_serializable(package="tfbert")
class BertTokenClassifier(RawTextPredict, _FineTuningStep, keras.Model):
  """BERT with a tag per WordPiece: dropout then a dense projection of `sequence_output`.

  Hugging Face's `BertForTokenClassification`: its head (`classifier.weight` [C, H],
  `classifier.bias` [C]) loads into `classifier_head` under the same Google names as a
  sentence classifier's (`output_weights`, `output_bias`).

  Args:
    config: A `BertConfig` (or its dict).
    labels: the tag of each label id (C >= 2 distinct ones, `tagger_labels`; kept in the
      saved model).
    dropout_rate: Dropout on the sequence output in training.

  Training labels: {"logits": int [B, S] tag ids in [0, C), `IGNORED_TAG_IDS` where no word
  starts: `tfbert.tagging.tagging_features.IGNORE` (-1) or Hugging Face's ignore index
  (-100)}; other negative ids are refused by `fit`, `evaluate`, `train_on_batch` and
  `test_on_batch` (`check_label_values`, a dataset's batch by batch; the step itself, e.g.
  in `tfbert.training.training_loop`, skips every negative id). An example's loss is the
  mean cross-entropy over its labelled positions (0 if it has none): every window counts
  once, so the loss of a batch does not depend on how it is split over replicas or
  micro-batches.

  Returns:
    float32 `logits` [B, S, C] in a dict.
  """
  # Where fit's and evaluate's features come from (raw text is predict's only): the end of
  # their refusal of other inputs (`tfbert.text.text_calls.features_source`).
  FEATURES_SOURCE = (
      "build x and y from words and tags (a tfbert.tagging.conll.Sentence each) with "
      "tfbert.tagging.tagging_features.make_features: x=its .inputs, y={'logits': its "
      ".label_ids}; or train on a CoNLL file with tools/run_ner.py")

  # google-research/bert has no token-classification head: under Google names the head is a
  # sentence classifier's (`output_weights`), so a Google checkpoint is refused.
  google_checkpoint_head = False

  @validation.typed_arguments()
  def __init__(self, config, labels, dropout_rate: float = 0.1, **kwargs):
    super().__init__(**kwargs)
    self._create_trackers()
    self.config = as_config(config)
    self.labels = tagger_labels(labels)
    self.dropout_rate = dropout_rate = validation.checked_rate("dropout_rate", dropout_rate)
    self.encoder = BertEncoder(self.config, name="encoder", dtype=self.dtype_policy)
    self.classifier_head = ClassifierHead(len(self.labels), dropout_rate,
                                          self.config.initializer_range,
                                          name="classifier_head", dtype=self.dtype_policy)
    self._create_eval_sums()

  @property
  def num_labels(self) -> int:
    return len(self.labels)

  def build(self, input_shape=None):
    build_once(self.encoder)
    build_once(self.classifier_head, (None, None, self.config.hidden_size))
    self.built = True

  def call(self, features, training=None):
    sequence = self.encoder(features, training=training)["sequence_output"]
    return {"logits": self.classifier_head(sequence, training=training)}

  def label_forms(self) -> dict[str, LabelForm]:
    """{"logits": int tag ids [B, S]} (-1 or -100, `IGNORED_TAG_IDS`, where no word
    starts)."""
    return {"logits": LabelForm(f"int tag ids [B, S] in [0, {self.num_labels}), or -1 / "
                                "-100 where no word starts", 2, True, self.num_labels,
                                IGNORED_TAG_IDS)}

  def example_losses(self, outputs, labels):
    """float32 [B]: the mean cross-entropy over each example's labelled positions."""
    label_ids = tf.cast(_labels(self, labels, "logits"), tf.int32)       # [B, S]
    labelled = tf.cast(label_ids >= 0, tf.float32)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
        tf.maximum(label_ids, 0), tf.cast(outputs["logits"], tf.float32))  # [B, S]
    return tf.reduce_sum(losses * labelled, axis=1) / tf.maximum(
        tf.reduce_sum(labelled, axis=1), 1.0)

  def counted(self, losses, labels):
    """float32 [B]: 1 for an example with a labelled position, 0 for one without (a window
    of a long sentence whose words are all read in other windows, an empty sentence): its
    loss is 0, and counting it pulled the batch's mean down (a 4-example evaluation with
    one such read 0.8293 for the labelled examples' 1.1057: sweep 31, B46)."""
    del losses
    label_ids = tf.cast(_labels(self, labels, "logits"), tf.int32)       # [B, S]
    return tf.cast(tf.reduce_any(label_ids >= 0, axis=1), tf.float32)

  def metric_term_names(self):
    return ("correct", "labelled")

  def metric_terms(self, outputs, labels):
    """`correct` and `labelled` positions (entity F1 needs the words: the task's own
    evaluation, `tfbert.tagging`)."""
    label_ids = tf.cast(_labels(self, labels, "logits"), tf.int32)       # [B, S]
    predicted = tf.argmax(outputs["logits"], axis=-1, output_type=tf.int32)
    labelled = label_ids >= 0
    return {"correct": tf.reduce_sum(tf.cast(labelled & tf.equal(predicted, label_ids),
                                             tf.float32)),
            "labelled": tf.reduce_sum(tf.cast(labelled, tf.float32))}

  def metric_values(self, sums):
    """`accuracy`: the fraction of labelled positions tagged right (NaN when there is none:
    not 0.0, a score of no token, sweep 33, B181)."""
    ratio = tf.math.divide_no_nan(sums["correct"], sums["labelled"])
    return {"accuracy": tf.where(sums["labelled"] > 0, ratio,
                                 tf.constant(float("nan"), ratio.dtype))}

  def hf_task(self, labels: Optional[Sequence[str]] = None) -> dict:
    """The task fields of this model's Hugging Face `config.json` (`hf_task_fields`): its
    own tags (`labels`, when given, must be those)."""
    if labels is not None and tuple(labels) != self.labels:
      raise ValueError(f"labels {list(labels)} differ from the tagger's {list(self.labels)}")
    return hf_task_fields("BertForTokenClassification", self.labels)

  def tag(self, texts, batch_size: int = 32, verbose="auto"):
    """Entities with character offsets in raw texts (`tfbert.inference.raw_text.tag`;
    needs text settings: `tfbert.load`)."""
    return implementation(self).tag(self, texts, batch_size, verbose)

  def served_outputs(self, features) -> dict:
    """What its exports serve: float32 `logits`, `probabilities` [B, S, C]."""
    logits = tf.cast(self(features, training=False)["logits"], tf.float32)  # [B, S, C]
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

  def get_config(self):
    return {**super().get_config(), "config": self.config.to_dict(), "labels": list(self.labels),
            "dropout_rate": self.dropout_rate}


def hf_task_fields(architecture: str, labels: Optional[Sequence[str]] = None,
                   problem_type: Optional[str] = None) -> dict:
  """What a Hugging Face `config.json` says about the task beyond the BERT settings.

  Args:
    architecture: the transformers class that loads the directory (`BertModel`,
      `BertForPreTraining`, `BertForQuestionAnswering`, `BertForSequenceClassification`,
      `BertForTokenClassification`).
    labels: the output names in output order, or None (no label head).
    problem_type: "regression" for a one-output scorer; None: transformers' default.

  Returns:
    {"architectures": [architecture]} and, with labels, `num_labels`, `id2label` (string
    keys, as JSON has) and `label2id`, and `problem_type` when given.
  """
  fields = {"architectures": [architecture]}
  if labels is not None:
    fields.update(num_labels=len(labels),
                  id2label={str(i): label for i, label in enumerate(labels)},
                  label2id={label: i for i, label in enumerate(labels)})
  if problem_type is not None:
    fields["problem_type"] = problem_type
  return fields


def _no_labels(model: keras.Model, labels: Optional[Sequence[str]]) -> None:
  if labels is not None:
    raise ValueError(f"labels are for a classifier or tagger, not a {type(model).__name__}")


def checked_num_classes(num_classes) -> int:
  """A classifier's `num_classes` C as an int >= 1 (1: regression, one score).

  Raises:
    ValueError: anything else (0 or less, a float, a bool), naming it and the range; Keras'
      shape code would otherwise fail at the first call, naming neither.
  """
  if (isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer))
      or num_classes < 1):
    raise ValueError(f"num_classes={num_classes!r}: must be an int >= 1 (the number of "
                     "classes; 1 = regression, one score)")
  return int(num_classes)


def tagger_labels(labels) -> tuple:
  """A tagger's `labels` as a tuple: at least 2 distinct names (as the CoNLL reader's
  `tfbert.tagging.conll.tag_set` requires of a training file).

  Raises:
    TypeError: a str (one name is no sequence of them), an int (a count is no names).
    ValueError: fewer than 2 labels (a tagger of the one label O trains with loss 0 and
      learns nothing), or a name given twice, naming `labels=`.
  """
  labels = check_label_names(labels, what="tag names")
  if len(labels) < 2:
    raise ValueError(f"labels={_listed(labels)}: a tagger needs at least 2 labels (O and "
                     "B-<type>/I-<type> tags): one with the one label O trains with loss 0 "
                     "and learns nothing; pass every tag of the data")
  twice = sorted({repr(n) for i, n in enumerate(labels) if n in labels[:i]})
  if twice:
    raise ValueError(f"labels={_listed(labels)} names {', '.join(twice)} more than once: each "
                     "label id needs a tag of its own")
  return labels


def check_label_names(labels, where: str = "labels=", lines: bool = False,
                      what: str = "names") -> tuple[str, ...]:
  """`labels` as a tuple of str, each checked: a label name must be a non-empty str without
  a line break, as every place that records them holds it (`labels.txt` one name per line,
  an export's `labels.txt`, ONNX metadata, Hugging Face `id2label`). The one check of label
  names wherever they enter (`labels=` of the models and `tfbert.load`, `labels.txt`).

  Args:
    labels: the names, in id order (a NumPy str scalar is read as its str).
    where: what gave them, for the message (`labels=`, a file's path).
    lines: name an entry by its line number (a file's lines) rather than its index.
    what: what the names are, for the message ("tag names").

  Raises:
    TypeError: a str, bytes or anything not iterable (an int: a count of labels) in place
      of a sequence; a name that is not a str (an int,
      bytes, None), naming `where`, its position and the str names to pass instead.
    ValueError: an empty name or one holding a line break, naming `where` and its position.
  """
  if isinstance(labels, (str, bytes)) or not isinstance(labels, Iterable):
    raise TypeError(f"{where} must be a sequence of {what}, not the {type(labels).__name__} "
                    f"{labels!r}: pass a list of str, one per label id")
  labels = tuple(labels)
  for i, name in enumerate(labels):
    at = (f"{where}: line {i + 1}" if lines
          else f"{where}{list(labels)}: entry {i} ({name!r})")
    if not isinstance(name, str):
      fix = [n.decode(errors="replace") if isinstance(n, bytes) else str(n) for n in labels]
      raise TypeError(f"{at} is of type {type(name).__name__}: label names must be str, "
                      f"e.g. {fix}")
    if not name:
      raise ValueError(f"{at} is empty: each label needs a name (labels.txt holds one per "
                       "line, and an empty line names nothing)")
    if "\n" in name or "\r" in name:
      raise ValueError(f"{at} holds a line break: labels.txt holds one name per line, so it "
                       "would read back as several labels; give each name on one line")
  return tuple(str(name) for name in labels)


def _listed(labels) -> list:
  """`labels` as a list for a message (a str kept whole)."""
  return [labels] if isinstance(labels, (str, bytes)) else list(labels)


def _checked_labels(labels: Optional[Sequence[str]], count: int) -> list[str]:
  """`labels` (or `LABEL_<i>`) for `count` outputs, checked."""
  if labels is None:
    return [f"LABEL_{i}" for i in range(count)]
  labels = check_label_names(labels)
  if len(labels) != count or len(set(labels)) != len(labels):
    raise ValueError(f"{len(labels)} label(s) {list(labels)} for a model with {count} "
                     "output(s) (one distinct name per output)")
  return list(labels)
