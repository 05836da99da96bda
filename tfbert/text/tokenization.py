"""BERT WordPiece tokenization: Google's reference and an exact in-graph twin.

* `reference_tokenizer` returns tf-models-official's `FullTokenizer`
  (`official.nlp.tools.tokenization`, google-research/bert's tokenizer): pure
  Python, one text at a time. It defines what is correct.
* `WordPieceTokenizer` runs in the TensorFlow graph (eagerly, in `tf.function`,
  in a SavedModel), batched, gives the reference's ids exactly, and also byte
  offsets into the original text (for SQuAD answer recovery).

Why tensorflow_text's tokenizers are not used as they come: with
`lower_case=True` (`BertTokenizer`) or `lower_case_nfd_strip_accents=True`
(`FastBertTokenizer`) they lower-case with ICU NFKC_Casefold, not Python's
`lower()` + NFD + strip `Mn`; both turn control/format characters into a space
where Google deletes them, and limit words in bytes, not characters. Measured on
`sample_text.txt` plus every SQuAD v1.1 dev context and question (12,671
texts), `FastBertTokenizer` gives other ids for 19 texts uncased ("½" becomes
"1⁄2", "ᴵᴺᵀ" becomes "int", ...) and 0 cased, but also differs cased on 4 of
the 17 hand-written strings in the tests (zero-width space, soft hyphen, ...).
`BertTokenizer`'s offsets also point into the normalized text.

How `WordPieceTokenizer` reproduces the reference:

1. Per character, with a table of Google's `BasicTokenizer` rules and a regex
   for the final sigma; see `tfbert.text.text_normalization`, which also states the
   one known residual difference.
2. Words are the runs between spaces. As in the reference, a word longer than
   `max_chars_per_word` characters is one [UNK]; other words go through
   `tensorflow_text.FastWordpieceTokenizer` (greedy longest-match-first).

Offsets from `tokenize_with_offsets` are UTF-8 byte offsets, half-open
`[start, end)`, into the ORIGINAL text (before any normalization):

* `start` is the first byte of the original character whose normalization
  gives the piece's first character.
* `end` is the start of the next original character that produces any output
  (whitespace, punctuation, the next piece), or the end of the text. So the
  pieces of a word tile it with no gap, and characters that normalization
  deletes (a combining accent, a soft hyphen, a zero-width space) go with the
  piece before them.
* Normalization can change lengths ("É" is 2 bytes and becomes "e"; "İ"
  becomes "i"); spans always cover whole original characters.
* One character can normalize to several (uncased NFD turns a Hangul syllable
  into 2-3 jamo). When a piece boundary falls inside it, each piece touching
  it gets all of its bytes, so those spans overlap.
* "##" is not in the text or the span; an [UNK] spans its whole word.

Shape legend: B texts, C characters, N normalized characters, W words,
T wordpieces, P wordpieces of one word; `_all` means flattened over the batch.
"""

import collections

import tensorflow as tf
import tensorflow_text as tf_text
from official.nlp.tools import tokenization as google_tokenization

from tfbert.runtime import files, validation
from tfbert.text.text_normalization import (
  FINAL_SIGMA_REWRITE,
  final_sigma_regex,
  normalization_table,
)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# tf-models-official's `WordpieceTokenizer` default; google-research/bert used
# 200. A word (after basic tokenization) longer than this becomes [UNK].
MAX_CHARS_PER_WORD = 400

# Characters a vocab token cannot hold: `tf_text.FastWordpieceTokenizer` fails building its
# trie on a NUL ("Cannot traverse from parent id ... This should never happen"). Measured
# (tensorflow-text 2.20) on every other C0 control, DEL, C1 controls, U+00A0, U+00AD, U+200B,
# U+2028/9, U+FEFF, U+FFFE/F, U+10FFFF, private use and a combining mark: all held.
_UNHOLDABLE = frozenset("\x00")

# The graph code has no tensor-dependent Python control flow; skipping
# AutoGraph's source conversion saves ~4 s per trace inside `tf.function`.
_NO_AUTOGRAPH = tf.autograph.experimental.do_not_convert


def vocab_entries(vocab_file: str) -> int:
  """How many entries (lines) the vocabulary `vocab_file` has, read without its checks
  (`load_vocab`'s)."""
  return len(files.read_text(vocab_file).splitlines())


# A model's embedding table may have more rows than its vocabulary has entries: sizes are
# often rounded up to a multiple of 8, 64 or 128 for faster matmuls (the padding rows are
# never looked up). More than this many rows fewer is another vocabulary: the cased BERT
# vocab (28,996 entries) beside an uncased model (30,522 rows) is 1,526 short.
PADDING_ROWS = 128


