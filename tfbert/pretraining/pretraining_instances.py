"""Sentence-pair instances with masked-LM targets, as google-research/bert makes them.

The in-memory half of google-research/bert `create_pretraining_data.py` (master, with
`do_whole_word_mask`): tokenized documents in, `TrainingInstance`s and their
`tf.train.Example`s out; `tfbert.pretraining.pretraining_data` reads the corpus and writes the
shards. Every draw comes from one `random.Random`, in Google's order, so a seed gives Google's data.

Shapes: S = max_seq_length (tokens including [CLS] and two [SEP]), P =
max_predictions_per_seq. `instance_to_example` zero-pads an instance into Google's
features and dtypes, which its `run_pretraining.py` reads unchanged:

  input_ids, input_mask, segment_ids   int64 [S]
  masked_lm_positions, masked_lm_ids   int64 [P]
  masked_lm_weights                    float [P]
  next_sentence_labels                 int64 [1]   (1 = B is a random segment)

Google's quirks are kept, as they define the data its checkpoints saw: the target length
is drawn once per document and pass; in a 1-document corpus the "random" B segment comes
from the same document; whole-word masking joins a "##" piece to the previous non-special
piece (even across [SEP] after truncation) and draws 80/10/10 per piece, not per word
(Model Garden draws per word).

`PretrainingDataConfig` holds all of the script's options; the functions here read its
instance fields, `tfbert.pretraining.pretraining_data` the vocab and shard ones.
"""

import collections
import dataclasses
import random
from typing import Callable

import tensorflow as tf

from tfbert.runtime import validation

SHARD_ASSIGNMENTS = ("round_robin", "contiguous")


@dataclasses.dataclass(frozen=True)
class PretrainingDataConfig:
  """Options of google-research/bert's `create_pretraining_data.py`, its defaults.

  Attributes:
    vocab_file: WordPiece vocab (one token per line); do_lower_case: True if uncased.
    max_seq_length: S, tokens per instance including [CLS] and two [SEP].
    max_predictions_per_seq: P, the most masked positions per instance.
    masked_lm_prob: fraction of an instance's tokens (specials counted, as Google) to predict.
    dupe_factor: passes over the corpus, each with fresh segments and masks.
    short_seq_prob: chance that a document pass aims at a random length in [2, S - 3].
    do_whole_word_mask: mask all WordPieces of a word together.
    random_seed: seed of the one `random.Random` everything is drawn from.
    num_shards: number of output TFRecord files.
    shard_assignment: "round_robin" (instance i to shard i % num_shards, as Google's
      writer) or "contiguous" (shard s holds the s-th block of the shuffled instances).
  """
  vocab_file: str
  do_lower_case: bool = True
  max_seq_length: int = 128
  max_predictions_per_seq: int = 20
  masked_lm_prob: float = 0.15
  dupe_factor: int = 10
  short_seq_prob: float = 0.1
  do_whole_word_mask: bool = False
  random_seed: int = 12345
  num_shards: int = 1
  shard_assignment: str = "round_robin"

  def __post_init__(self):
    validation.validate(self)

  def checks(self) -> list[validation.Check]:
    """The rules of a usable config (`tfbert.runtime.validation`)."""
    # max_seq_length >= 5: [CLS] a [SEP] b [SEP] with non-empty a, b; randint(2, S - 3).
    return [
        (self.max_seq_length >= 5, "max_seq_length must be >= 5"),
        (self.max_predictions_per_seq >= 1, "max_predictions_per_seq must be >= 1"),
        (0.0 < self.masked_lm_prob <= 1.0, "masked_lm_prob must be in (0, 1]"),
        (self.dupe_factor >= 1, "dupe_factor must be >= 1"),
        (0.0 <= self.short_seq_prob <= 1.0, "short_seq_prob must be in [0, 1]"),
        (self.num_shards >= 1, "num_shards must be >= 1"),
        validation.seed_check("random_seed", self.random_seed),
        (self.shard_assignment in SHARD_ASSIGNMENTS,
         f"shard_assignment must be one of {SHARD_ASSIGNMENTS}")]


