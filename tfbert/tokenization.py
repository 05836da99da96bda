"""BERT WordPiece tokenization: Google's reference and an exact in-graph twin.

Two tokenizers that give identical wordpiece ids:

* `reference_tokenizer` returns tf-models-official's `FullTokenizer`
  (`official.nlp.tools.tokenization`, a fork of google-research/bert's
  `tokenization.py`): pure Python, one string at a time. It is the definition
  of "correct".
* `WordPieceTokenizer` runs in the TensorFlow graph (inside `tf.function`, in a
  SavedModel), batched, and also returns byte offsets into the original text.

Why not `tensorflow_text.BertTokenizer(lower_case=True)` or
`FastBertTokenizer(lower_case_nfd_strip_accents=True)` as they come: they
lower-case with ICU's NFKC_Casefold, and both replace control and format
characters by a space, where Google removes them. Measured on `sample_text.txt`
plus every SQuAD v1.1 dev context and question (12,671 texts), the uncased
vocab gives different ids for 19 texts (NFKC turns "½" into "1⁄2", "ᴵᴺᵀ" into
"int", ...); the cased vocab matches there, but "ab\\u200bcd" still splits into
two words. Their offsets are also into the normalized text (`BertTokenizer`).

What `WordPieceTokenizer` does instead:

1. Per-character normalization table. Google's `BasicTokenizer` is, apart from
   two context rules below, a per-character map followed by splitting on
   spaces: each character is removed (NUL, U+FFFD, control `Cc` and format
   `Cf` except tab/newline/CR), turned into a space (whitespace), or replaced
   by its own lower-cased, NFD-decomposed, `Mn`-stripped form (uncased only);
   punctuation is then isolated by spaces, and CJK ideographs (judged on the
   original character, before lower-casing, as Google does) too. The table is
   built once per casing by running the reference module's own predicates
   (`_is_control`, `_is_whitespace`, `_is_punctuation`, `_is_chinese_char`,
   `_run_strip_accents`) with Python's `unicodedata` on every code point, so the
   Unicode version and every character class are the reference's by
   construction. In the graph it is one `tf.lookup.StaticHashTable` lookup per
   code point.
2. Final sigma (uncased only). Python's `str.lower()` maps "Σ" to "ς" at the
   end of a word (Unicode `Final_Sigma`: preceded by a cased letter and not
   followed by one, skipping case-ignorable characters). A `regex_replace` on
   the original text does this first, with the cased and case-ignorable
   classes probed from `str.lower()` itself ("Σ" and "ς" have the same UTF-8
   length, so offsets are unchanged).
3. Words are the space-separated runs of the normalized text; a word longer
   than `max_chars_per_word` characters becomes `[UNK]` (as the reference does);
   every other word goes through `tensorflow_text.FastWordpieceTokenizer`
   (greedy longest-match-first, the same algorithm as Google's).

Residual difference (the only one known): NFD reorders adjacent combining
marks by combining class, which a per-character table cannot do. After `Mn`
marks are stripped this is visible only when two of the 25 spacing (`Mc`)
marks with a non-zero combining class (e.g. U+1D16D, U+1D165, U+302E) stand in
non-canonical order in one word. None of the 25 is in Google's cased or uncased
vocab, so such a word is `[UNK]` either way and the ids still agree.

Offsets (`tokenize_with_offsets`) are byte offsets into the ORIGINAL UTF-8
text, half-open `[start, end)`:

* `start` is the first byte of the original character that produced the
  piece's first normalized character.
* `end` is the first byte of the next original character that produces any
  normalized output (a space, punctuation or the next piece), or the text's
  length. So the pieces of one word tile it without gaps, and characters that
  normalization removes (accents written as combining marks, soft hyphens,
  zero-width spaces, ...) belong to the piece before them.
* Normalization may change lengths ("É" is 2 bytes and becomes "e"; "İ" becomes
  "i"); offsets always cover whole original characters.
* One original character can expand into several normalized characters (a
  Hangul syllable decomposes into 2-3 jamo under NFD). If a piece boundary
  falls inside such an expansion, every piece touching it gets the whole
  character's bytes, so those spans overlap.
* `[UNK]` covers its whole word; "##" is not in the text and not in the span.

Shape legend: B = texts in the batch, W = words, T = wordpieces, C = characters.
"""

import functools
import unicodedata

import tensorflow as tf
import tensorflow_text as tf_text
from official.nlp.tools import tokenization as google_tokenization

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# tf-models-official's `WordpieceTokenizer` default; google-research/bert used
# 200. A word (after basic tokenization) longer than this becomes [UNK].
MAX_CHARS_PER_WORD = 400

