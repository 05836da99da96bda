"""A BERT sentence encoder: the encoder, a pooling of its last layer, optional L2 normalization.

The model of sentence-transformers' BERT models (all-MiniLM-L6-v2, BGE, E5, GTE): a
`Transformer` module (BERT), a `Pooling` module (`mean` over the attention mask, `cls` or
`max`: `tfbert.layers.pooling`) and, for most, a `Normalize` module. Reading and writing
their directories: `tfbert.embeddings.sentence_transformers`.

**Training** (`train_step`, under `fit` and tfbert's training loop) takes a batch of texts
packed as `{"anchor": features, "positive": features[, "negative": features]}` and the loss
named at construction (`tfbert.losses.embedding_losses`, `docs/embeddings.md`):

* `in_batch_negatives` (no labels): each anchor ranks its positive among every positive and
  hard negative of the *global* batch;
* `cosent` and `cosine_mse` (labels: float gold scores [B]): the pair ("anchor",
  "positive") is scored by its cosine similarity.

The texts of a step run through the encoder as one batch (so each gets its own dropout
mask). Across replicas, the candidates (and CoSENT's similarities) are gathered from every
replica by `gather_replicas`, whose gradient returns to each replica the sum of every
replica's gradient for its rows: 2 replicas of B train exactly what one device trains on
the 2B batch. Gradient accumulation is refused for these losses: the in-batch negatives of
k micro-batches are not those of one batch of k x B.

Shape legend: B sentences (per replica), S positions, H hidden width, N replicas.
"""

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tfbert.embeddings import embedding_metrics
from tfbert.encoder import BertEncoder, as_config, build_once, read_inputs
from tfbert.layers import dropout, pooling
from tfbert.losses import embedding_losses
from tfbert.models import accumulation, dense_gradients, step_number, sum_over_replicas
from tfbert.runtime import validation
from tfbert.text import feature_checks
from tfbert.text.text_calls import RawTextPredict, implementation, unweighted_batch

OUTPUT_NAME = "embeddings"
PARTS = ("anchor", "positive", "negative")  # The texts of a training example, in order.
SCORE_KEY = "score"  # A scored pair's label, when labels come as a dict.
LOSSES = ("in_batch_negatives", "cosent", "cosine_mse")
# Losses whose value depends on the whole batch (not a mean of per-example terms).
BATCH_LOSSES = ("in_batch_negatives", "cosent")


def replica_counts(count: tf.Tensor) -> tf.Tensor:
  """int32 [N]: every replica's `count` (its rows), in replica order; [count] with one.

  Replicas may hold unequal shares of a global batch: Keras splits a last batch of 5 on 2
  replicas into 3 and 2, and of 1 into 1 and 0.
  """
  context = tf.distribute.get_replica_context()
  count = tf.reshape(tf.cast(count, tf.int32), [1])
  if context is None or context.num_replicas_in_sync == 1:
    return count
  replica = tf.cast(context.replica_id_in_sync_group, tf.int32)
  return sum_over_replicas(tf.scatter_nd(tf.reshape(replica, [1, 1]), count,
                                         [context.num_replicas_in_sync]))


def gather_replicas(local: tf.Tensor, counts: tf.Tensor | None = None) -> tf.Tensor:
  """Every replica's `local` [B_r, ...], concatenated in replica order: [sum of B_r, ...].

  In a replica context with N > 1 (the replicas' B_r may differ, `replica_counts`); `local`
  itself otherwise. The gradient of the result returns to each replica the *sum over
  replicas* of the gradients of its rows, as the loss of every replica uses them. Built on
  `models.sum_over_replicas` (a sum of one-hot placed copies, each padded to the largest
  B_r), the reduce that is safe with several strategies in one process.

  Args:
    local: [B_r, ...] this replica's rows.
    counts: int32 [N], `replica_counts` of B_r when the caller has it already (one
      all-reduce per step instead of one per gathered tensor); computed here otherwise.
  """
  context = tf.distribute.get_replica_context()
  if context is None or context.num_replicas_in_sync == 1:
    return local
  replicas = context.num_replicas_in_sync
  replica = tf.cast(context.replica_id_in_sync_group, tf.int32)
  if counts is None:
    counts = replica_counts(tf.shape(local)[0])                          # [N]
  width = tf.reduce_max(counts)
  kept = tf.sequence_mask(counts, width)                                 # [N, W]

  @tf.custom_gradient
  def gather(x):
    rows = tf.shape(x)[0]
    padding = tf.concat([[[0, width - rows]], tf.zeros([tf.rank(x) - 1, 2], tf.int32)], 0)
    placed = tf.scatter_nd(tf.reshape(replica, [1, 1]), tf.pad(x, padding)[None], tf.concat(
        [[replicas], [width], tf.shape(x)[1:]], axis=0))                 # [N, W, ...]
    gathered = tf.boolean_mask(sum_over_replicas(placed), kept)          # [sum B_r, ...]

    def grad(upstream):
      spread = tf.scatter_nd(tf.where(kept), upstream, tf.shape(placed, tf.int64))  # [N, W, ...]
      return sum_over_replicas(spread)[replica, :rows]

    return gathered, grad

  return gather(local)


