"""CoNLL named-entity files: a strict reader (`file:line` errors, IOB2 check) and a writer.

The format (CoNLL-2003, WNUT 2017, ...): one word per line, whitespace-separated columns
(the word, then tags; a line holding a tab is split at tabs only, so a word may hold a
space, as `format_conll`'s own output can), sentences separated by lines that are empty
after stripping (some files use a line holding a single TAB, others a truly empty line;
both end a sentence),
`-DOCSTART-` lines between documents. Line endings may be LF or CRLF. Tags are `O`,
`B-<type>` or `I-<type>`.

IOB2 (the scheme CoNLL-2003's published files moved to, and WNUT's) begins every entity
with `B-`; an `I-X` that does not continue an X entity is an error here, with its line.
IOB1 files (`I-` everywhere, `B-` only between two adjacent entities of one type) are
repaired to IOB2 with `scheme="iob1"`: each `I-X` that begins an entity becomes `B-X`.
System outputs, which may hold such tags by mistake, are read with `scheme="any"` (no
check; the metric then starts a new entity at such a tag, as conlleval does).
"""

import collections
import dataclasses
import re
from typing import Optional, Sequence

from tfbert.runtime import atomic, files

DOCSTART = "-DOCSTART-"


def fields_of(line: str) -> list[str]:
  """A line's columns, empty ones left out.

  A line holding a tab is split at tabs only (each field stripped of ASCII whitespace): a
  tab-separated file (WNUT, `format_conll`'s `word<TAB>tag`) may hold a word with a space,
  "New York", whose "York" was dropped as a column. Any other line is split at ASCII
  spaces. Never at other Unicode spaces: `str.split()` also splits at a no-break space
  (U+00A0) or U+3000 inside a word, which dropped the rest of the word.
  """
  if "\t" in line:
    return [field for field in (f.strip(_ASCII_WHITESPACE) for f in line.split("\t")) if field]
  return [field for field in _ASCII_SPACE.split(line) if field]


_ASCII_WHITESPACE = " \t\r\n\f\v"
_ASCII_SPACE = re.compile(f"[{_ASCII_WHITESPACE}]+")
SCHEMES = ("iob2", "iob1", "any")


@dataclasses.dataclass(frozen=True)
class Sentence:
  """One sentence of a CoNLL file.

  Attributes:
    words: the word column, in order.
    tags: the tag column (one per word); empty strings when the file has no tags.
    lines: the 1-based line number of each word in its file.
    path: the file (`read_conll`'s), for messages; not part of a sentence's equality.
  """
  words: tuple[str, ...]
  tags: tuple[str, ...]
  lines: tuple[int, ...]
  path: Optional[str] = dataclasses.field(default=None, compare=False, repr=False)


def entity_type(tag: str) -> Optional[str]:
  """The type of a `B-X`/`I-X` tag (X), None for `O`."""
  return None if tag == "O" else tag[2:]


def check_tag(tag: str) -> Optional[str]:
  """Why `tag` is not `O`, `B-<type>` or `I-<type>`, or None when it is."""
  if tag == "O" or (tag[:2] in ("B-", "I-") and len(tag) > 2 and not tag[2:].isspace()):
    return None
  return f"tag {tag!r} is not O, B-<type> or I-<type>"