_SIGMA, _FINAL_SIGMA = "\u03a3", "\u03c2"
_GOOGLE_BASIC = google_tokenization.BasicTokenizer(do_lower_case=True)


def load_vocab(vocab_file):
  """Reads a WordPiece vocab: one token per line, the line number is its id.

  Args:
    vocab_file: path of a UTF-8 `vocab.txt` as released with BERT.

  Returns:
    list of str, the tokens in id order (surrounding whitespace stripped, as
    Google's `load_vocab` does).

  Raises:
    FileNotFoundError: if `vocab_file` does not exist.
    ValueError: if it is empty, has a blank or duplicate line, or lacks one of
      `SPECIAL_TOKENS`. Every message names the file.
  """
  try:
    with open(vocab_file, encoding="utf-8") as f:
      tokens = [line.strip() for line in f]
  except FileNotFoundError:
    raise FileNotFoundError(f"WordPiece vocab file not found: {vocab_file}")
  if not tokens:
    raise ValueError(f"WordPiece vocab file is empty: {vocab_file}")
  seen = {}
  for line, token in enumerate(tokens, start=1):
    if not token:
      raise ValueError(f"Blank line {line} in WordPiece vocab {vocab_file}")
    if token in seen:
      raise ValueError(f"Token {token!r} is on lines {seen[token]} and {line} "
                       f"of WordPiece vocab {vocab_file}")
    seen[token] = line
  missing = [t for t in SPECIAL_TOKENS if t not in seen]
  if missing:
    raise ValueError(f"WordPiece vocab {vocab_file} lacks special tokens "
                     f"{missing}; a BERT vocab needs all of {SPECIAL_TOKENS}")
  return tokens


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
  return google_tokenization.FullTokenizer(vocab_file, do_lower_case)


def _normalized_char(char, do_lower_case):
  """What Google's BasicTokenizer makes of `char`; word breaks become spaces."""
  if ord(char) in (0, 0xFFFD) or google_tokenization._is_control(char):  # pylint: disable=protected-access
    return ""
  if google_tokenization._is_whitespace(char):  # pylint: disable=protected-access
    return " "
  text = char
  if do_lower_case:
    text = _GOOGLE_BASIC._run_strip_accents(text.lower())  # pylint: disable=protected-access
  text = "".join(
      f" {c} " if google_tokenization._is_punctuation(c)  # pylint: disable=protected-access
      else " " if c.isspace() else c for c in text)
  if _GOOGLE_BASIC._is_chinese_char(ord(char)):  # pylint: disable=protected-access
    text = f" {text} "
  return text


@functools.lru_cache(maxsize=2)
def _normalization_table(do_lower_case):
  """Code points whose normalization differs from themselves, and their values.

  Returns:
    (keys, values): a tuple of int code points and a tuple of str.
  """
  keys, values = [], []
  for cp in range(0x110000):
    if 0xD800 <= cp <= 0xDFFF:  # Surrogates never occur in valid UTF-8.
      continue
    char = chr(cp)
    if unicodedata.category(char) in ("Cn", "Co"):
      # Unassigned and private-use characters are left alone, except that the
      # CJK ranges are plain numeric ranges that include unassigned points.
      text = f" {char} " if _GOOGLE_BASIC._is_chinese_char(cp) else char  # pylint: disable=protected-access
    else:
      text = _normalized_char(char, do_lower_case)
    if text != char:
      keys.append(cp)
      values.append(text)
  return tuple(keys), tuple(values)


def _regex_class(code_points):
  """An RE2 character class body (no brackets) for a sorted list of ints."""
  ranges, start, prev = [], None, None
  for cp in code_points + [None]:
    if start is not None and cp != prev + 1:
      ranges.append(f"\\x{{{start:X}}}" if start == prev
                    else f"\\x{{{start:X}}}-\\x{{{prev:X}}}")
      start = None
    if start is None:
      start = cp
    prev = cp
  return "".join(ranges)


@functools.lru_cache(maxsize=1)
def _final_sigma_regex():
  """RE2 pattern whose group 1 + "ς" + group 2 rewrites a final capital sigma.

  Python's `str.lower()` implements Unicode's Final_Sigma context with its own
  private `cased` / `case-ignorable` tables; they are probed here through
  `str.lower()`: `ch + "Σ"` ends in "ς" iff `ch` is cased and not ignorable,
  `"A" + ch + "Σ"` does iff `ch` is cased or ignorable. Characters Google
  removes before lower-casing count as ignorable (they are invisible to it).
  """
  cased, ignorable = [], []
  for cp in range(0x110000):
    char = chr(cp)
    if unicodedata.category(char) in ("Cn", "Co", "Cs"):
      continue
    if not _normalized_char(char, do_lower_case=False):
      ignorable.append(cp)
    elif (char + _SIGMA).lower()[-1] == _FINAL_SIGMA:
      cased.append(cp)
    elif ("A" + char + _SIGMA).lower()[-1] == _FINAL_SIGMA:
      ignorable.append(cp)
  c, i = _regex_class(cased), _regex_class(ignorable)
  return f"([{c}][{i}]*){_SIGMA}([{i}]*(?:[^{c}{i}]|$))"