def replica_offset(counts: tf.Tensor) -> tf.Tensor:
  """int32: where this replica's rows start in `gather_replicas`' result.

  Args:
    counts: int32 [N], every replica's rows (`replica_counts`).
  """
  context = tf.distribute.get_replica_context()
  if context is None or context.num_replicas_in_sync == 1:
    return tf.constant(0, tf.int32)
  replica = tf.cast(context.replica_id_in_sync_group, tf.int32)
  return tf.reduce_sum(counts[:replica])


@keras.saving.register_keras_serializable(package="tfbert")
class BertSentenceEncoder(RawTextPredict, keras.Model):
  """BERT with sentence pooling: one vector per input sequence.

  Args:
    config: a `BertConfig` (or its dict).
    pooling_mode: one of `tfbert.layers.pooling.MODES` ("mean", "cls", "max").
    normalize: divide each sentence vector by its L2 norm (sentence-transformers'
      `Normalize`), so that a dot product is the cosine similarity.
    **kwargs: forwarded to `keras.Model` (e.g. `name`, `dtype`).

  Call args:
    features: dict with int32 `input_ids` [B, S] and optional `input_mask`, `segment_ids`.
    training: whether dropout is active.

  Returns:
    {"embeddings": float32 [B, H]}.
  """

  @validation.typed_arguments()
  def __init__(self, config, pooling_mode: str = "mean", normalize: bool = True,
               loss: str = "in_batch_negatives",
               scale: float = embedding_losses.DEFAULT_SCALE, symmetric: bool = False,
               **kwargs):
    super().__init__(**kwargs)
    if pooling_mode not in pooling.MODES:
      raise ValueError(f"unknown pooling mode {pooling_mode!r}; known: "
                       f"{', '.join(pooling.MODES)}")
    if loss not in LOSSES:
      raise ValueError(f"unknown loss {loss!r}; known: {', '.join(LOSSES)}")
    if embedding_losses.scale_problem(float(scale)):
      raise ValueError(embedding_losses.scale_problem(float(scale)))
    self.config = as_config(config)
    self.pooling_mode = pooling_mode
    self.normalize = normalize
    self.loss_name, self.scale, self.symmetric = loss, float(scale), bool(symmetric)
    self.encoder = BertEncoder(self.config, name="encoder", dtype=self.dtype_policy)
    # The sentence vector is pooled from the token vectors and never passes the [CLS]
    # pooler, whose weights are kept only for the checkpoint formats: frozen, the optimizer
    # neither warns that they get no gradient nor gives them slots.
    self.encoder.pooler.trainable = False
    self.trackers = {"loss": keras.metrics.Mean(name="loss")}

  def build(self, input_shape=None):
    build_once(self.encoder)
    self.built = True

  def call(self, features, training=None) -> dict[str, tf.Tensor]:
    _, input_mask, _ = read_inputs(features)
    sequence_output = self.encoder(features, training=training)["sequence_output"]
    pooled = pooling.pool(sequence_output, input_mask, self.pooling_mode)    # [B, H]
    return {OUTPUT_NAME: pooling.normalize(pooled) if self.normalize else pooled}

  def replica_loss(self, features, labels=None, training: bool = True) -> tf.Tensor:
    """This replica's share of the global batch's loss (the shares sum to it).

    Args:
      features: {"anchor", "positive"[, "negative"]}: feature dicts of [B, S] each.
      labels: float gold scores [B] (or {"score": [B]}) for `cosent` / `cosine_mse`;
        None for ranking.
      training: dropout on.

    Returns:
      float32 scalar: in-batch negatives and cosine MSE: the sum of this replica's
      examples' losses / (N x B); CoSENT: the global loss / N.
    """
    return self._replica_loss_and_pairs(features, labels, training)[0]

  def _replica_loss_and_pairs(self, features, labels=None, training: bool = True):
    """`replica_loss`, and the global batch's pairs (float32, over every replica) it
    divides by: one all-reduce of the replicas' counts serves the loss, its gathers and
    the loss tracker's weight."""
    labels = self._check_batch(features, labels)
    parts = ["anchor", "positive"] + (["negative"] if "negative" in features else [])
    joined = {name: tf.concat([tf.cast(features[part][name], tf.int32) for part in parts], 0)
              for name in ("input_ids", "input_mask", "segment_ids")
              if name in features["anchor"]}
    embeddings = tf.split(self(joined, training=training)[OUTPUT_NAME], len(parts))
    anchors, positives = embeddings[0], embeddings[1]
    context = tf.distribute.get_replica_context()
    replicas = context.num_replicas_in_sync if context is not None else 1
    counts = replica_counts(tf.shape(anchors)[0])                       # [N]; shares may differ.
    total = tf.cast(tf.reduce_sum(counts), tf.float32)
    if self.loss_name == "in_batch_negatives":
      negatives = gather_replicas(embeddings[2], counts) if len(parts) == 3 else None
      losses = embedding_losses.in_batch_negatives_losses(
          anchors, gather_replicas(positives, counts), negatives,
          offset=replica_offset(counts), scale=self.scale,
          symmetric=self.symmetric,
          all_anchors=gather_replicas(anchors, counts) if self.symmetric else None)
      return tf.reduce_sum(losses) / total, total
    similarities = embedding_losses.pair_cosine_similarities(anchors, positives)
    if self.loss_name == "cosent":
      return embedding_losses.cosent_loss(
          gather_replicas(similarities, counts),
          gather_replicas(tf.cast(labels, tf.float32), counts),
          self.scale) / float(replicas), total
    losses = embedding_losses.cosine_mse_losses(similarities, labels)
    return tf.reduce_sum(losses) / total, total

  def _check_batch(self, features, labels):
    """The labels a batch of pairs trains on (`_scores`; None for in-batch negatives), its
    pairs and each one's features checked at trace time (`feature_checks.check_specs`)."""
    self._check_pairs(features)
    for part in features:
      feature_checks.check_specs(features[part], self.config, self.input_names, f"x[{part!r}]")
    return labels if self.loss_name == "in_batch_negatives" else self._scores(labels)

  def check_label_values(self, x, y, what: str = "y"):
    """`x`, the labels `y` of `fit` / `evaluate` checked before the call.

    Raises:
      ValueError: labels (or a dataset of (pairs, labels)) given to in-batch negatives,
        which reads none: a default encoder fit on scored pairs trained every pair as a
        positive, pairs scored 0 included, and evaluate gave the same loss with or without
        the scores (sweep 32, B32); for cosine MSE, a known score outside [-1, 1] (STS-B's
        0-5 as given), which no cosine reaches (loss 7.05 without a word: sweep 32, B31;
        run_embeddings' `--score_scale` divides them).
    """
    labelled = y is not None or (isinstance(x, tf.data.Dataset)
                                 and isinstance(x.element_spec, tuple)
                                 and len(x.element_spec) > 1)
    if self.loss_name == "in_batch_negatives" and labelled:
      raise ValueError(
          f"{type(self).__name__} trains with the in_batch_negatives loss (its default), which "
          "takes no labels: every (anchor, positive) pair is a positive and the batch's other "
          "texts its negatives; got labels. For scored pairs pass loss='cosent' or "
          "loss='cosine_mse' to BertSentenceEncoder(...), or leave the labels out")
    if (self.loss_name != "cosine_mse" or y is None or isinstance(x, tf.data.Dataset)
        or isinstance(y, tf.data.Dataset)):
      return x
    scores = y.get(SCORE_KEY) if isinstance(y, dict) else y
    try:
      values = np.asarray(scores, np.float64)
    except (TypeError, ValueError):
      return x  # Not numbers: `_scores` names them.
    outside = ~(np.abs(values) <= 1.0)
    if values.size and outside.any():
      at = tuple(int(i) for i in np.argwhere(outside)[0])
      raise ValueError(
          f"{type(self).__name__}'s {what} hold {values[at]} at {list(at)}: the cosine_mse "
          "loss fits each pair's cosine similarity to its score, and a cosine is in [-1, 1]; "
          "scale the scores first (STS-B's 0-5: divide by 5)")
    return x

  def _check_pairs(self, features) -> None:
    """Raises ValueError unless `features` are the pairs (or triplets) `fit` takes."""
    if (not isinstance(features, dict) or not {"anchor", "positive"} <= set(features)
        or not set(features) <= set(PARTS)):
      got = sorted(features) if isinstance(features, dict) else type(features).__name__
      raise ValueError(f"{type(self).__name__} trains on pairs: features must be "
                       "{'anchor': features, 'positive': features[, 'negative': features]} "
                       f"(each a dict with input_ids [B, S]); got {got}")

  def checked_inputs(self, x, what: str = "x", training: bool = False):
    """`text_calls.CheckedInputs.checked_inputs`; `fit` and `evaluate` take pairs (or
    triplets) of features, each checked as `predict`'s features are."""
    if not training or not isinstance(x, dict) or "input_ids" in x:
      return super().checked_inputs(x, what, training)
    self._check_pairs(x)
    return {part: feature_checks.checked_features(value, self.config, self.input_names,
                                              f"{what}[{part!r}]")
            for part, value in x.items()}

  def _scores(self, labels):
    """The gold scores [B] a scored-pair loss needs: `labels` itself, or its one key
    `SCORE_KEY` ({"score": [B]}, sentence-transformers' column name)."""
    if isinstance(labels, dict):
      if set(labels) != {SCORE_KEY}:
        raise ValueError(f"the {self.loss_name} loss takes the pairs' gold scores as labels: "
                         f"float [B], or a dict with the one key {SCORE_KEY!r}; got keys "
                         f"{sorted(labels)}")
      labels = labels[SCORE_KEY]
    if labels is None:
      raise ValueError(f"the {self.loss_name} loss trains on scored pairs: fit((pairs, "
                       "scores)) with scores float [B] (or {'score': scores}); got no labels")
    labels = tf.convert_to_tensor(labels)
    shape = labels.shape
    if (labels.dtype == tf.string or shape.rank not in (None, 1, 2)
        or (shape.rank == 2 and shape[1] != 1)):
      raise ValueError(f"the {self.loss_name} loss takes one gold score per pair, float [B]; "
                       f"got {labels.dtype.name} scores of shape {shape}")
    return tf.reshape(labels, [-1]) if shape.rank == 2 else labels

  def train_step(self, data):
    features, labels = unweighted_batch(self, data)
    self._check_batch(features, labels)  # Before the optimizer is built: a refusal changes nothing.
    steps, reduction = accumulation(self.optimizer)
    if steps > 1 and self.loss_name in BATCH_LOSSES:
      raise ValueError(
          f"gradient accumulation ({steps} micro-steps) with the {self.loss_name} loss would "
          "train another objective: its value depends on the whole batch (every other "
          "example is a negative, or a pair to order against), and k micro-batches see only "
          "their own; raise the batch size instead, or use cosine_mse")
    with tf.GradientTape() as tape, dropout.step_keys(step_number(self)):
      share, pairs = self._replica_loss_and_pairs(features, labels)
      scaled_loss = self.optimizer.scale_loss(share / float(steps if reduction == "sum"
                                                            else 1))
    grads = dense_gradients(tape.gradient(scaled_loss, self.trainable_variables))
    self.optimizer.apply(grads, self.trainable_variables)
    self.trackers["loss"].update_state(sum_over_replicas(share), sample_weight=pairs)
    return self.get_metrics_result()

  def test_step(self, data):
    """What `evaluate` and `fit(validation_data=...)` run: the training objective on the
    same pairs `fit` takes (`replica_loss`), without dropout or an update. (Keras' default
    called the model on the pairs dict itself: `KeyError: 'input_ids'`.)"""
    features, labels = unweighted_batch(self, data)
    # Weighted by the batch's pairs: the mean over every pair, not of the batch means (a
    # last batch of 1 weighed as much as one of 32: 0.151 for 0.209; sweep 30, B75).
    share, pairs = self._replica_loss_and_pairs(features, labels, training=False)
    self.trackers["loss"].update_state(sum_over_replicas(share), sample_weight=pairs)
    return self.get_metrics_result()

  @property
  def metrics(self):
    return list(self.trackers.values())

  def get_metrics_result(self):
    return {name: tracker.result() for name, tracker in self.trackers.items()}

  def encode(self, texts, batch_size: int = 32, normalize: bool = False, verbose="auto"):
    """float32 embeddings [N, H] of raw texts (one text: [H]), sentence-transformers'
    `encode` (`tfbert.inference.raw_text.encode`; needs text settings: `tfbert.load`)."""
    return implementation(self).encode(self, texts, batch_size, normalize, verbose)

  @staticmethod
  def similarity(a, b=None):
    """float32 [N, M] cosine similarities of embeddings a [N, H] and b [M, H] (default: a),
    sentence-transformers' `similarity`."""
    return embedding_metrics.cosine_similarity(a, b)

  def served_outputs(self, features) -> dict[str, tf.Tensor]:
    """What its exports serve: float32 `embeddings` [B, H]."""
    return {OUTPUT_NAME: tf.cast(self(features, training=False)[OUTPUT_NAME], tf.float32)}

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "config": self.config.to_dict(),
            "pooling_mode": self.pooling_mode, "normalize": self.normalize,
            "loss": self.loss_name, "scale": self.scale, "symmetric": self.symmetric}
