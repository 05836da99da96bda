"""Tests for tfbert.tagging.conll: every quirk of real CoNLL files, `file:line` errors, IOB2.

The last tests read WNUT 2017 (TFBERT_SHARED_DATA/wnut17) and compare with the counts its
SOURCES.md documents (sentences, words, entities per split), counted there by another
program.
"""

import gzip
import os
import re

import pytest

from tfbert.tagging import conll, tagging_metrics, tagging_run


def _write(tmp_path, text: str, name="data.conll", newline="\n"):
  path = tmp_path / name
  path.write_bytes(text.replace("\n", newline).encode("utf-8"))
  return str(path)


def test_both_separators_docstart_crlf_and_space_columns(tmp_path):
  # A TAB-only line and an empty line both end a sentence (WNUT 2017 train has both);
  # -DOCSTART- ends one too; CRLF and space-separated columns read the same.
  text = ("-DOCSTART- O\n\nEU B-org\nrejects O\n\t\nPeter B-per\nBlackburn I-per\n\n"
          "-DOCSTART- O\nBRUSSELS B-loc\n")
  for newline in ("\n", "\r\n"):
    for separator in ("\t", " "):
      path = _write(tmp_path, text.replace("\t", separator) if separator == " " else text,
                    newline=newline)
      sentences = conll.read_conll(path)
      assert [s.words for s in sentences] == [("EU", "rejects"), ("Peter", "Blackburn"),
                                              ("BRUSSELS",)]
      assert [s.tags for s in sentences] == [("B-org", "O"), ("B-per", "I-per"), ("B-loc",)]
      assert [s.lines for s in sentences] == [(3, 4), (6, 7), (10,)]


def test_a_line_of_other_columns_than_the_files_is_refused_at_its_line(tmp_path):
  """Sweep 29, A104/A105: "New York B-LOC" among two-column lines was read as the word
  "New" and York lost from training, evaluation and predictions; conlleval refuses a line
  of another column count too."""
  tabbed = _write(tmp_path, "Alan\tB-PER\nwent\tO\nto\tO\nNew York B-LOC\n\nOk\tO\n")
  with pytest.raises(ValueError) as e:
    conll.read_conll(tabbed)
  assert str(e.value) == (
      f"{tabbed}:4: 3 columns ['New', 'York', 'B-LOC'] where 4 of the file's lines have 2: "
      "the file's lines are tab-separated and this one holds no tab, so it was split at its "
      "spaces; every line of a CoNLL file has the same columns (a word with a space needs "
      "tab-separated columns)")
  spaced = _write(tmp_path, "Alan B-PER\nwent O\nNew York B-LOC\n", name="spaced.conll")
  with pytest.raises(ValueError, match=r"spaced.conll:3: 3 columns \['New', 'York', 'B-LOC'\] "
                                       r"where 2 of the file's lines have 2; every line"):
    conll.read_conll(spaced)
  # Columns as most lines hold them, separated either way, read as before.
  mixed = _write(tmp_path, "Alan\tB-PER\nwent O\nNew York\tB-LOC\n", name="mixed.conll")
  assert conll.read_conll(mixed)[0].words == ("Alan", "went", "New York")


def test_invisible_characters_stay_in_their_word(tmp_path):
  # U+200B and U+FEFF are not whitespace: they belong to the word (dev lines 15,556, 16,730).
  path = _write(tmp_path, "watched\u200bwas O\nDubbz\ufeff B-person\n\ufe0f O\n")
  (sentence,) = conll.read_conll(path)
  assert sentence.words == ("watched\u200bwas", "Dubbz\ufeff", "\ufe0f")


def test_unicode_spaces_stay_in_their_word(tmp_path):
  """Columns are split at ASCII spaces and tabs: str.split() also split at a no-break space,
  so "New<NBSP>York B-LOC" was the word "New" (and "York" was dropped) without a word."""
  path = _write(tmp_path, "New\u00a0York B-LOC\nis\u3000here O\n")
  (sentence,) = conll.read_conll(path)
  assert sentence.words == ("New\u00a0York", "is\u3000here")
  assert sentence.tags == ("B-LOC", "O")


def test_a_tab_separated_line_keeps_a_word_with_a_space_and_reads_back_as_written(tmp_path):
  """A line holding a tab is split at tabs only: "New York<TAB>B-location" was the word
  "New" ("York" taken as a column and dropped), in training and in the predictions written.
  A space-separated line is split at spaces as before."""
  path = _write(tmp_path, "New York\tB-location\nis \tO\n1 000\tO\nbig O\n\t\n"
                          "x\tO\n", newline="\r\n")
  first, second = conll.read_conll(path)
  assert first.words == ("New York", "is", "1 000", "big")
  assert first.tags == ("B-location", "O", "O", "O") and second.words == ("x",)
  # The predictions writer's file (word<TAB>tag) reads back word for word, by both readers.
  written = conll.write_conll(str(tmp_path / "pred.conll"), [first, second],
                              [["B-location", "O", "O", "O"], ["O"]])
  assert [s.words for s in conll.read_conll(written)] == [first.words, second.words]
  assert tagging_metrics.read_predictions(written, [first, second], path) == [
      ["B-location", "O", "O", "O"], ["O"]]