def read_conll(path: str, *, token_column: int = 0, tag_column: Optional[int] = -1,
               scheme: str = "iob2") -> list[Sentence]:
  """Reads the sentences of a CoNLL file.

  Args:
    path: the file (UTF-8; LF or CRLF).
    token_column: 0-based column of the word; < 0 counts from the end.
    tag_column: column of the tag (< 0 from the end), or None to read no tags (a file to
      tag); then a file whose every line holds one field is read as words only, whatever
      `token_column`.
    scheme: "iob2" (check it), "iob1" (repair it to IOB2) or "any" (no check).

  Returns:
    The sentences, in file order (an empty file gives none).

  Raises:
    FileNotFoundError: no such file.
    ValueError: `path:line: reason` for a line with too few columns, a malformed tag, an
      IOB2 violation (with `scheme="iob2"`) or a file that is not UTF-8.
  """
  if scheme not in SCHEMES:
    raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
  columns = [c for c in (token_column, tag_column) if c is not None]
  # The word and its tag are two fields, whichever end their columns count from.
  needed = max([c + 1 if c >= 0 else -c for c in columns] + [len(columns)])
  sentences, words, tags, lines = [], [], [], []

  def end_sentence():
    if words:
      sentences.append(Sentence(tuple(words), tuple(tags), tuple(lines), path))
      words.clear(), tags.clear(), lines.clear()

  try:
    with files.open_file(path, "rb") as f:
      # Bad bytes (or a gzip file) named at path:line as every text reader does.
      text_lines = files.decode_utf8(f.read(), path).split("\n")
  except FileNotFoundError:
    raise FileNotFoundError(files.missing_file_message(path, "CoNLL file")) from None
  if text_lines and text_lines[-1] == "":
    text_lines.pop()  # The final newline ends the last line; it starts none.
  line_fields = [fields_of(line) for line in text_lines]
  if tag_column is None and all(len(fields) == 1 for fields in line_fields
                                if fields and fields[0] != DOCSTART):
    # A file of words only (to tag) holds them in its one column, whichever column the
    # run's tagged files hold them in (sweep 19 P4).
    token_column, needed = 0, 1
  width = _common_width(text_lines, line_fields)
  for number, (line, fields) in enumerate(zip(text_lines, line_fields), start=1):
    if not fields or fields[0] == DOCSTART:
      end_sentence()
      continue
    if len(fields) >= needed and len(fields) != width[0]:
      _refuse_other_width(path, number, line, fields, width)
    if len(fields) < needed:
      _check_empty_cells(path, number, line, needed, token_column, tag_column)
      tag_part = ("" if tag_column is None
                  else f", the tag in column {tag_column} (--tag_column)")
      raise ValueError(
          f"{path}:{number}: {len(fields)} column(s), need {needed} (the word in column "
          f"{token_column} (--token_column){tag_part}): {line.strip()!r}; pass a "
          "--token_column/--tag_column that fit the file")
    if tag_column is not None and token_column % len(fields) == tag_column % len(fields):
      raise ValueError(  # The tag read as the word: the answer leaks into the input.
          f"{path}:{number}: --token_column ({token_column}) and --tag_column ({tag_column}) "
          f"are both column {token_column % len(fields)} of its {len(fields)} column(s): "
          "the word and its tag must be two columns; pass a --token_column or --tag_column "
          "that names the other")
    tag = "" if tag_column is None else fields[tag_column]
    if tag_column is not None:
      problem = check_tag(tag)
      if problem:
        raise ValueError(f"{path}:{number}: {problem}"
                         f"{_other_tag_column(fields, token_column, tag_column)}")
      previous = tags[-1] if tags else "O"
      if tag.startswith("I-") and entity_type(previous) != entity_type(tag):
        if scheme == "iob1":
          tag = "B-" + tag[2:]
        elif scheme == "iob2":
          raise ValueError(
              f"{path}:{number}: {tag} after {previous} breaks IOB2 (an entity begins with "
              "B-); for an IOB1 file, read it with the iob1 repair (--tag_scheme=iob1)")
    words.append(fields[token_column])
    tags.append(tag)
    lines.append(number)
  end_sentence()
  return sentences


def _common_width(lines: Sequence[str], line_fields: Sequence[list[str]]
                  ) -> tuple[int, int, bool]:
  """(columns, lines holding them, whether they hold a tab) of most of a file's word lines
  (`-DOCSTART-` and blank lines left out); (0, 0, False) for none."""
  counts = collections.Counter((len(fields), "\t" in line)
                               for line, fields in zip(lines, line_fields)
                               if fields and fields[0] != DOCSTART)
  if not counts:
    return 0, 0, False
  (columns, tabbed), held = counts.most_common(1)[0]
  return columns, held, tabbed


def _refuse_other_width(path: str, number: int, line: str, fields: Sequence[str],
                        width: tuple[int, int, bool]) -> None:
  """Raises naming `path:number`: its word line has other columns than most of the file's
  (conlleval refuses such a line too: "unexpected number of features"). Read as it came,
  "New York B-LOC" among two-column lines was the word "New" (sweep 29, A104, A105)."""
  columns, held, tabbed = width
  why = (": the file's lines are tab-separated and this one holds no tab, so it was split "
         "at its spaces" if tabbed and "\t" not in line else "")
  raise ValueError(
      f"{path}:{number}: {len(fields)} columns {[*fields]} where {held} of the file's lines "
      f"have {columns}{why}; every line of a CoNLL file has the same columns (a word with "
      "a space needs tab-separated columns)")