@dataclasses.dataclass(frozen=True)
class TrainingInstance:
  """One sentence pair, unpadded; lists of int WordPiece ids / positions.

  Attributes:
    input_ids: `[CLS] a [SEP] b [SEP]` after masking (<= S); segment_ids: 0 up to the
      first [SEP], then 1. masked_lm_positions: increasing (<= P); masked_lm_ids: the
      original ids there. is_random_next: b is a random segment, not a's continuation.
  """
  input_ids: list
  segment_ids: list
  masked_lm_positions: list
  masked_lm_ids: list
  is_random_next: bool


# What the algorithm needs of the vocab; `subword_ids` are the "##" pieces.
VocabInfo = collections.namedtuple("VocabInfo", "size cls_id sep_id mask_id subword_ids")


def no_progress(message: Callable[[], str], force: bool = False) -> None:
  """The default `progress` callback: ignores the (lazily built) message."""
  del message, force


def truncate_seq_pair(tokens_a: list, tokens_b: list, max_num_tokens: int,
                      rng: random.Random) -> None:
  """Google's rule: cut the longer list (b on ties), from the front or back at random.

  Trims in place, one token and one `rng.random()` draw at a time, until
  len(tokens_a) + len(tokens_b) <= max_num_tokens; draws nothing if they already fit.
  """
  while len(tokens_a) + len(tokens_b) > max_num_tokens:
    trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    # google-research/bert: "sometimes truncate from the front and sometimes from
    # the back to add more randomness and avoid biases".
    if rng.random() < 0.5:
      del trunc_tokens[0]
    else:
      trunc_tokens.pop()


def create_masked_lm_predictions(ids: list, config: PretrainingDataConfig, vocab: VocabInfo,
                                 rng: random.Random) -> tuple:
  """Picks and corrupts the positions to predict, as google-research/bert does.

  num_to_predict = min(P, max(1, round(len(ids) * masked_lm_prob))). Each chosen
  piece becomes [MASK] 80% of the time, stays 10%, and becomes a uniformly random
  vocab id 10%. With whole-word masking a word is skipped if it would overshoot.
  [CLS] and [SEP] are never chosen.

  Args:
    ids: `[CLS] a [SEP] b [SEP]`, int WordPiece ids (<= S).
    config: the `PretrainingDataConfig`.
    vocab: the special and "##" ids of the vocab.
    rng: the random source, drawn from in Google's order.

  Returns:
    (output_ids, masked_lm_positions, masked_lm_ids): lists of int; output_ids has the
    length of `ids`, the positions (increasing) and their original ids <= P each.
  """
  groups = []  # Candidate positions; disjoint, so Google's `covered` set is moot.
  for i, token in enumerate(ids):
    if token in (vocab.cls_id, vocab.sep_id):
      continue
    if config.do_whole_word_mask and groups and token in vocab.subword_ids:
      groups[-1].append(i)
    else:
      groups.append([i])
  rng.shuffle(groups)
  num_to_predict = min(config.max_predictions_per_seq,
                       max(1, int(round(len(ids) * config.masked_lm_prob))))
  output, masked = list(ids), []
  for group in groups:
    if len(masked) >= num_to_predict:
      break
    if len(masked) + len(group) > num_to_predict:
      continue
    for index in group:
      if rng.random() < 0.8:
        output[index] = vocab.mask_id
      elif rng.random() >= 0.5:  # Else (< 0.5) keep the original token.
        output[index] = rng.randint(0, vocab.size - 1)
      masked.append(index)
  masked.sort()
  return output, masked, [ids[i] for i in masked]


def _random_segment(documents: list, document_index: int, target_length: int,
                    rng: random.Random) -> list:
  """Sentences from a random start in (if possible) another document."""
  for _ in range(10):  # Google's bounded retry; a 1-document corpus keeps its own.
    random_index = rng.randint(0, len(documents) - 1)
    if random_index != document_index:
      break
  random_document = documents[random_index]
  tokens = []
  for sentence in random_document[rng.randint(0, len(random_document) - 1):]:
    tokens.extend(sentence)
    if len(tokens) >= target_length:
      break
  return tokens


def _instance(tokens_a: list, tokens_b: list, is_random_next: bool,
              config: PretrainingDataConfig, vocab: VocabInfo,
              rng: random.Random) -> TrainingInstance:
  ids = [vocab.cls_id, *tokens_a, vocab.sep_id, *tokens_b, vocab.sep_id]
  output, positions, labels = create_masked_lm_predictions(ids, config, vocab, rng)
  return TrainingInstance(output, [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1),
                          positions, labels, is_random_next)