def test_a_gzip_file_is_named_as_one(tmp_path):
  path = tmp_path / "train.conll.gz"
  path.write_bytes(gzip.compress(b"EU B-ORG\n"))
  with pytest.raises(ValueError, match=f"{path} is gzip-compressed: decompress it"):
    conll.read_conll(str(path))


def test_columns_by_flag_and_words_only(tmp_path):
  path = _write(tmp_path, "1 EU NNP B-ORG x\n2 rejects VBZ O x\n")
  (sentence,) = conll.read_conll(path, token_column=1, tag_column=-2)
  assert sentence.words == ("EU", "rejects") and sentence.tags == ("B-ORG", "O")
  (words_only,) = conll.read_conll(path, token_column=1, tag_column=None)
  assert words_only.tags == ("", "")


@pytest.mark.parametrize("token_column, tag_column, column", [(1, -1, 1), (-2, 0, 0)])
def test_word_and_tag_columns_resolving_to_one_column_are_refused(tmp_path, token_column,
                                                                   tag_column, column):
  # Sweep 17 S2: --token_column=1 on a 2-column file is the default (last) tag column.
  path = _write(tmp_path, "EU B-org\nrejects O\n")
  with pytest.raises(ValueError, match=(
      rf"^{re.escape(path)}:1: --token_column \({token_column}\) and --tag_column "
      rf"\({tag_column}\) are both column {column} of its 2 column\(s\)")):
    conll.read_conll(path, token_column=token_column, tag_column=tag_column)


@pytest.mark.parametrize("text, token_column, tag_column, flags", [
    # The tag first (sweep 19 n08): the word '@paulwalk' read as the tag, 'O' unread.
    ("O\t@paulwalk\n", 0, -1, "(read from column 1, the last, --tag_column; column 0 holds "
     "the tag 'O': pass --tag_column=0 --token_column=1)"),
    ("1 O EU x\n", 2, 3, "(read from column 3, the last, --tag_column; column 1 holds the "
     "tag 'O': pass --tag_column=1 --token_column=2)"),
    ("O EU NNP x\n", 0, 2, "(read from column 2, --tag_column; column 0 holds the tag 'O': "
     "pass --tag_column=0 and the word's column with --token_column)"),
    ("EU NNP\n", 0, -1, "(read from column 1, the last, --tag_column; if the tags are in "
     "another column, pass --tag_column/--token_column)"),
])
def test_a_tag_column_without_tags_names_the_columns_and_flags(tmp_path, text, token_column,
                                                                tag_column, flags):
  path = _write(tmp_path, text)
  with pytest.raises(ValueError) as error:
    conll.read_conll(path, token_column=token_column, tag_column=tag_column)
  assert str(error.value).startswith(f"{path}:1: tag ") and str(error.value).endswith(flags)


def test_a_words_only_file_is_read_whatever_the_runs_word_column(tmp_path):
  """A file to tag holding only words, for a run trained on --token_column=1
  --tag_column=0 (sweep 19 n10, n10b): its one column is the word; the run's columns,
  even both 0, are not refused for a file without tags."""
  words = _write(tmp_path, "EU\nrejects\n\nword\n", "words.conll")
  two = _write(tmp_path, "O EU\nO rejects\n", "two.conll")
  for token_column in (1, 0, -1):
    sentences = conll.read_conll(words, token_column=token_column, tag_column=None)
    assert [s.words for s in sentences] == [("EU", "rejects"), ("word",)]
  (sentence,) = conll.read_conll(two, token_column=1, tag_column=None)
  assert sentence.words == ("EU", "rejects") and sentence.tags == ("", "")
  with pytest.raises(ValueError) as error:  # A one-column line among two-column lines.
    conll.read_conll(_write(tmp_path, "O EU\nrejects\n"), token_column=1, tag_column=None)
  assert str(error.value).endswith(
      "2: 1 column(s), need 2 (the word in column 1 (--token_column)): 'rejects'; pass a "
      "--token_column/--tag_column that fit the file")
  for token_column, tag_column in ((1, 0), (0, 0)):
    config = tagging_run.NerRunConfig(
        output_dir=str(tmp_path / "run"), do_predict=True, predict_file=words,
        token_column=token_column, tag_column=tag_column)
    assert [s.words for s in tagging_run.read_inputs(config)["test"]] == [
        ("EU", "rejects"), ("word",)]
  with pytest.raises(ValueError, match="are the same column"):  # Still, for tagged files.
    tagging_run.NerRunConfig(output_dir=str(tmp_path / "run"), do_predict=True,
                             predict_file=words, do_eval=True, eval_file=two,
                             token_column=0, tag_column=0)


