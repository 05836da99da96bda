"""Texts that look alike and differ only in Unicode normalization (NFC against NFD).

"é" is one code point in NFC (U+00E9) and two in NFD ("e" and U+0301). Files written on
macOS, or copied from some PDFs, hold NFD; most others hold NFC. Python compares code
points, so a label "négatif" in NFD is not the label "négatif" in NFC, and a SQuAD answer
in NFD is not found in an NFC context. tfbert matches names and offsets as written (a
silent normalization would move offsets); a refusal or a warning names the difference.
"""

import unicodedata
from typing import Iterable, Optional


def nfc(text: str) -> str:
  """`text` in Unicode normalization form C."""
  return unicodedata.normalize("NFC", text)


def other_form_of(text: str, among: Iterable[str]) -> Optional[str]:
  """The entry of `among` that `text` equals once both are NFC, when `text` is none of
  them as written; else None."""
  among = list(among)
  if text in among:
    return None
  wanted = nfc(text)
  return next((entry for entry in among if nfc(entry) == wanted), None)


def hint(what: str) -> str:
  """The sentence a message adds when `what` differs only in Unicode normalization."""
  return (f"; {what} the same letters in another Unicode normalization (NFC and NFD: an "
          "accented letter as one code point, or as a letter and a combining mark), and "
          "tfbert compares them as written: normalize the file to NFC")
