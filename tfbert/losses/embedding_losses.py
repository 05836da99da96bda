"""Sentence-embedding losses: in-batch negatives (ranking), CoSENT and cosine-similarity MSE.

The definitions are sentence-transformers' (`MultipleNegativesRankingLoss`,
`MultipleNegativesSymmetricRankingLoss`, `CoSENTLoss`, `CosineSimilarityLoss`), restated in
TensorFlow so that tfbert needs no PyTorch; `tests/losses/embedding_losses_test.py` checks
each against a float64 NumPy oracle. See `docs/embeddings.md`.

**In-batch negatives across replicas.** A ranking loss scores each anchor against *every*
candidate of the batch. With data parallelism a replica holds only its slice: a loss computed
on it alone would rank against the replica's candidates only, and 2 replicas of B would train
another objective than one batch of 2B. The functions here therefore take the anchors of this
replica (`queries`) and the candidates of the whole batch (`keys`, all replicas' gathered in
replica order) with `targets` that index into `keys`; the caller gathers (and the gradient
flows back through the gather to each replica's own rows). With one replica, `keys` is the
batch itself and `targets` is `range(B)`.

Shape legend: Q queries (anchors) of this replica, K candidates of the whole batch, H the
embedding width, N scored pairs.
"""

import math
from typing import Optional

import tensorflow as tf

DEFAULT_SCALE = 20.0  # sentence-transformers' scale of the cosine similarities (1 / 0.05).


def scale_problem(scale: float) -> Optional[str]:
  """Why `scale`, the factor on the cosine similarities, cannot be a loss's scale, or None:
  it must be a finite number > 0 (0 gives a constant loss, a negative one ranks the least
  similar text first, NaN or inf NaN losses). The one check of the model's `scale`
  argument and of run_embeddings' --scale."""
  if math.isfinite(scale) and scale > 0:
    return None
  return (f"scale must be a finite number > 0, got {scale} (0 gives a constant loss, a "
          "negative scale ranks the least similar text first, nan or inf give nan losses); "
          f"the default is {DEFAULT_SCALE:g}")


def cosine_similarities(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
  """float32 [A, B] cosine similarity of every row of `a` [A, H] with every row of `b` [B, H]."""
  a = tf.math.l2_normalize(tf.cast(a, tf.float32), axis=-1, epsilon=1e-24)
  b = tf.math.l2_normalize(tf.cast(b, tf.float32), axis=-1, epsilon=1e-24)
  return tf.matmul(a, b, transpose_b=True)


def pair_cosine_similarities(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
  """float32 [N] cosine similarity of row i of `a` [N, H] with row i of `b` [N, H]."""
  a = tf.math.l2_normalize(tf.cast(a, tf.float32), axis=-1, epsilon=1e-24)
  b = tf.math.l2_normalize(tf.cast(b, tf.float32), axis=-1, epsilon=1e-24)
  return tf.reduce_sum(a * b, axis=-1)


def ranking_losses(queries: tf.Tensor, keys: tf.Tensor, targets: tf.Tensor,
                   scale: float = DEFAULT_SCALE) -> tf.Tensor:
  """float32 [Q]: cross-entropy of each query's target among all keys, by scaled cosine.

  Args:
    queries: [Q, H] embeddings (this replica's anchors).
    keys: [K, H] embeddings of every candidate of the batch (all replicas').
    targets: int [Q], the index in `keys` of each query's positive.
    scale: multiplies the cosine similarities before the softmax.

  Returns:
    -log softmax(scale * cos(query, keys))[target] per query.
  """
  logits = scale * cosine_similarities(queries, keys)                    # [Q, K]
  return tf.nn.sparse_softmax_cross_entropy_with_logits(tf.cast(targets, tf.int32), logits)


def in_batch_negatives_losses(anchors: tf.Tensor, positives: tf.Tensor,
                              negatives: Optional[tf.Tensor] = None,
                              offset: tf.Tensor | int = 0,
                              scale: float = DEFAULT_SCALE,
                              symmetric: bool = False,
                              all_anchors: Optional[tf.Tensor] = None) -> tf.Tensor:
  """float32 [Q]: multiple-negatives ranking loss of each anchor of this replica.

  Anchor i's positive is `positives[offset + i]`; every other positive of the batch and every
  hard negative is its negative. With `symmetric`, each positive also ranks its anchor among
  all anchors (sentence-transformers' symmetric loss: the mean of the two directions; hard
  negatives take part in the forward direction only).

  Args:
    anchors: [Q, H] this replica's anchors.
    positives: [K, H] every positive of the batch (all replicas', replica order).
    negatives: optional [M, H] every hard negative of the batch (any number per anchor).
    offset: where this replica's rows start in the batch (replica id x Q).
    scale: the cosine similarities' scale.
    symmetric: add the positive -> anchor direction.
    all_anchors: [K, H] every anchor of the batch (needed with `symmetric`).

  Returns:
    The per-anchor loss; its mean over every anchor of the batch is the batch's loss.
  """
  count = tf.shape(anchors)[0]
  targets = tf.range(count) + offset
  keys = positives if negatives is None else tf.concat([positives, negatives], axis=0)
  losses = ranking_losses(anchors, keys, targets, scale)
  if not symmetric:
    return losses
  if all_anchors is None:
    raise ValueError("symmetric=True needs all_anchors: every anchor of the batch")
  own_positives = positives[offset:offset + count] if isinstance(offset, int) else (
      tf.slice(positives, tf.stack([offset, 0]), tf.stack([count, -1])))
  backward = ranking_losses(own_positives, all_anchors, targets, scale)
  return 0.5 * (losses + backward)


def cosent_loss(similarities: tf.Tensor, scores: tf.Tensor,
                scale: float = DEFAULT_SCALE) -> tf.Tensor:
  """float32 scalar: CoSENT over every pair of scored pairs of the batch.

  log(1 + sum over (i, j) with scores[i] > scores[j] of exp(scale * (cos_j - cos_i))): each
  pair scored higher must have the higher cosine. The sum runs over the whole batch, so with
  several replicas `similarities` and `scores` are every replica's (gathered).

  Args:
    similarities: [N] cosine similarity of each pair's two embeddings.
    scores: [N] gold similarity scores (any scale: only their order counts).
    scale: the cosine similarities' scale.
  """
  s = scale * tf.cast(similarities, tf.float32)
  scores = tf.cast(scores, tf.float32)
  differences = s[None, :] - s[:, None]                    # [i, j] = s_j - s_i
  ordered = scores[:, None] > scores[None, :]              # scores_i > scores_j
  terms = tf.boolean_mask(differences, ordered)
  return tf.reduce_logsumexp(tf.concat([tf.zeros([1]), terms], axis=0))


def cosine_mse_losses(similarities: tf.Tensor, scores: tf.Tensor) -> tf.Tensor:
  """float32 [N]: squared error of each pair's cosine similarity against its gold score
  (sentence-transformers' `CosineSimilarityLoss`; scores scaled to [0, 1] or [-1, 1])."""
  return tf.square(tf.cast(similarities, tf.float32) - tf.cast(scores, tf.float32))