def _check_empty_cells(path: str, number: int, line: str, needed: int, token_column: int,
                       tag_column: Optional[int]) -> None:
  """Raises naming `path:number` when a tab-separated `line`, short of columns once its
  empty fields are left out (`fields_of`), has them all but an empty word or tag: no
  column flag fixes that line."""
  if "\t" not in line:
    return
  cells = [cell.strip(_ASCII_WHITESPACE) for cell in line.split("\t")]
  if len(cells) < needed:
    return
  for name, column in (("word", token_column), ("tag", tag_column)):
    if column is not None and not cells[column]:
      raise ValueError(f"{path}:{number}: the {name} (column {column}) is empty: "
                       f"{line.rstrip(chr(13))!r}; remove the line or give the {name}")


def _other_tag_column(fields: Sequence[str], token_column: int, tag_column: int) -> str:
  """The part of a bad-tag message that names the column read and, when another column
  of the line holds a tag, the flags that read it (sweep 19 P3)."""
  width = len(fields)
  read = tag_column % width
  where = f" (read from column {read}{', the last' if read == width - 1 else ''}, --tag_column"
  others = [c for c in range(width) if c != read and not check_tag(fields[c])]
  if not others:
    return where + "; if the tags are in another column, pass --tag_column/--token_column)"
  column = others[0]
  word = token_column % width
  if word == column:  # The word read from where the tag is: swap them.
    word = read if width == 2 else None
  flags = f"--tag_column={column}" + ("" if word is None else f" --token_column={word}")
  if word is None:
    flags += " and the word's column with --token_column"
  return where + f"; column {column} holds the tag {fields[column]!r}: pass {flags})"


def document_lines(lines: Sequence[str]) -> set[int]:
  """The 1-based numbers of the `-DOCSTART-` lines of `lines` (a file's text split at
  newlines), of the blank line right after each, and of each blank line after another:
  document separators and repeated sentence breaks, which `read_conll` skips and a system
  output may leave out (`tools/run_ner.py`'s predictions do: one blank line after each
  sentence, where a gold file may have two, sweep 27, A65)."""
  found = set()
  previous_blank = False
  for number, line in enumerate(lines, start=1):
    fields = fields_of(line)
    if fields and fields[0] == DOCSTART:
      found.add(number)
    elif not fields and (number - 1 in found or previous_blank):
      found.add(number)
    previous_blank = not fields
  return found


def tag_set(sentences: Sequence[Sentence]) -> tuple[str, ...]:
  """The label list of a tagger trained on `sentences`: `O`, then `B-X`, `I-X` for each
  type X in sorted order (every type seen, both prefixes even when one never occurs).

  Raises:
    ValueError: `sentences` without an entity (every tag O), naming their file: a tagger of
      the one label O trains with loss 0 and learns nothing.
  """
  types = sorted({entity_type(t) for s in sentences for t in s.tags} - {None})
  if not types:
    paths = sorted({s.path for s in sentences if s.path}) or ["the training sentences"]
    words = sum(len(s.words) for s in sentences)
    raise ValueError(
        f"{', '.join(paths)}: no entities ({len(sentences)} sentences, {words} words, every "
        "tag O): a tagger trained on it has the one label O and learns nothing (loss 0); "
        "train on a file with B-<type>/I-<type> tags (if they are in another column, name it "
        "with --tag_column)")
  return ("O",) + tuple(f"{prefix}-{t}" for t in types for prefix in ("B", "I"))


def format_conll(sentences: Sequence[Sentence], tags: Sequence[Sequence[str]]) -> str:
  """`word<TAB>tag` lines, an empty line after each sentence (the submission layout that
  `tools/evaluate_ner.py` scores against the gold file by line position)."""
  out = []
  for sentence, sentence_tags in zip(sentences, tags, strict=True):
    if len(sentence_tags) != len(sentence.words):
      raise ValueError(f"{len(sentence_tags)} tags for a sentence of {len(sentence.words)} words "
                       f"(line {sentence.lines[0]})")
    out.extend(f"{w}\t{t}\n" for w, t in zip(sentence.words, sentence_tags))
    out.append("\n")
  return "".join(out)


def write_conll(path: str, sentences: Sequence[Sentence], tags: Sequence[Sequence[str]]) -> str:
  """Writes `format_conll` atomically; returns `path`."""
  return atomic.write_text(path, format_conll(sentences, tags))
