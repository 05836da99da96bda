"""Masks drawn as batches are formed (RoBERTa's dynamic masking), a pure function of position.

google-research/bert draws the masks once, when the TFRecords are written
(`tfbert.pretraining.pretraining_instances`): every epoch shows the same masks. Here they
are drawn in the input pipeline, from a counter-based seed: the example's key (epoch, file,
block within the file: where it sits in the data, not in a process's history) folded into
the run's seed with `tf.random.experimental.stateless_fold_in`, then `tf.random.stateless_*`
draws. So the masks of an example depend only on (seed, key): a resumed run draws what the
uninterrupted run drew, two workers what one process with two replicas draws, and each
epoch brings new masks.

The rule is google-research/bert's (`create_masked_lm_predictions`): the candidates are
every token but [CLS], [SEP] and [PAD]; num_to_predict = min(P, max(1, round(rate * number
of candidates))) (Google counts [CLS] and [SEP] too, which a packed block of S tokens only
holds a few of); candidates (whole words with `whole_word_mask`: a "##" piece joins the
piece before it) are visited in a random order and taken unless a word would overshoot
num_to_predict; each chosen piece becomes [MASK] with probability 0.8, a uniformly random id
of the vocabulary with 0.1 (as Google's, possibly a special token), and stays with 0.1.

Shape legend: W examples of a window, S seq_length, P max_predictions.
"""

import dataclasses

import tensorflow as tf

from tfbert.runtime import validation

# Folded into the run's seed first, so the masks draw from another stream than anything
# else seeded with the same run seed (tf.data shuffles, dropout).
_MASK_STREAM = 0x6D61736B  # "mask"
_MASK, _RANDOM = 0.8, 0.9  # u < 0.8: [MASK]; 0.8 <= u < 0.9: unchanged; else a random id.


@dataclasses.dataclass(frozen=True)
class Masking:
  """How masks are drawn.

  Attributes:
    max_predictions: P, the most masked positions per sequence (`max_predictions_per_seq`).
    vocab_size: ids of the vocabulary (random replacements are drawn from [0, vocab_size)).
    cls_id, sep_id, pad_id, mask_id: the special ids (never masked; [MASK] replaces).
    subword_ids: ids of the vocabulary's "##" continuation pieces (whole-word masking).
    masked_lm_prob: the share of candidates to mask (google-research/bert: 0.15).
    whole_word_mask: mask all pieces of a word together.
    seed: the run's seed.
  """
  max_predictions: int
  vocab_size: int
  cls_id: int
  sep_id: int
  pad_id: int
  mask_id: int
  subword_ids: tuple = ()
  masked_lm_prob: float = 0.15
  whole_word_mask: bool = False
  seed: int = 0

  def __post_init__(self):
    validation.validate(self)

  def checks(self) -> list:
    return [(0.0 < self.masked_lm_prob <= 1.0,
             f"masked_lm_prob ({self.masked_lm_prob}) must be in (0, 1]"),
            (self.max_predictions >= 1,
             f"max_predictions ({self.max_predictions}) must be >= 1")]


def example_seed(seed: int, key: tf.Tensor) -> tf.Tensor:
  """The stateless seed of one example: `key` (int64 [K], its place in the data) folded
  into (seed, the mask stream). Returns an int64 [2] seed for `tf.random.stateless_*`."""
  folded = tf.constant([seed, _MASK_STREAM], tf.int64)
  for index in range(key.shape[0]):
    folded = tf.random.experimental.stateless_fold_in(folded, key[index])
  return folded


def draws(masking: Masking, key: tf.Tensor, seq_length: int) -> dict:
  """The random numbers one example's masks take, from its key alone.

  Args:
    key: int64 [K], the example's place in the data.

  Returns:
    dict of float32 `order` [S] (the visiting order of candidates), float32 `action` [S]
    (which corruption), int32 `random_ids` [S] (the random replacements).
  """
  seeds = tf.random.experimental.stateless_split(example_seed(masking.seed, key), 3)
  return {"order": tf.random.stateless_uniform([seq_length], seeds[0]),
          "action": tf.random.stateless_uniform([seq_length], seeds[1]),
          "random_ids": tf.random.stateless_uniform([seq_length], seeds[2], minval=0,
                                                    maxval=masking.vocab_size,
                                                    dtype=tf.int32)}


