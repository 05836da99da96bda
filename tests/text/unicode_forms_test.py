"""Tests for tfbert.text.unicode_forms."""

import unicodedata

from tfbert.text import unicode_forms

NFC, NFD = "n\u00e9gatif", "ne\u0301gatif"  # "négatif": é as one code point, or e + U+0301.


def test_the_forms_differ_as_written_and_agree_in_nfc():
  assert NFC != NFD and len(NFD) == len(NFC) + 1
  assert unicode_forms.nfc(NFD) == NFC == unicodedata.normalize("NFC", NFC)


def test_other_form_of_finds_the_entry_only_when_the_text_is_none_as_written():
  assert unicode_forms.other_form_of(NFD, ["positif", NFC]) == NFC
  assert unicode_forms.other_form_of(NFC, ["positif", NFD]) == NFD
  assert unicode_forms.other_form_of(NFC, [NFC, NFD]) is None  # Written as one of them.
  assert unicode_forms.other_form_of("negatif", [NFC]) is None  # Other letters: no match.


def test_the_hint_names_both_forms_and_the_fix():
  assert unicode_forms.hint("it is 'x' written with") == (
      "; it is 'x' written with the same letters in another Unicode normalization (NFC and "
      "NFD: an accented letter as one code point, or as a letter and a combining mark), and "
      "tfbert compares them as written: normalize the file to NFC")
