"""Tests for tfbert.text.text_normalization: Google's BasicTokenizer, one character at a time.

Golden values are written out by hand from the reference's rules (its source,
`official.nlp.tools.tokenization`) and the Unicode data, or come from Python's
own `str.lower()`; tokenization_test.py proves the whole tokenizer against the
reference.
"""

import pytest
import tensorflow as tf

from tfbert.text import text_normalization
from tfbert.text.text_normalization import (
  FINAL_SIGMA_REWRITE,
  final_sigma_regex,
  normalization_table,
  normalized_char,
)

# Deleted by both casings: NUL, U+FFFD, and Cc/Cf characters (soft hyphen,
# zero-width space, DEL, LRM, BOM; NEL is Cc, which Google checks first).
DELETED = ["\x00", "\ufffd", "\u00ad", "\u200b", "\x01", "\x7f", "\u200e",
           "\ufeff", "\x85"]
# A space for both casings: tab/CR/LF, Zs, and Zl via str.isspace().
SPACES = ["\t", "\n", "\r", " ", "\u00a0", "\u3000", "\u2028"]

# (char, uncased, cased).
GOLDEN = [
    ("a", "a", "a"),
    ("A", "a", "A"),
    ("\u00c9", "e", "\u00c9"),              # É: lower, NFD, strip the acute.
    ("\u0130", "i", "\u0130"),              # İ: lower() is "i" + U+0307 (Mn).
    ("\u0301", "", "\u0301"),               # A lone combining acute is Mn.
    ("\u00df", "\u00df", "\u00df"),         # ß: lower() and NFD keep it.
    ("\ufb01", "\ufb01", "\ufb01"),         # ﬁ: NFD is not NFKD.
    ("\uff21", "\uff41", "\uff21"),         # Fullwidth A -> fullwidth a.
    ("\ud55c", "\u1112\u1161\u11ab", "\ud55c"),  # 한 -> three jamo in NFD.
    (",", " , ", " , "),
    ("$", " $ ", " $ "),                    # Google: all non-alnum ASCII.
    ("\u00bf", " \u00bf ", " \u00bf "),     # ¿ is Po.
    ("\u037e", " ; ", " \u037e "),          # Greek question mark: NFD is ";".
    ("\u4e2d", " \u4e2d ", " \u4e2d "),     # 中, a CJK ideograph.
    ("\uf900", " \u8c48 ", " \uf900 "),     # 豈: CJK judged before NFD.
]


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_normalized_char_deletes_nul_replacement_and_control_characters(do_lower_case):
  assert [normalized_char(c, do_lower_case) for c in DELETED] == [""] * len(DELETED)


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_normalized_char_turns_whitespace_into_one_space(do_lower_case):
  assert [normalized_char(c, do_lower_case) for c in SPACES] == [" "] * len(SPACES)


@pytest.mark.parametrize("char,uncased,cased", GOLDEN)
def test_normalized_char_golden_values(char, uncased, cased):
  assert normalized_char(char, do_lower_case=True) == uncased
  assert normalized_char(char, do_lower_case=False) == cased


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_normalization_table_holds_exactly_the_changed_code_points(do_lower_case):
  keys, values = normalization_table(do_lower_case)
  assert len(keys) == len(values)
  assert all(a < b for a, b in zip(keys, keys[1:]))  # Strictly increasing.
  assert not [k for k in keys if 0xD800 <= k <= 0xDFFF]
  assert all(normalized_char(chr(k), do_lower_case) == v != chr(k)
             for k, v in zip(keys, values))
  table = dict(zip(keys, values))
  assert table[0] == "" and table[ord(",")] == " , " and table[ord("\t")] == " "
  assert ord("a") not in table and 0xE000 not in table  # Unchanged; private use.
  assert (ord("A") in table) == do_lower_case
  # Unassigned, but inside Google's numeric CJK range U+F900-U+FAFF.
  assert table[0xFAFF] == " \ufaff "


def test_normalization_table_is_built_once_per_casing():
  assert normalization_table(True) is normalization_table(True)
  assert normalization_table(False) is normalization_table(False)
  assert normalization_table(True) != normalization_table(False)


def test_regex_class_merges_consecutive_code_points_into_ranges():
  # pylint: disable=protected-access
  regex_class = text_normalization._regex_class
  assert regex_class([]) == ""
  assert regex_class([0x41]) == r"\x{41}"
  assert (regex_class([0x41, 0x42, 0x43, 0x45, 0x10FFFF])
          == r"\x{41}-\x{43}\x{45}\x{10FFFF}")


def _rewrite_final_sigma(texts):
  """`texts` with `final_sigma_regex` applied the way the tokenizer does."""
  out = tf.strings.regex_replace(tf.constant(texts), final_sigma_regex(),
                                 FINAL_SIGMA_REWRITE)
  return [t.decode("utf-8") for t in out.numpy()]


@pytest.mark.parametrize("text,want", [
    ("ΟΔΟΣ", "ΟΔΟς"),
    ("ΟΔΟΣ ΟΔΟΣ.", "ΟΔΟς ΟΔΟς."),
    ("ΟΔΟΣΟ", "ΟΔΟΣΟ"),                 # Mid-word: stays capital.
    ("Σ ΣΑ", "Σ ΣΑ"),                   # Nothing cased before it.
    ("ΑΣ'Σ", "ΑΣ'ς"),                   # The apostrophe is case-ignorable.
    ("ΑΣ\u0301 x", "Ας\u0301 x"),       # So is a combining accent.
    # Google deletes NUL before lower-casing, so "ΑΣ\x00Α" is "ΑΣΑ" to it.
    ("ΑΣ\x00Α", "ΑΣ\x00Α"),
    ("σσ", "σσ"),                       # Only capital sigma is rewritten.
])
def test_final_sigma_regex_rewrites_capital_sigma_at_word_end(text, want):
  assert _rewrite_final_sigma([text]) == [want]


def test_final_sigma_regex_agrees_with_python_lower():
  texts = ["ΟΔΟΣ", "ΟΔΟΣΟ", "ΟΔΥΣΣΕΥΣ ΑΣ. ΑΣ'Σ Σ σΣ ΣΑ", "ΑΣ\u0301", "aΣ", "1Σ",
           "ΑΣ-Β", "ΑΣ\u00adΒ", "ΑΣ\u200bΒ", "ǅΣ", "ᾼΣ", "\U00010400Σ"]
  for text, rewritten in zip(texts, _rewrite_final_sigma(texts)):
    want = text.lower()
    assert rewritten.lower() == want, text
    assert [i for i, c in enumerate(rewritten) if c == "ς"] == [
        i for i, c in enumerate(want) if c == "ς"], text


def test_final_sigma_regex_is_built_once():
  assert final_sigma_regex() is final_sigma_regex()


def test_a_blank_text_is_one_that_yields_no_wordpiece():
  """Sweep 33, A25: a row of zero-width spaces passed `str.strip()` as text and went to the
  model as an empty one, uncounted among the blank texts."""
  for text in ["", " \t", "".join(DELETED), "".join(SPACES), "\u200b \u200b", "\u0301"]:
    assert text_normalization.is_blank(text), repr(text)
  for text in ["a", "\u200b.", " \u00ad x", "\u4e00", "\ud800"]:
    assert not text_normalization.is_blank(text), repr(text)