class WordPieceTokenizer(tf.Module):
  """In-graph BERT tokenizer with the exact ids of Google's `FullTokenizer`.

  Usable eagerly, inside `tf.function` and in a SavedModel (all state is
  constant tensors and a static hash table). See the module docstring for the
  normalization and the meaning of the offsets.
  """

  def __init__(self, vocab_file, do_lower_case,
               max_chars_per_word=MAX_CHARS_PER_WORD, name=None):
    """Builds the tokenizer.

    Args:
      vocab_file: path of the WordPiece vocab (see `load_vocab`).
      do_lower_case: True for uncased vocabs (lower-case, NFD, strip accents).
      max_chars_per_word: words longer than this many characters become
        [UNK]; 400 matches tf-models-official, 200 google-research/bert.
      name: optional `tf.Module` name.
    """
    super().__init__(name=name)
    self.vocab_file = vocab_file
    self.do_lower_case = do_lower_case
    self.max_chars_per_word = max_chars_per_word
    self._vocab = load_vocab(vocab_file)
    self._ids = {token: i for i, token in enumerate(self._vocab)}
    keys, values = _normalization_table(do_lower_case)
    self._char_table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(keys, tf.int64), tf.range(len(keys), dtype=tf.int64)),
        default_value=-1)
    self._char_values = tf.constant(values, tf.string)
    self._final_sigma = _final_sigma_regex() if do_lower_case else None
    # Words reaching the wordpiece step have at most `max_chars_per_word`
    # characters of at most 4 bytes, so the byte limit never decides.
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=self._vocab, suffix_indicator="##",
        max_bytes_per_word=4 * max_chars_per_word, token_out_type=tf.int32,
        unknown_token="[UNK]", no_pretokenization=True)

  @property
  def vocab_size(self):
    return len(self._vocab)

  @property
  def pad_id(self):
    return self._ids["[PAD]"]

  @property
  def unk_id(self):
    return self._ids["[UNK]"]

  @property
  def cls_id(self):
    return self._ids["[CLS]"]

  @property
  def sep_id(self):
    return self._ids["[SEP]"]

  @property
  def mask_id(self):
    return self._ids["[MASK]"]

  def tokenize(self, texts):
    """Wordpiece ids of each text, flattened over words.

    Args:
      texts: tf.string Tensor of shape [B] (UTF-8; invalid bytes are dropped,
        as Google's `decode("utf-8", "ignore")` does).

    Returns:
      int32 RaggedTensor of shape [B, (T)], equal to
      `convert_tokens_to_ids(tokenize(text))` of Google's `FullTokenizer`.
    """
    return self.tokenize_with_offsets(texts)[0]

  def tokenize_with_offsets(self, texts):
    """Wordpiece ids plus their byte spans in the original texts.

    Args:
      texts: tf.string Tensor of shape [B].

    Returns:
      (ids, start_bytes, end_bytes): int32, int64, int64 RaggedTensors of
      shape [B, (T)]. `texts[b][start_bytes[b, t]:end_bytes[b, t]]` is the
      original text of piece t (see the module docstring for the exact rule).
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    texts.shape.assert_has_rank(1)
    normalized, char_starts, char_norm_ends = self._normalize(texts)
    words, word_starts, word_ends = tf_text.regex_split_with_offsets(
        normalized, " +")                                     # [B, (W)]
    ids, piece_starts, piece_ends = self._wordpiece_words(
        words.flat_values, word_ends.flat_values - word_starts.flat_values)
    piece_word = ids.value_rowids()                           # [T_all]
    word_base = tf.gather(word_starts.flat_values, piece_word)
    piece_row = tf.gather(words.value_rowids(), piece_word)
    starts, ends = self._original_offsets(
        texts, normalized, char_starts, char_norm_ends, piece_row,
        word_base + piece_starts.flat_values,
        word_base + piece_ends.flat_values)
    by_word = functools.partial(tf.RaggedTensor.from_row_splits,
                                row_splits=words.row_splits)
    return (by_word(ids).merge_dims(1, 2),
            by_word(ids.with_flat_values(starts)).merge_dims(1, 2),
            by_word(ids.with_flat_values(ends)).merge_dims(1, 2))

  def _normalize(self, texts):
    """Google's basic tokenization as text with spaces between words.

    Returns:
      normalized: tf.string [B], words separated by one or more spaces.
      char_starts: int64 RaggedTensor [B, (C)], byte offset of each original
        character in its text.
      char_norm_ends: int64 [C_all], over the flattened batch, the cumulative
        normalized byte length up to and including each character.
    """
    if self._final_sigma is not None:
      texts = tf.strings.regex_replace(
          texts, self._final_sigma, "\\1" + _FINAL_SIGMA + "\\2")
    code_points, char_starts = tf.strings.unicode_decode_with_offsets(
        texts, "UTF-8", errors="replace")                     # [B, (C)]
    flat = code_points.flat_values
    chars = tf.strings.unicode_encode(tf.expand_dims(flat, -1), "UTF-8")
    index = self._char_table.lookup(tf.cast(flat, tf.int64))
    mapped = tf.where(index >= 0,
                      tf.gather(self._char_values, tf.maximum(index, 0)),
                      chars)                                  # [C_all]
    normalized = tf.strings.reduce_join(
        code_points.with_flat_values(mapped), axis=1)        # [B]
    char_norm_ends = tf.cumsum(tf.cast(tf.strings.length(mapped), tf.int64))
    return normalized, char_starts, char_norm_ends

  def _wordpiece_words(self, words, word_lengths):
    """Wordpieces of each word; over-long words become one [UNK] piece.

    Args:
      words: tf.string [W_all], normalized words.
      word_lengths: int64 [W_all], their byte lengths.

    Returns:
      (ids int32, starts int64, ends int64) RaggedTensors [W_all, (P)], offsets
      in bytes relative to the start of the word.
    """
    too_long = tf.strings.length(words, unit="UTF8_CHAR") > self.max_chars_per_word
    # The literal "[UNK]" is a vocab token, so it becomes exactly one [UNK].
    ids, starts, ends = self._wordpiece.tokenize_with_offsets(
        tf.where(too_long, "[UNK]", words))
    piece_word = ids.value_rowids()
    ends = ends.with_flat_values(tf.where(
        tf.gather(too_long, piece_word), tf.gather(word_lengths, piece_word),
        ends.flat_values))
    return ids, starts, ends

  def _original_offsets(self, texts, normalized, char_starts, char_norm_ends,
                        piece_row, norm_starts, norm_ends):
    """Maps piece byte spans in the normalized text to the original text.

    Args:
      texts: tf.string [B], the original texts.
      normalized: tf.string [B], their normalization.
      char_starts: int64 RaggedTensor [B, (C)] (see `_normalize`).
      char_norm_ends: int64 [C_all] (see `_normalize`).
      piece_row: int64 [T_all], the text each piece belongs to.
      norm_starts, norm_ends: int64 [T_all], piece spans in `normalized`.

    Returns:
      (starts, ends): int64 [T_all], piece spans in `texts`.
    """
    norm_lengths = tf.cast(tf.strings.length(normalized), tf.int64)
    row_base = tf.gather(tf.cumsum(norm_lengths, exclusive=True), piece_row)
    flat_starts = char_starts.flat_values
    def char_at(norm_byte):
      """Flat index of the original character that produced `norm_byte`."""
      return tf.searchsorted(char_norm_ends, row_base + norm_byte,
                             side="right", out_type=tf.int64)

    first_char = char_at(norm_starts)
    last_char = char_at(norm_ends - 1)
    at_row_end = tf.equal(norm_ends, tf.gather(norm_lengths, piece_row))
    next_char = char_at(tf.where(at_row_end, norm_ends - 1, norm_ends))
    starts = tf.gather(flat_starts, first_char)
    last_char_end = tf.gather(self._char_ends(texts, char_starts), last_char)
    ends = tf.where(
        at_row_end, tf.gather(tf.cast(tf.strings.length(texts), tf.int64),
                              piece_row),
        tf.where(tf.equal(next_char, last_char), last_char_end,
                 tf.gather(flat_starts, next_char)))
    return starts, ends

  @staticmethod
  def _char_ends(texts, char_starts):
    """int64 [C_all]: byte offset just past each original character."""
    flat_starts = char_starts.flat_values
    rows = char_starts.value_rowids()
    is_last = tf.equal(tf.range(tf.size(flat_starts, out_type=tf.int64)) + 1,
                       tf.gather(char_starts.row_limits(), rows))
    text_lengths = tf.cast(tf.strings.length(texts), tf.int64)
    next_starts = tf.concat([flat_starts[1:], tf.zeros([1], tf.int64)], 0)
    return tf.where(is_last, tf.gather(text_lengths, rows), next_starts)