def create_instances_from_document(documents: list, document_index: int,
                                   config: PretrainingDataConfig, vocab: VocabInfo,
                                   rng: random.Random) -> list:
  """google-research/bert's sentence-pair instances of one document.

  Args:
    documents: the corpus; each document a list of sentences, each a list of int ids.
    document_index: the document to cut into instances (others give random B segments).
    config: the `PretrainingDataConfig`.
    vocab: the special and "##" ids of the vocab.
    rng: the random source, drawn from in Google's order.

  Returns:
    list of `TrainingInstance`, in document order.
  """
  document = documents[document_index]
  max_num_tokens = config.max_seq_length - 3  # [CLS], [SEP], [SEP].
  # Usually fill the sequence; sometimes (short_seq_prob) aim shorter to lessen
  # the pretraining / fine-tuning length mismatch (google-research/bert).
  target_seq_length = max_num_tokens
  if rng.random() < config.short_seq_prob:
    target_seq_length = rng.randint(2, max_num_tokens)
  instances, chunk, chunk_length, i = [], [], 0, 0
  while i < len(document):
    chunk.append(document[i])
    chunk_length += len(document[i])
    if i == len(document) - 1 or chunk_length >= target_seq_length:
      a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
      tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
      is_random_next = len(chunk) == 1 or rng.random() < 0.5
      if is_random_next:
        tokens_b = _random_segment(documents, document_index,
                                   target_seq_length - len(tokens_a), rng)
        i -= len(chunk) - a_end  # Put the unused sentences back.
      else:
        tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
      truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
      instances.append(_instance(tokens_a, tokens_b, is_random_next, config, vocab, rng))
      chunk, chunk_length = [], 0
    i += 1
  return instances


def create_training_instances(documents: list, config: PretrainingDataConfig, vocab: VocabInfo,
                              rng: random.Random, progress: Callable = no_progress) -> list:
  """All instances: shuffle documents, `dupe_factor` passes, shuffle instances.

  Args:
    documents: the corpus; each document a list of sentences, each a list of int ids.
    config: the `PretrainingDataConfig`.
    vocab: the special and "##" ids of the vocab.
    rng: the random source, drawn from in Google's order.
    progress: called with a message function after each document of each pass.

  Returns:
    list of `TrainingInstance`, shuffled.
  """
  documents = list(documents)
  rng.shuffle(documents)
  instances = []
  for dupe in range(config.dupe_factor):
    for index in range(len(documents)):
      instances.extend(create_instances_from_document(documents, index, config, vocab, rng))
      progress(lambda: f"pass {dupe + 1}/{config.dupe_factor}, document {index + 1}/"
               f"{len(documents)}, {len(instances)} instances")
  rng.shuffle(instances)
  return instances


def instance_to_example(instance: TrainingInstance, max_seq_length: int,
                        max_predictions_per_seq: int) -> tf.train.Example:
  """Zero-pads an instance into a `tf.train.Example` with Google's features and dtypes.

  Args:
    instance: the unpadded instance.
    max_seq_length: S, the padded length of input_ids, input_mask and segment_ids.
    max_predictions_per_seq: P, the padded length of the three masked_lm_* features.

  Returns:
    `tf.train.Example` with the features in the module docstring.

  Raises:
    ValueError: if the instance has more than S tokens or P predictions.
  """
  def padded(values, length):
    if len(values) > length:
      raise ValueError(f"{len(values)} values do not fit length {length}")
    return list(values) + [0] * (length - len(values))

  def int64s(values, length):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=padded(values, length)))

  s, p = max_seq_length, max_predictions_per_seq
  weights = padded([1.0] * len(instance.masked_lm_ids), p)
  return tf.train.Example(features=tf.train.Features(feature={
      "input_ids": int64s(instance.input_ids, s),
      "input_mask": int64s([1] * len(instance.input_ids), s),
      "segment_ids": int64s(instance.segment_ids, s),
      "masked_lm_positions": int64s(instance.masked_lm_positions, p),
      "masked_lm_ids": int64s(instance.masked_lm_ids, p),
      "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=weights)),
      "next_sentence_labels": int64s([int(instance.is_random_next)], 1)}))