def check_vocab_fits(entries: int, vocab_size: int, vocab: str = "the vocabulary",
                     model_config: str = "the model config", trained: bool = False) -> None:
  """A vocabulary of `entries` has no more entries than the embedding table of a model of
  `vocab_size` (its ids past vocab_size fail at the first lookup, in a graph error naming
  neither), and, for `trained` weights, not fewer by more than a table's padding
  (`PADDING_ROWS`): such a vocabulary's ids name other tokens than the ones the weights were
  trained on, and every text would be read as other words without a word.

  Args:
    entries: the vocabulary's entries.
    vocab_size: the model's `vocab_size`.
    vocab: the vocabulary, as a message names it (its flag, its path).
    model_config: where the model's config comes from.
    trained: whether the model's weights were trained (a checkpoint, a Hugging Face or
      tfbert model), not initialized at random (pretraining from a config may leave rows of
      a larger table unused).

  Raises:
    ValueError: naming both, both sizes and what to do.
  """
  if entries > vocab_size:
    raise ValueError(
        f"{vocab} has {entries} entries, more than the vocab_size {vocab_size} of "
        f"{model_config}: pass the vocabulary that config was made for, or fix vocab_size")
  if trained and vocab_size - entries >= PADDING_ROWS:
    raise ValueError(
        f"{vocab} has {entries} entries, {vocab_size - entries} fewer than the vocab_size "
        f"{vocab_size} of {model_config} (a table padded for speed has fewer than "
        f"{PADDING_ROWS} rows more): its ids would name other tokens than the ones the "
        "weights were trained on. Pass the vocabulary the model was trained with")


def load_vocab(vocab_file):
  """Reads a WordPiece vocab: one token per line, the line number is its id.

  Args:
    vocab_file: path of a UTF-8 `vocab.txt` as released with BERT.

  Returns:
    list of str, the tokens in id order (surrounding whitespace stripped, as
    Google's `load_vocab` does).

  Raises:
    FileNotFoundError: if `vocab_file` does not exist (or is a symbolic link to
      nothing, named as one).
    ValueError: if it is not UTF-8 (naming the line and the bad bytes), is
      empty, has a blank or duplicate line, a carriage return inside a line
      (`_lines`), a token `FastWordpieceTokenizer` cannot hold (`_UNHOLDABLE`,
      naming the line and the character), or lacks one of `SPECIAL_TOKENS`.
      Every message names the file.
  """
  try:
    data = files.read_bytes(vocab_file)  # A local path or a URL (`gs://...`).
  except FileNotFoundError:
    raise FileNotFoundError(
        files.missing_file_message(vocab_file, "WordPiece vocab file")) from None
  try:
    tokens = [line.strip() for line in _lines(data.decode("utf-8"), vocab_file)]
  except UnicodeDecodeError:
    raise ValueError(_not_utf8(vocab_file)) from None
  if not tokens:
    raise ValueError(f"WordPiece vocab file is empty: {vocab_file}")
  if tokens[0].startswith("\ufeff"):  # Not dropped: the file is copied beside every output.
    raise ValueError(f"WordPiece vocab {vocab_file} starts with a byte-order mark (U+FEFF, "
                     "as some editors save): other tools (Hugging Face, google-research/bert) "
                     f"would read its first token as {tokens[0]!r}; save it without one")
  seen = {}
  for line, token in enumerate(tokens, start=1):
    if not token:
      raise ValueError(f"Blank line {line} in WordPiece vocab {vocab_file}")
    bad = _UNHOLDABLE.intersection(token)
    if bad:
      char = min(bad)
      raise ValueError(f"WordPiece vocab {vocab_file}: line {line}, token {token!r}, has "
                       f"{char!r} (U+{ord(char):04X}) at character {token.index(char) + 1}: "
                       "tensorflow_text's WordPiece cannot hold it (building the tokenizer "
                       "fails) and no text matches it (tokenization deletes it); remove the "
                       "character or the line")
    if token in seen:
      raise ValueError(f"Token {token!r} is on lines {seen[token]} and {line} "
                       f"of WordPiece vocab {vocab_file}")
    seen[token] = line
  missing = [t for t in SPECIAL_TOKENS if t not in seen]
  if missing:
    raise ValueError(f"WordPiece vocab {vocab_file} lacks special tokens "
                     f"{missing}; a BERT vocab needs all of {SPECIAL_TOKENS}")
  return tokens