def _words(masking: Masking, tokens: tf.Tensor):
  """The words of a window: candidates [W, S], True where a word starts [W, S], each
  position's word as an index into the flattened window [W, S], and each word's length at
  the position where it starts [W, S] (0 elsewhere)."""
  special = tf.reduce_any(tf.equal(tokens[..., None], tf.constant(
      [masking.cls_id, masking.sep_id, masking.pad_id], tokens.dtype)), axis=-1)
  candidate = ~special                                                      # [W, S]
  starts = candidate
  if masking.whole_word_mask and masking.subword_ids:
    subword = tf.reduce_any(tf.equal(tokens[..., None], tf.constant(
        masking.subword_ids, tokens.dtype)), axis=-1)
    previous = tf.pad(candidate[:, :-1], [[0, 0], [1, 0]])  # A block's first piece starts.
    starts = candidate & ~(subword & previous)
  word = tf.maximum(tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1, 0)    # [W, S]
  word += tf.range(tf.shape(tokens)[0])[:, None] * tf.shape(tokens)[1]
  lengths = tf.math.unsorted_segment_sum(
      tf.reshape(tf.cast(candidate, tf.int32), [-1]), tf.reshape(word, [-1]), tf.size(tokens))
  return candidate, starts, word, tf.where(starts, tf.gather(lengths, word), 0)


def _take_words(order_keys, starts, lengths, num_to_predict):
  """Google's greedy pick: words in random order, each taken unless it would overshoot.

  Returns bool [W, S], True at the start position of each word taken.
  """
  keys = tf.where(starts, order_keys, 2.0)                      # Non-starts last.
  order = tf.argsort(keys, axis=1, stable=True)                 # [W, S]
  ordered_lengths = tf.gather(lengths, order, batch_dims=1)

  def step(carry, length):
    total, _ = carry
    take = (length > 0) & (total + length <= num_to_predict)
    return total + tf.where(take, length, 0), take

  _, taken = tf.scan(step, tf.transpose(ordered_lengths),
                     initializer=(tf.zeros_like(num_to_predict),
                                  tf.zeros_like(num_to_predict, tf.bool)))
  rank = tf.argsort(order, axis=1, stable=True)                 # Inverse permutation.
  return tf.gather(tf.transpose(taken), rank, batch_dims=1)


def mask_window(masking: Masking, tokens: tf.Tensor, drawn: dict) -> dict:
  """Masks a window of packed sequences with their `draws`.

  Args:
    tokens: int32 [W, S] WordPiece ids ([CLS] ... [SEP]).
    drawn: `draws` of each example, stacked: float32 `order`, `action` [W, S], int32
      `random_ids` [W, S].

  Returns:
    dict: int32 `input_ids` [W, S] (corrupted), int32 `masked_lm_positions`,
    `masked_lm_ids` [W, P] (increasing positions, then 0) and float32 `masked_lm_weights`
    [W, P] (1.0 for a prediction, 0.0 for padding), as the TFRecords hold them.
  """
  candidate, starts, word, lengths = _words(masking, tokens)
  count = tf.reduce_sum(tf.cast(candidate, tf.float32), axis=1)             # [W]
  num_to_predict = tf.minimum(masking.max_predictions, tf.maximum(
      1, tf.cast(tf.round(count * masking.masked_lm_prob), tf.int32)))
  taken_start = _take_words(drawn["order"], starts, lengths, num_to_predict)
  taken_word = tf.math.unsorted_segment_max(
      tf.reshape(tf.cast(taken_start, tf.int32), [-1]), tf.reshape(word, [-1]),
      tf.size(tokens))
  selected = candidate & (tf.gather(taken_word, word) > 0)
  action = drawn["action"]
  corrupted = tf.where(selected & (action < _MASK), masking.mask_id, tokens)
  corrupted = tf.where(selected & (action >= _RANDOM), drawn["random_ids"], corrupted)
  width = tf.shape(tokens)[1]
  positions = tf.range(width)[None, :]
  first = tf.sort(tf.where(selected, positions, width + positions), axis=1)
  first = first[:, :masking.max_predictions]
  missing = masking.max_predictions - tf.shape(first)[1]  # P > S: pad the tail.
  first = tf.pad(first, [[0, 0], [0, missing]], constant_values=width)
  valid = first < width
  masked_positions = tf.where(valid, first, 0)
  return {"input_ids": corrupted,
          "masked_lm_positions": masked_positions,
          "masked_lm_ids": tf.where(valid, tf.gather(tokens, masked_positions, batch_dims=1), 0),
          "masked_lm_weights": tf.cast(valid, tf.float32)}
