"""tfbert.losses.embedding_losses against float64 NumPy oracles of sentence-transformers'
definitions. Inputs are random with odd sizes (7 anchors, 5 hard negatives, H 13); float32
losses of O(1) values match float64 within 1e-5 relative (logits up to scale 20)."""

import numpy as np
import pytest
import tensorflow as tf

from tfbert.losses import embedding_losses

RTOL = 1e-5  # float32 cosine and log-softmax of logits |x| <= 20 against float64.


def _cos(a, b):
  a = a / np.linalg.norm(a, axis=-1, keepdims=True)
  b = b / np.linalg.norm(b, axis=-1, keepdims=True)
  return a @ b.T


def _cross_entropy(logits, targets):
  shifted = logits - logits.max(axis=1, keepdims=True)
  log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
  return -log_probs[np.arange(len(targets)), targets]


def _data(seed=3, count=7, negatives=5, width=13):
  rng = np.random.default_rng(seed)
  return (rng.normal(size=(count, width)), rng.normal(size=(count, width)),
          rng.normal(size=(negatives, width)))


def test_in_batch_negatives_rank_each_positive_among_all_positives_and_negatives():
  anchors, positives, negatives = _data()
  keys = np.concatenate([positives, negatives])
  expected = _cross_entropy(20.0 * _cos(anchors, keys), np.arange(7))
  got = embedding_losses.in_batch_negatives_losses(
      tf.constant(anchors, tf.float32), tf.constant(positives, tf.float32),
      tf.constant(negatives, tf.float32))
  np.testing.assert_allclose(got.numpy(), expected, rtol=RTOL)
  without = embedding_losses.in_batch_negatives_losses(
      tf.constant(anchors, tf.float32), tf.constant(positives, tf.float32), scale=7.0)
  np.testing.assert_allclose(without.numpy(), _cross_entropy(7.0 * _cos(anchors, positives),
                                                             np.arange(7)), rtol=RTOL)


def test_the_symmetric_loss_averages_both_directions_without_negatives_backward():
  anchors, positives, negatives = _data(seed=4)
  forward = _cross_entropy(20.0 * _cos(anchors, np.concatenate([positives, negatives])),
                           np.arange(7))
  backward = _cross_entropy(20.0 * _cos(positives, anchors), np.arange(7))
  a, p, n = (tf.constant(x, tf.float32) for x in (anchors, positives, negatives))
  got = embedding_losses.in_batch_negatives_losses(a, p, n, symmetric=True, all_anchors=a)
  np.testing.assert_allclose(got.numpy(), 0.5 * (forward + backward), rtol=RTOL)
  with pytest.raises(ValueError, match="all_anchors"):
    embedding_losses.in_batch_negatives_losses(a, p, symmetric=True)


def test_replica_slices_with_the_gathered_batch_equal_one_big_batch_and_local_ones_do_not():
  """2 replicas of 4 anchors: each replica's losses over the gathered candidates, at its
  offset, are exactly the big batch's rows; ranking among the replica's own candidates only
  (what a per-replica loss without the gather computes) is another objective."""
  anchors, positives, negatives = _data(seed=5, count=8, negatives=2)
  a, p, n = (tf.constant(x, tf.float32) for x in (anchors, positives, negatives))
  big = embedding_losses.in_batch_negatives_losses(a, p, n, symmetric=True, all_anchors=a)
  for offset_tensor in (False, True):
    parts = [embedding_losses.in_batch_negatives_losses(
        a[r * 4:(r + 1) * 4], p, n, offset=tf.constant(r * 4) if offset_tensor else r * 4,
        symmetric=True, all_anchors=a) for r in range(2)]
    np.testing.assert_allclose(tf.concat(parts, 0).numpy(), big.numpy(), rtol=1e-6)
  local = [embedding_losses.in_batch_negatives_losses(
      a[r * 4:(r + 1) * 4], p[r * 4:(r + 1) * 4], n[r:r + 1], symmetric=True,
      all_anchors=a[r * 4:(r + 1) * 4]) for r in range(2)]
  differs = abs(float(tf.reduce_mean(tf.concat(local, 0))) - float(tf.reduce_mean(big)))
  assert differs > 0.1, differs  # Fewer negatives: a visibly smaller loss.


def test_cosent_sums_over_every_ordered_pair_of_the_batch():
  rng = np.random.default_rng(6)
  left, right = rng.normal(size=(9, 11)), rng.normal(size=(9, 11))
  gold = rng.integers(0, 6, 9).astype(np.float64)  # Ties: pairs of equal scores do not count.
  sims = np.sum(left * right, axis=1) / (np.linalg.norm(left, axis=1)
                                          * np.linalg.norm(right, axis=1))
  terms = [20.0 * (sims[j] - sims[i]) for i in range(9) for j in range(9) if gold[i] > gold[j]]
  expected = np.log1p(np.sum(np.exp(terms)))
  similarities = embedding_losses.pair_cosine_similarities(tf.constant(left, tf.float32),
                                                           tf.constant(right, tf.float32))
  np.testing.assert_allclose(similarities.numpy(), sims, rtol=1e-6, atol=1e-7)
  got = embedding_losses.cosent_loss(similarities, tf.constant(gold, tf.float32))
  assert float(got) == pytest.approx(expected, rel=RTOL)
  # All scores equal: no ordered pair, log(1) = 0.
  assert float(embedding_losses.cosent_loss(similarities, tf.zeros([9]))) == 0.0


def test_cosine_mse_is_the_squared_error_of_each_pair():
  sims, gold = np.array([0.5, -0.25, 0.9]), np.array([1.0, 0.0, 0.8])
  got = embedding_losses.cosine_mse_losses(tf.constant(sims), tf.constant(gold))
  np.testing.assert_allclose(got.numpy(), (sims - gold) ** 2, rtol=1e-6)