def _lines(text, vocab_file):
  r"""The lines of a vocab's `text`, split at "\n" (a "\r\n" end's "\r" is stripped later).

  Raises:
    ValueError: naming `vocab_file:line` for a carriage return ("\r") that is not part of
      a line's "\r\n" end: Python's text mode and Hugging Face split the line there, into
      two tokens, while Google's `FullTokenizer` (reading to "\n") keeps one, so every id
      after it would differ between them.
  """
  lines = text.split("\n")
  if lines[-1] == "":
    lines.pop()  # The final line end ends the last line; it starts none.
  for number, line in enumerate(lines, start=1):
    if "\r" in line.removesuffix("\r"):
      raise ValueError(f"WordPiece vocab {vocab_file}:{number}: a carriage return (\\r) "
                       "inside the line (not its \\r\\n end): Google's FullTokenizer reads "
                       "the line as one token, Hugging Face and Python's text mode as two, so "
                       "token ids would differ between them; remove the \\r or end the line "
                       "there with \\n")
  return lines


def _not_utf8(vocab_file):
  """The message for a vocab that is not UTF-8: its first bad line and bytes."""
  with files.open_file(vocab_file, "rb") as f:
    lines = f.read().splitlines()  # b"\n", b"\r\n", b"\r": text mode's line ends.
  for number, line in enumerate(lines, start=1):
    try:
      line.decode("utf-8")
    except UnicodeDecodeError as error:
      return (f"WordPiece vocab {vocab_file}: line {number} is not UTF-8 (bytes "
              f"{line[error.start:error.end]!r} at column {error.start + 1}); a BERT "
              f"vocab must be UTF-8")
  return f"WordPiece vocab {vocab_file} is not UTF-8"


def reference_tokenizer(vocab_file, do_lower_case):
  """Returns Google's reference tokenizer (tf-models-official `FullTokenizer`).

  Args:
    vocab_file: path of the WordPiece vocab; checked with `load_vocab` first so
      that a bad file fails with a clear message.
    do_lower_case: True for uncased checkpoints, False for cased ones.

  Returns:
    `official.nlp.tools.tokenization.FullTokenizer`; ids of a text are
    `tok.convert_tokens_to_ids(tok.tokenize(text))`.
  """
  load_vocab(vocab_file)
  return google_tokenization.FullTokenizer(
      vocab_file, validation.plain_bool("do_lower_case", do_lower_case))


# Intermediate results, flattened over the batch. Offsets are int64 bytes.
_Chars = collections.namedtuple(
    "_Chars", "code_points rows starts ends text_lengths")
_Normalized = collections.namedtuple(
    "_Normalized", "code_points chars rows byte_ends byte_lengths")
_Words = collections.namedtuple(
    "_Words", "strings lengths rows byte_starts byte_lengths")