@pytest.mark.parametrize("text, line, message", [
    ("EU B-org\nrejects\n", 2, "1 column(s), need 2"),
    ("EU B-org\n\ufeff\n", 2, "1 column(s)"),  # The original WNUT dev file's last line.
    ("EU B-org\nrejects X-org\n", 2, "tag 'X-org' is not O, B-<type> or I-<type>"),
    ("EU B-\n", 1, "tag 'B-'"),
    ("EU O\nrejects I-org\n", 2, "I-org after O breaks IOB2"),
    ("EU B-per\nrejects I-org\n", 2, "I-org after B-per breaks IOB2"),
    ("EU O\n\nrejects I-org\n", 3, "I-org after O"),  # A sentence starts outside entities.
    # Sweep 24 P3: the line has its two columns, the word empty: no column flag fixes it.
    ("EU\tB-org\n\tO\n", 2, "the word (column 0) is empty: '\\tO'; remove the line or "
                           "give the word"),
    ("EU\tB-org\nrejects\t \r\n", 2, "the tag (column -1) is empty: 'rejects\\t '"),
])
def test_malformed_lines_are_named_with_file_and_line(tmp_path, text, line, message):
  path = _write(tmp_path, text)
  with pytest.raises(ValueError) as error:
    conll.read_conll(path)
  assert str(error.value).startswith(f"{path}:{line}: ") and message in str(error.value)


def test_not_utf8_is_named(tmp_path):
  path = tmp_path / "latin1.conll"
  path.write_bytes(b"EU B-org\nM\xfcller B-per\n")
  with pytest.raises(ValueError, match=f"{path}:2: not UTF-8"):
    conll.read_conll(str(path))


def test_iob1_repair_and_any(tmp_path):
  # IOB1: I- everywhere, B- only between adjacent entities of one type.
  path = _write(tmp_path, "EU I-org\nUN I-org\nWTO B-org\nsaid O\nPeter I-per\n")
  (sentence,) = conll.read_conll(path, scheme="iob1")
  assert sentence.tags == ("B-org", "I-org", "B-org", "O", "B-per")
  (kept,) = conll.read_conll(path, scheme="any")
  assert kept.tags == ("I-org", "I-org", "B-org", "O", "I-per")
  assert tagging_metrics.entities([sentence.tags]) == tagging_metrics.entities([kept.tags])


def test_tag_set_and_round_trip(tmp_path):
  path = _write(tmp_path, "EU B-org\nrejects O\n\nPeter B-per\nBlackburn I-per\n")
  sentences = conll.read_conll(path)
  assert conll.tag_set(sentences) == ("O", "B-org", "I-org", "B-per", "I-per")
  written = conll.write_conll(str(tmp_path / "out.conll"), sentences, [s.tags for s in sentences])
  assert conll.read_conll(written) == sentences
  with pytest.raises(ValueError, match="1 tags for a sentence of 2 words"):
    conll.format_conll(sentences, [("O",), ("O", "O")])


# split file -> (sentences, words, entities, longest sentence in words), from SOURCES.md.
WNUT_COUNTS = {"wnut17train.conll": (3394, 62730, 1975, 41),
               "emerging.dev.conll": (1009, 15733, 836, 82),
               "emerging.test.annotated": (1287, 23394, 1079, 105)}


@pytest.mark.parametrize("name", sorted(WNUT_COUNTS))
def test_the_real_wnut17_files(shared_data, name):
  sentences = conll.read_conll(os.path.join(shared_data, "wnut17", name))
  counts = (len(sentences), sum(len(s.words) for s in sentences),
            len(tagging_metrics.entities([s.tags for s in sentences])),
            max(len(s.words) for s in sentences))
  assert counts == WNUT_COUNTS[name]
  assert len(conll.tag_set(sentences)) == 13  # O and B-/I- of 6 types, all in every split.


def test_a_conll_file_that_is_a_link_to_nothing_is_named_as_one(tmp_path):
  os.symlink("gone.conll", tmp_path / "dev.conll")
  with pytest.raises(FileNotFoundError) as e:
    conll.read_conll(str(tmp_path / "dev.conll"))
  assert str(e.value) == (f"CoNLL file {tmp_path / 'dev.conll'} is a symbolic link to "
                          "gone.conll, which does not exist")
  with pytest.raises(FileNotFoundError) as e:
    conll.read_conll(str(tmp_path / "test.conll"))
  assert str(e.value) == f"CoNLL file not found: {tmp_path / 'test.conll'}"


def test_a_training_file_without_entities_is_refused_naming_it(tmp_path):
  """Rule: a tagger's labels come from a file with at least one entity; one whose tags are
  all O gave the one label O, and a run trained with loss 0 learning nothing."""
  path = _write(tmp_path, "EU O\nrejects O\n\nPeter O\n")
  sentences = conll.read_conll(path)
  assert sentences[0].path == path and sentences == [
      conll.Sentence(("EU", "rejects"), ("O", "O"), (1, 2)), conll.Sentence(("Peter",), ("O",),
                                                                             (4,))]
  with pytest.raises(ValueError) as e:
    conll.tag_set(sentences)
  assert str(e.value) == (
      f"{path}: no entities (2 sentences, 3 words, every tag O): a tagger trained on it has the "
      "one label O and learns nothing (loss 0); train on a file with B-<type>/I-<type> tags "
      "(if they are in another column, name it with --tag_column)")
