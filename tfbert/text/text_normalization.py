"""Google's `BasicTokenizer` as per-character data, for the in-graph tokenizer.

`tokenization.WordPieceTokenizer` reproduces the reference's normalization with
two pieces of data built here, once, in pure Python:

1. Per-character table (`normalization_table`). Except for the final sigma
   (2) and the order of combining marks (the residual difference below),
   Google's `BasicTokenizer` maps each character on its own: it deletes NUL,
   U+FFFD and control/format characters (`Cc`, `Cf`, not tab/CR/LF), turns
   whitespace into a space, and (uncased) replaces a character by its
   `lower()`, NFD, `Mn`-stripped form; punctuation becomes a word of its own,
   and so does a CJK ideograph (judged before lower-casing). The table holds,
   for every code point this changes, the result with word breaks written as
   spaces (`normalized_char`). It is built once per casing with the
   reference's own predicates and Python's `unicodedata`, so the Unicode
   version is the reference's too; in the graph it is one
   `tf.lookup.StaticHashTable` lookup per character.
2. Final sigma (uncased, `final_sigma_regex`). `str.lower()` maps "Σ" to "ς"
   at the end of a word (Unicode Final_Sigma). A `regex_replace` does this
   first, with Python's own cased and case-ignorable classes, probed through
   `str.lower()`.

Residual difference, and the only known one: NFD sorts adjacent combining marks
by combining class, and a per-character table cannot. Once `Mn` marks are
stripped, this shows only when two of the 25 spacing marks (`Mc`) that have a
non-zero combining class (U+1D165, U+1D16D, U+302E, ...) stand in non-canonical
order within a word, and only if the vocab contains one of them. Google's cased
and uncased vocabs contain none, so such a word is [UNK] either way.
"""

import functools
import unicodedata

from official.nlp.tools import tokenization as google_tokenization

_SIGMA, _FINAL_SIGMA = "\u03a3", "\u03c2"

# `tf.strings.regex_replace` rewrite for a match of `final_sigma_regex()`.
FINAL_SIGMA_REWRITE = "\\1" + _FINAL_SIGMA + "\\2"

# The reference's own character rules. They are private, but unchanged since
# google-research/bert (2018); reusing them makes the in-graph table agree with
# the reference by construction, Unicode version included.
# pylint: disable=protected-access
_GOOGLE_BASIC = google_tokenization.BasicTokenizer(do_lower_case=True)
_is_control = google_tokenization._is_control
_is_whitespace = google_tokenization._is_whitespace
_is_punctuation = google_tokenization._is_punctuation
_is_chinese_char = _GOOGLE_BASIC._is_chinese_char
_strip_accents = _GOOGLE_BASIC._run_strip_accents
# pylint: enable=protected-access


def normalized_char(char, do_lower_case):
  """What Google's BasicTokenizer makes of one character.

  Args:
    char: str of length 1.
    do_lower_case: True for uncased tokenization (lower-case, NFD, strip `Mn`).

  Returns:
    str: "" if the character is deleted, otherwise its normalized form with
    word breaks written as spaces (punctuation "," becomes " , ").
  """
  if ord(char) in (0, 0xFFFD) or _is_control(char):
    return ""
  if _is_whitespace(char):
    return " "
  text = _strip_accents(char.lower()) if do_lower_case else char
  text = "".join(f" {c} " if _is_punctuation(c) else " " if c.isspace() else c
                 for c in text)
  if _is_chinese_char(ord(char)):
    text = f" {text} "
  return text


def is_blank(text: str) -> bool:
  """Whether `text` yields no wordpiece: empty, or only characters BERT's cleaning deletes
  or turns into a space (white space; control and format characters such as U+200B, the
  zero-width space; NUL, U+FFFD; and, uncased, combining marks with nothing to mark, which
  cased give only [UNK]s).

  The readers' rule for a blank text, which `str.strip()` alone missed: a row of zero-width
  spaces went to the model as an empty text, uncounted (sweep 33, A25, A63). Every text with
  a character that is kept returns at that character, so the common case costs one or two.
  """
  return not any(normalized_char(char, do_lower_case=True).strip() for char in text)


@functools.lru_cache(maxsize=2)
def normalization_table(do_lower_case):
  """Code points whose normalization differs from themselves, and their values.

  Built once per casing (a few seconds) and cached.

  Args:
    do_lower_case: as in `normalized_char`.

  Returns:
    (keys, values): a tuple of int code points in increasing order (no
    surrogates) and a tuple of str, the normalized form of each.
  """
  keys, values = [], []
  for cp in range(0x110000):
    if 0xD800 <= cp <= 0xDFFF:  # Surrogates never occur in valid UTF-8.
      continue
    char = chr(cp)
    if unicodedata.category(char) in ("Cn", "Co"):
      # Unassigned and private-use characters are left alone, except that the
      # CJK ranges are plain numeric ranges that include unassigned points.
      text = f" {char} " if _is_chinese_char(cp) else char
    else:
      text = normalized_char(char, do_lower_case)
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
def final_sigma_regex():
  """RE2 pattern whose group 1 + "ς" + group 2 rewrites a final capital sigma.

  Python's `str.lower()` implements Unicode's Final_Sigma context with its own
  private `cased` / `case-ignorable` tables; they are probed here through
  `str.lower()`: `ch + "Σ"` ends in "ς" iff `ch` is cased and not ignorable,
  `"A" + ch + "Σ"` does iff `ch` is cased or ignorable. Characters Google
  removes before lower-casing count as ignorable (they are invisible to it).

  Returns:
    str, for `tf.strings.regex_replace(texts, pattern, FINAL_SIGMA_REWRITE)`.
  """
  cased, ignorable = [], []
  for cp in range(0x110000):
    char = chr(cp)
    if unicodedata.category(char) in ("Cn", "Co", "Cs"):
      continue
    if not normalized_char(char, do_lower_case=False):
      ignorable.append(cp)
    elif (char + _SIGMA).lower()[-1] == _FINAL_SIGMA:
      cased.append(cp)
    elif ("A" + char + _SIGMA).lower()[-1] == _FINAL_SIGMA:
      ignorable.append(cp)
  c, i = _regex_class(cased), _regex_class(ignorable)
  return f"([{c}][{i}]*){_SIGMA}([{i}]*(?:[^{c}{i}]|$))"