class WordPieceTokenizer(tf.Module):
  """In-graph BERT tokenizer with the exact ids of Google's `FullTokenizer`.

  Usable eagerly, inside `tf.function` and in a SavedModel (all state is
  constant tensors and a static hash table). See the module docstring for the
  normalization and the meaning of the offsets.

  Attributes:
    vocab_size: int, number of vocab entries.
    pad_id, unk_id, cls_id, sep_id, mask_id: int ids of [PAD], [UNK], [CLS],
      [SEP] and [MASK].
  """

  def __init__(self, vocab_file, do_lower_case,
               max_chars_per_word=MAX_CHARS_PER_WORD, name=None):
    """Builds the tokenizer (a few seconds the first time per casing).

    Args:
      vocab_file: path of the WordPiece vocab (see `load_vocab`).
      do_lower_case: True for uncased vocabs (lower-case, NFD, strip accents).
      max_chars_per_word: words longer than this many characters become
        [UNK]; 400 matches tf-models-official, 200 google-research/bert.
      name: optional `tf.Module` name.
    """
    super().__init__(name=name)
    do_lower_case = validation.plain_bool("do_lower_case", do_lower_case)  # "false" is truthy.
    self.vocab_file = vocab_file
    self.do_lower_case = do_lower_case
    self.max_chars_per_word = max_chars_per_word
    vocab = load_vocab(vocab_file)
    # Only small Python state: tf.Module walks its attributes when saving.
    self._vocab_size = len(vocab)
    self._special_ids = {token: vocab.index(token) for token in SPECIAL_TOKENS}
    keys, values = normalization_table(do_lower_case)
    self._char_table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(keys, tf.int64), tf.range(len(keys), dtype=tf.int64)),
        default_value=-1)
    # Table values as code points: row k of this [K, (L)] is value k.
    values = tf.strings.unicode_decode(tf.constant(values, tf.string), "UTF-8")
    self._value_code_points = values.flat_values
    self._value_starts = values.row_starts()
    self._value_lengths = values.row_lengths()
    self._final_sigma = final_sigma_regex() if do_lower_case else None
    # Words reaching the wordpiece step have at most `max_chars_per_word`
    # characters of at most 4 bytes, so the byte limit never decides.
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=vocab, suffix_indicator="##",
        max_bytes_per_word=4 * max_chars_per_word, token_out_type=tf.int32,
        unknown_token="[UNK]", no_pretokenization=True)

  @property
  def vocab_size(self):
    return self._vocab_size

  @property
  def pad_id(self):
    return self._special_ids["[PAD]"]

  @property
  def unk_id(self):
    return self._special_ids["[UNK]"]

  @property
  def cls_id(self):
    return self._special_ids["[CLS]"]

  @property
  def sep_id(self):
    return self._special_ids["[SEP]"]

  @property
  def mask_id(self):
    return self._special_ids["[MASK]"]

  @_NO_AUTOGRAPH
  def tokenize(self, texts):
    """Wordpiece ids of each text, flattened over words.

    Args:
      texts: tf.string Tensor of shape [B] (UTF-8; invalid bytes are dropped,
        as Google's `decode("utf-8", "ignore")` does).

    Returns:
      int32 RaggedTensor of shape [B, (T)], equal to
      `convert_tokens_to_ids(tokenize(text))` of Google's `FullTokenizer`.
    """
    texts = _as_batch(texts)
    words = _split_words(self._normalize(self._decode(texts)))
    ids = self._wordpiece.tokenize(self._unk_if_too_long(words))  # [W, (P)]
    return _group_by_text(ids, words.rows, texts)

  @_NO_AUTOGRAPH
  def tokenize_with_offsets(self, texts):
    """Wordpiece ids plus their byte spans in the original texts.

    Args:
      texts: tf.string Tensor of shape [B].

    Returns:
      (ids, start_bytes, end_bytes): int32, int64, int64 RaggedTensors of
      shape [B, (T)]. `texts[b][start_bytes[b, t]:end_bytes[b, t]]` is the
      original text of piece t (see the module docstring for the exact rule).
    """
    texts = _as_batch(texts)
    chars = self._decode(texts)
    normalized = self._normalize(chars)
    words = _split_words(normalized)
    ids, starts, ends = self._wordpiece.tokenize_with_offsets(
        self._unk_if_too_long(words))                         # [W, (P)]
    piece_word = ids.value_rowids()                           # [T_all]
    too_long = tf.gather(words.lengths, piece_word) > self.max_chars_per_word
    ends = tf.where(too_long, tf.gather(words.byte_lengths, piece_word),
                    ends.flat_values)
    base = tf.gather(words.byte_starts, piece_word)
    starts, ends = _original_spans(
        chars, normalized, tf.gather(words.rows, piece_word),
        base + starts.flat_values, base + ends)
    return tuple(_group_by_text(ids.with_flat_values(values), words.rows, texts)
                 for values in (ids.flat_values, starts, ends))

  def _decode(self, texts):
    """The original characters of `texts` [B], flattened over the batch."""
    lengths = tf.cast(tf.strings.length(texts), tf.int64)
    code_points, starts = tf.strings.unicode_decode_with_offsets(
        texts, "UTF-8", errors="replace")                     # [B, (C)]
    if self._final_sigma is not None:
      # On re-encoded text, so that invalid bytes are U+FFFD, which Google
      # drops and the regex skips. "Σ" -> "ς" keeps the code point count.
      code_points = tf.strings.unicode_decode(tf.strings.regex_replace(
          tf.strings.unicode_encode(code_points, "UTF-8"), self._final_sigma,
          FINAL_SIGMA_REWRITE), "UTF-8")
    rows = code_points.value_rowids()
    count = tf.size(rows, out_type=tf.int64)
    index = tf.range(count)
    is_last = tf.equal(index + 1, tf.gather(code_points.row_limits(), rows))
    # A character ends where the next one starts, the last one at text end.
    next_starts = tf.gather(starts.flat_values,
                            tf.minimum(index + 1, count - 1))
    return _Chars(
        code_points=code_points.flat_values, rows=rows,
        starts=starts.flat_values, text_lengths=lengths,
        ends=tf.where(is_last, tf.gather(lengths, rows), next_starts))

  def _normalize(self, chars):
    """Google's basic tokenization of every character, as code points."""
    index = self._char_table.lookup(tf.cast(chars.code_points, tf.int64))
    mapped = index >= 0
    index = tf.maximum(index, 0)
    lengths = tf.where(mapped, tf.gather(self._value_lengths, index), 1)
    # Where each character's output sits in concat(table values, chars).
    pool = tf.concat([self._value_code_points, chars.code_points], 0)
    own = tf.size(self._value_code_points, out_type=tf.int64) + tf.range(
        tf.size(chars.code_points, out_type=tf.int64))
    sources = tf.where(mapped, tf.gather(self._value_starts, index), own)
    positions = tf.ragged.range(sources, sources + lengths)   # [C_all, (L)]
    code_points = tf.gather(pool, positions.flat_values)      # [N_all]
    origin = positions.value_rowids()
    byte_lengths = _utf8_lengths(code_points)
    return _Normalized(code_points=code_points, chars=origin,
                       rows=tf.gather(chars.rows, origin),
                       byte_ends=tf.cumsum(byte_lengths),
                       byte_lengths=byte_lengths)

  def _unk_if_too_long(self, words):
    """Word strings [W], "[UNK]" (itself a vocab token) for over-long words."""
    return tf.where(words.lengths > self.max_chars_per_word, "[UNK]",
                    words.strings)


