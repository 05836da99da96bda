"""Tests for tfbert.pretraining.dynamic_masking: Google's masking rule, from the key alone.

A synthetic vocabulary (V 53: 5 specials, 28 word pieces, 20 "##" pieces) and 3,001
sequences of S 23 with [SEP]s inside, so the statistics have ~10,000 masked tokens.

Sigma bound: a share p estimated from n independent draws has standard error
sqrt(p (1 - p) / n); each statistic below must lie within 4 of them (two-sided, a false
failure once in ~16,000 seeds). The draws are stateless, so each test sees fixed numbers.
"""

import numpy as np
import pytest
import tensorflow as tf

from tfbert.pretraining import dynamic_masking

V, S, P, N = 53, 23, 5, 3001
PAD, UNK, CLS, SEP, MASK = range(5)
WORDS = np.arange(5, 33)
SUBWORDS = tuple(range(33, V))
SIGMAS = 4.0


def masking(**overrides):
  return dynamic_masking.Masking(**{
      "max_predictions": P, "vocab_size": V, "cls_id": CLS, "sep_id": SEP, "pad_id": PAD,
      "mask_id": MASK, "subword_ids": SUBWORDS, "seed": 11, **overrides})


def sequences(count=N, seed=0):
  """[CLS] pieces with a few [SEP]s (document ends) [SEP]; "##" pieces ~40%."""
  rng = np.random.default_rng(seed)
  tokens = np.where(rng.random((count, S)) < 0.6, rng.choice(WORDS, (count, S)),
                    rng.choice(SUBWORDS, (count, S)))
  tokens[rng.random((count, S)) < 0.08] = SEP
  tokens[:, 0], tokens[:, -1] = CLS, SEP
  return tokens.astype(np.int32)


def masked(settings, tokens, first_key=0):
  """`mask_window` of `tokens` whose keys are (first_key + row,), as numpy arrays."""
  keys = tf.data.Dataset.range(first_key, first_key + len(tokens)).map(
      lambda k: dynamic_masking.draws(settings, tf.reshape(k, [1]), S)).batch(len(tokens))
  drawn = next(iter(keys))
  return {k: v.numpy() for k, v in dynamic_masking.mask_window(
      settings, tf.constant(tokens), drawn).items()}


def within(share, p, n, what):
  bound = SIGMAS * np.sqrt(p * (1 - p) / n)
  assert abs(share - p) <= bound, f"{what}: {share:.4f} vs {p:.4f} +- {bound:.4f} (n {n})"


@pytest.fixture(scope="module")
def plain():
  tokens = sequences()
  return tokens, masked(masking(), tokens)


def _selected(tokens, out):
  """bool [N, S]: the positions chosen for prediction."""
  chosen = np.zeros(tokens.shape, bool)
  for row in range(len(tokens)):
    valid = out["masked_lm_weights"][row] > 0
    chosen[row, out["masked_lm_positions"][row][valid]] = True
  return chosen


def test_each_sequence_predicts_its_share_of_non_special_tokens_never_a_special(plain):
  tokens, out = plain
  chosen = _selected(tokens, out)
  candidates = ~np.isin(tokens, [CLS, SEP, PAD])
  want = np.minimum(P, np.maximum(1, np.round(candidates.sum(1) * 0.15))).astype(int)
  np.testing.assert_array_equal(chosen.sum(1), want)       # Exactly Google's count.
  assert not (chosen & ~candidates).any()                  # [CLS], [SEP] never.
  for row in range(len(tokens)):                           # Positions increasing, ids real.
    valid = out["masked_lm_weights"][row] > 0
    positions = out["masked_lm_positions"][row]
    assert np.all(np.diff(positions[valid]) > 0) and np.all(positions[~valid] == 0)
    np.testing.assert_array_equal(out["masked_lm_ids"][row][valid], tokens[row, positions[valid]])
  np.testing.assert_array_equal(out["input_ids"][~chosen], tokens[~chosen])  # Others kept.
  # Every candidate position is as likely to be chosen: per position, its share of the
  # sequences where it is a candidate against the overall share.
  overall = chosen.sum() / candidates.sum()
  for position in range(1, S - 1):
    n = candidates[:, position].sum()
    within(chosen[:, position].sum() / n, overall, n, f"position {position}")


def test_chosen_tokens_become_mask_80_random_10_unchanged_10_percent(plain):
  tokens, out = plain
  chosen = _selected(tokens, out)
  n = chosen.sum()
  became = out["input_ids"][chosen]
  original = tokens[chosen]
  # A random replacement is uniform over V ids: it is [MASK] or the original 1/V of the time.
  within(np.mean(became == MASK), 0.8 + 0.1 / V, n, "[MASK]")
  within(np.mean(became == original), 0.1 + 0.1 / V, n, "unchanged")
  other = (became != MASK) & (became != original)
  within(np.mean(other), 0.1 * (1 - 2 / V), n, "random")
  assert set(became[other]) <= set(range(V)) and len(set(became[other])) > V // 2


def test_whole_word_masking_never_splits_a_word():
  tokens = sequences(seed=1)
  out = masked(masking(whole_word_mask=True), tokens)
  chosen = _selected(tokens, out)
  candidates = ~np.isin(tokens, [CLS, SEP, PAD])
  want = np.minimum(P, np.maximum(1, np.round(candidates.sum(1) * 0.15))).astype(int)
  words = 0
  for row in range(len(tokens)):
    start = None
    for position in range(S + 1):
      continues = (position < S and candidates[row, position] and position > 0
                   and tokens[row, position] in SUBWORDS and candidates[row, position - 1])
      if start is not None and not continues:  # The word [start, position) ended.
        assert len(set(chosen[row, start:position])) == 1, (row, start, position)
        words += 1
        start = None
      if position < S and candidates[row, position] and start is None:
        start = position
  assert words > 10 * N
  counts = chosen.sum(1)
  assert np.all(counts <= want) and np.mean(counts == want) > 0.9  # Google's greedy skip.
  assert chosen.sum() != _selected(tokens, masked(masking(), tokens)).sum()  # It grouped.


def test_masks_are_a_function_of_the_seed_and_the_key_alone(plain):
  tokens, out = plain
  # The same keys in another window (another batch, another stream position): the same masks.
  again = masked(masking(), tokens[100:107], first_key=100)
  for name in out:
    np.testing.assert_array_equal(again[name], out[name][100:107], err_msg=name)
  # Another key or another seed: other masks.
  shifted = masked(masking(), tokens[100:107], first_key=101)
  assert not np.array_equal(shifted["masked_lm_positions"], again["masked_lm_positions"])
  reseeded = masked(masking(seed=12), tokens[100:107], first_key=100)
  assert not np.array_equal(reseeded["masked_lm_positions"], again["masked_lm_positions"])


def test_masking_settings_that_do_not_fit_are_named():
  with pytest.raises(ValueError, match=r"masked_lm_prob \(0.0\) must be in \(0, 1\]"):
    masking(masked_lm_prob=0.0)
  with pytest.raises(ValueError, match=r"max_predictions \(0\) must be >= 1"):
    masking(max_predictions=0)