def _as_batch(texts):
  texts = tf.convert_to_tensor(texts, tf.string)
  if texts.shape.rank is not None and texts.shape.rank != 1:
    raise ValueError(
        f"texts must be a tf.string Tensor of shape [B], got {texts.shape}")
  return texts


def _utf8_lengths(code_points):
  """int64 UTF-8 byte length of each int32 code point."""
  return 1 + sum(tf.cast(code_points >= limit, tf.int64)
                 for limit in (0x80, 0x800, 0x10000))


def _split_words(normalized):
  """Words: maximal runs of non-space normalized code points in one text.

  Returns:
    _Words of shape [W_all]: UTF-8 strings, lengths in characters, text
    index, global normalized byte start and byte length.
  """
  points, rows = normalized.code_points, normalized.rows      # [N_all]
  is_word = tf.not_equal(points, ord(" "))
  index = tf.range(tf.size(points, out_type=tf.int64))
  previous = tf.maximum(index - 1, 0)
  continues = (index > 0) & tf.gather(is_word, previous) & tf.equal(
      tf.gather(rows, previous), rows)
  begins = is_word & ~continues
  word_of = tf.cumsum(tf.cast(begins, tf.int64)) - 1
  code_points = tf.RaggedTensor.from_value_rowids(
      tf.boolean_mask(points, is_word), tf.boolean_mask(word_of, is_word),
      nrows=tf.reduce_sum(tf.cast(begins, tf.int64)))         # [W, (L)]
  first = tf.boolean_mask(index, begins)
  last = first + code_points.row_lengths() - 1
  byte_starts = tf.gather(normalized.byte_ends - normalized.byte_lengths, first)
  byte_ends = tf.gather(normalized.byte_ends, last)
  return _Words(strings=tf.strings.unicode_encode(code_points, "UTF-8"),
                lengths=code_points.row_lengths(), rows=tf.gather(rows, first),
                byte_starts=byte_starts, byte_lengths=byte_ends - byte_starts)


def _original_spans(chars, normalized, rows, norm_starts, norm_ends):
  """Maps pieces' global normalized byte spans to spans in their original text.

  Args:
    chars: _Chars of the batch.
    normalized: _Normalized of the batch.
    rows: int64 [T_all], the text of each piece.
    norm_starts, norm_ends: int64 [T_all], global normalized byte spans.

  Returns:
    (starts, ends): int64 [T_all] byte offsets into each piece's own text,
    following the rule in the module docstring.
  """
  def code_point_at(norm_byte):
    return tf.searchsorted(normalized.byte_ends, norm_byte, side="right",
                           out_type=tf.int64)

  count = tf.size(normalized.code_points, out_type=tf.int64)
  following = code_point_at(norm_ends)
  has_next = following < count
  following = tf.minimum(following, count - 1)
  has_next &= tf.equal(tf.gather(normalized.rows, following), rows)
  first_char = tf.gather(normalized.chars, code_point_at(norm_starts))
  last_char = tf.gather(normalized.chars, code_point_at(norm_ends - 1))
  next_char = tf.gather(normalized.chars, following)
  ends = tf.where(
      ~has_next, tf.gather(chars.text_lengths, rows),
      tf.where(tf.equal(next_char, last_char),  # Split inside one character.
               tf.gather(chars.ends, last_char),
               tf.gather(chars.starts, next_char)))
  return tf.gather(chars.starts, first_char), ends


def _group_by_text(per_word, word_rows, texts):
  """[W, (P)] ragged values per word -> [B, (T)] per text."""
  return tf.RaggedTensor.from_value_rowids(
      per_word, word_rows, nrows=tf.shape(texts, tf.int64)[0]).merge_dims(1, 2)
