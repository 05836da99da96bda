"""Tests for tfbert.classifier.glue_data: GLUE's layouts and quirks, user TSV/CSV, file:line errors.

The last tests read the real GLUE files of the shared data folder (TFBERT_SHARED_DATA) and
count their rows independently of the reader: physical lines (a final line without "\\n"
counts) minus the header, and the label split that SOURCES.md documents for each file.
"""

import collections
import gzip
import os
import re
import unicodedata

import pytest

from tfbert.classifier import glue_data

# task -> one train/dev row in the task's column layout, header first (None: no header).
# Every row reads as text_a "A b.", text_b "C d." (pair tasks) and the task's second label.
ROWS = {
    "cola": (None, "src\t1\t\tA b."),
    "sst-2": ("sentence\tlabel", "A b.\t1"),
    "mrpc": ("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String", "1\t11\t12\tA b.\tC d."),
    "qqp": ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate", "7\t1\t2\tA b.\tC d.\t1"),
    "mnli": ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
             "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label",
             "0\t1\t1e\tfiction\t( A b. )\t( C d. )\t(S A b.)\t(S C d.)\tA b.\tC d.\t"
             "neutral\tentailment"),
    "qnli": ("index\tquestion\tsentence\tlabel", "0\tA b.\tC d.\tnot_entailment"),
    "rte": ("index\tsentence1\tsentence2\tlabel", "0\tA b.\tC d.\tnot_entailment"),
    "wnli": ("index\tsentence1\tsentence2\tlabel", "0\tA b.\tC d.\t1"),
    "sts-b": ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\t"
              "score", "0\tmain-news\theadlines\t2015\t0001\tnone\tnone\tA b.\tC d.\t3.800"),
}
# task -> one test row (GLUE's test files have an index column and no label).
TEST_ROWS = {
    "cola": ("index\tsentence", "0\tA b."),
    "sst-2": ("index\tsentence", "0\tA b."),
    "mrpc": ("index\t#1 ID\t#2 ID\t#1 String\t#2 String", "0\t11\t12\tA b.\tC d."),
    "qqp": ("id\tquestion1\tquestion2", "0\tA b.\tC d."),
    "mnli": (ROWS["mnli"][0].rsplit("\t", 2)[0], ROWS["mnli"][1].rsplit("\t", 2)[0]),
    "qnli": ("index\tquestion\tsentence", "0\tA b.\tC d."),
    "rte": ("index\tsentence1\tsentence2", "0\tA b.\tC d."),
    "wnli": ("index\tsentence1\tsentence2", "0\tA b.\tC d."),
    "sts-b": (ROWS["sts-b"][0].rsplit("\t", 1)[0], ROWS["sts-b"][1].rsplit("\t", 1)[0]),
}


def _write(path, lines, encoding="utf-8", end="\n"):
  with open(path, "w", encoding=encoding, newline="") as f:
    f.write("\n".join(lines) + end)
  return str(path)


def _file(tmp_path, header, *rows, name="train.tsv", **kwargs):
  return _write(tmp_path / name, ([header] if header else []) + list(rows), **kwargs)


def test_the_table_has_the_glue_tasks_with_their_label_names_and_metrics():
  assert sorted(glue_data.TASKS) == ["cola", "mnli", "mrpc", "qnli", "qqp", "rte", "sst-2",
                                     "sts-b", "wnli"]
  assert glue_data.TASKS["mnli"].labels == ("contradiction", "entailment", "neutral")
  assert glue_data.TASKS["mnli"].dev_files == ("dev_matched.tsv", "dev_mismatched.tsv")
  assert glue_data.TASKS["cola"].metrics[0] == "matthews_corrcoef"
  assert glue_data.TASKS["mrpc"].metrics == glue_data.TASKS["qqp"].metrics == ("accuracy", "f1")
  assert glue_data.TASKS["sts-b"].metrics == ("pearson", "spearman")
  assert glue_data.TASKS["sts-b"].num_classes == 1 and glue_data.TASKS["rte"].num_classes == 2
  assert [t for t in glue_data.TASKS.values() if not t.is_pair] == [
      glue_data.TASKS["cola"], glue_data.TASKS["sst-2"]]


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_task_reads_its_standard_train_and_test_layouts(tmp_path, name):
  task = glue_data.get_task(name.upper())  # Names are case-insensitive.
  header, row = ROWS[name]
  read = glue_data.read_examples(task, _file(tmp_path, header, row, row), "dev")
  want_b = "C d." if task.is_pair else None
  want_label = 3.8 if task.is_regression else task.labels[1]
  assert [(e.guid, e.index, e.line, e.text_a, e.text_b, e.label) for e in read.examples] == [
      ("dev-0", 0, 1 + bool(header), "A b.", want_b, want_label),
      ("dev-1", 1, 2 + bool(header), "A b.", want_b, want_label)]
  test = glue_data.read_examples(task, _file(tmp_path, *TEST_ROWS[name], name="test.tsv"),
                                 "test")
  assert [(e.guid, e.text_a, e.text_b, e.label) for e in test.examples] == [
      ("test-0", "A b.", want_b, None)]


def test_mrpc_byte_order_mark_is_not_part_of_the_header(tmp_path):
  path = _file(tmp_path, *ROWS["mrpc"], encoding="utf-8-sig")
  with open(path, "rb") as f:
    assert f.read(3) == b"\xef\xbb\xbf"
  assert len(glue_data.read_examples(glue_data.TASKS["mrpc"], path, "train").examples) == 1


def test_cola_first_line_is_data_and_the_last_line_may_lack_a_newline(tmp_path):
  path = _file(tmp_path, None, "gj04\t1\t\tFirst.", "gj04\t0\t*\tLast.", end="")
  read = glue_data.read_examples(glue_data.TASKS["cola"], path, "train")
  assert [(e.line, e.text_a, e.label) for e in read.examples] == [(1, "First.", "1"),
                                                                   (2, "Last.", "0")]


def test_unbalanced_quotes_stay_in_their_row(tmp_path):
  # MRPC's text has lone '"' (see its first dev row); a quoting reader would join lines.
  rows = ['1\t1\t2\t" The pie business does not fit .\tHe said " 100 percent .',
          '0\t3\t4\tA "quoted\tB "']
  read = glue_data.read_examples(glue_data.TASKS["mrpc"], _file(tmp_path, ROWS["mrpc"][0],
                                                                *rows), "train")
  assert [(e.text_a, e.text_b) for e in read.examples] == [
      ('" The pie business does not fit .', 'He said " 100 percent .'), ('A "quoted', 'B "')]


def test_blank_lines_are_skipped_and_do_not_count_as_rows(tmp_path):
  path = _file(tmp_path, "sentence\tlabel", "a\t0", "", "b\t1", "")
  read = glue_data.read_examples(glue_data.TASKS["sst-2"], path, "train")
  assert [(e.index, e.line, e.text_a) for e in read.examples] == [(0, 2, "a"), (1, 4, "b")]


@pytest.mark.parametrize("task, rows, split, kept, indexes", [
    ("sst-2", ["a\t0", "\t1", "b\t1", " \t0"], "train", ["a", "b"], [0, 2]),
    ("sst-2", ["a\t0", "\t1", "b\t1", " \t0"], "dev", ["a", "", "b", " "], [0, 1, 2, 3]),
    ("rte", ["0\tA.\tB.\tentailment", "1\tA.\t \tentailment", "2\t\tB.\tentailment"],
     "train", ["A."], [0]),
    # Texts that yield no wordpiece are blank too: zero-width spaces, a byte order mark
    # (sweep 33, A25: counted as text, predicted from nothing without a word).
    ("sst-2", ["a\t0", "\u200b\u200b\t1", "b\t1", "\ufeff \u200b\t0"], "train", ["a", "b"],
     [0, 2]),
    ("sst-2", ["a\t0", "\u200b\t1", "b \u200b\t1", "\u200b\t0"], "dev",
     ["a", "\u200b", "b \u200b", "\u200b"], [0, 1, 2, 3]),
])
def test_blank_texts_are_counted_in_one_warning_and_left_out_of_training_only(
    tmp_path, caplog, task, rows, split, kept, indexes):
  """Sweep 24 S1: a blank text (text_a, or text_b of a pair) was trained on without a word;
  training leaves it out (as SQuAD leaves out a blank question), dev/test keep every row."""
  path = _file(tmp_path, ROWS[task][0], *rows)
  with caplog.at_level("WARNING", logger="absl"):
    read = glue_data.read_examples(glue_data.TASKS[task], path, split)
  assert [(e.text_a, e.index) for e in read.examples] == list(zip(kept, indexes))
  warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
  assert len(warnings) == 1
  assert warnings[0].startswith(f"{path}: 2 row(s) with a blank ")
  assert f"(first at {path}:3)" in warnings[0]


@pytest.mark.parametrize("task, rows, message", [
    ("mrpc", ["1\t1\t2\tA.\tB.", "1\t3\t4\tA. with a\ttab\tB."],
     r"train.tsv:3: 6 columns, expected 5 \(as the first line\)"),
    ("sst-2", ["fine\t1", "bad\t2"],
     r"train.tsv:3: column 1 \(label\) is '2', not one of 0, 1"),
    ("rte", ["0\tA.\tB.\tentailment", "1\tA.\tB.\tneutral"],
     r"train.tsv:3: column 3 \(label\) is 'neutral', not one of entailment, not_entailment"),
    ("sts-b", ["0\tg\tf\ty\to\ts\ts\tA.\tB.\t4.0", "1\tg\tf\ty\to\ts\ts\tA.\tB.\tn/a"],
     r"train.tsv:3: column 9 \(label\) is 'n/a', not a finite number"),
    # float() takes these, and the first step's loss is NaN or inf.
    ("sts-b", ["0\tg\tf\ty\to\ts\ts\tA.\tB.\t4.0", "1\tg\tf\ty\to\ts\ts\tA.\tB.\tNaN"],
     r"train.tsv:3: column 9 \(label\) is 'NaN', not a finite number"),
    ("sts-b", ["0\tg\tf\ty\to\ts\ts\tA.\tB.\t-inf"],
     r"train.tsv:2: column 9 \(label\) is '-inf', not a finite number"),
])
def test_malformed_rows_name_file_line_column_and_value(tmp_path, task, rows, message):
  path = _file(tmp_path, ROWS[task][0], *rows)
  with pytest.raises(ValueError, match=message):
    glue_data.read_examples(glue_data.TASKS[task], path, "train")


def test_a_missing_column_is_named(tmp_path):
  fmt = glue_data.CustomFormat(text_a_column=0, text_b_column=3, label_column=1,
                               labels=("no", "yes"))
  path = _file(tmp_path, None, "a\tyes\tc")
  with pytest.raises(ValueError, match=r"train.tsv:1: column 3 \(text_b\) is missing "
                                       r"\(3 columns\)"):
    glue_data.read_examples(glue_data.custom_task(fmt), path, "train")


def test_a_header_of_another_task_fails_at_line_1(tmp_path):
  path = _file(tmp_path, *ROWS["rte"])
  with pytest.raises(ValueError, match=r"train.tsv:1: header column 3 \(text_a\) should be "
                                       r"'#1 String', found 'label'"):
    glue_data.read_examples(glue_data.TASKS["mrpc"], path, "train")
  path = _file(tmp_path, *ROWS["qnli"])
  with pytest.raises(ValueError, match=r"header column 1 \(text_a\) should be 'sentence1', "
                                       r"found 'question'"):
    glue_data.read_examples(glue_data.TASKS["rte"], path, "train")


@pytest.mark.parametrize("task", sorted(glue_data.TASKS))
@pytest.mark.parametrize("split", ["train", "test"])
def test_a_one_column_file_names_its_columns_and_the_layout_of_the_task(tmp_path, task, split):
  # An SST-2 predict file of sentences only said "header column 1 (text_a) should be
  # 'sentence', found None: not a pred.tsv of this task?".
  header, row = (TEST_ROWS if split == "test" else ROWS)[task]
  path = _file(tmp_path, None, "just one sentence", name="pred.tsv")
  layout = glue_data.expected_layout(glue_data.TASKS[task], split)
  if header is None:  # CoLA's train/dev files have no header: the row is too short.
    with pytest.raises(ValueError, match=r"pred.tsv:1: column \d \(\w+\) is missing \(1 "
                                         r"column\)"):
      glue_data.read_examples(glue_data.TASKS[task], path, split)
    assert layout.startswith("a cola train file is GLUE's train.tsv layout: no header, one "
                             "tab-separated row per example, text_a in column 3")
    return
  with pytest.raises(ValueError) as error:
    glue_data.read_examples(glue_data.TASKS[task], path, split)
  assert re.match(re.escape(f"{path}:1: ") + r"(1 column, no column|header column 0 \(text_a\) "
                  r"should be 'sentence', found 'just one sentence')", str(error.value))
  assert "None" not in str(error.value) and str(error.value).endswith("; " + layout)
  # The header sketched ('<3 columns><TAB>question1<TAB>...') is GLUE's own header.
  sketch = re.fullmatch(r".* layout: a header '(.*)', then one row per example with the same "
                        r"columns", layout).group(1)
  pattern = "\t".join(r"[^\t]*(?:\t[^\t]*){%d}" % (int(cell[1:].split()[0]) - 1)
                      if cell.startswith("<") else ".*" if cell == "..." else re.escape(cell)
                      for cell in sketch.split("<TAB>"))
  assert re.fullmatch(pattern, header), (sketch, header)


@pytest.mark.parametrize("delimiter, text, hint", [
    (",", "a b\tyes", "the line holds tabs: it is read with --custom_delimiter=comma: pass "
     "--custom_delimiter=tab?"),
    ("\t", "a b,yes", "the line holds commas: it is read with --custom_delimiter=tab: pass "
     "--custom_delimiter=comma?"),
    ("\t", "a b;yes", "the line holds semicolons: --custom_delimiter reads tab or comma"),
])
def test_too_few_columns_with_another_delimiter_name_the_flag(tmp_path, delimiter, text, hint):
  fmt = glue_data.CustomFormat(labels=("no", "yes"), delimiter=delimiter)
  path = _file(tmp_path, None, text)
  with pytest.raises(ValueError, match=r"train.tsv:1: column 1 \(label\) is missing \(1 "
                                       r"column\); " + re.escape(hint)):
    glue_data.read_examples(glue_data.custom_task(fmt), path, "train")
  # A GLUE task's file is tab-separated whatever the line holds.
  path = _file(tmp_path, None, "index,sentence", "0,A b.")
  with pytest.raises(ValueError, match="the line holds commas: sst-2 files are tab-separated"):
    glue_data.read_examples(glue_data.TASKS["sst-2"], path, "test")


def test_a_test_files_own_index_column_numbers_its_examples(tmp_path):
  """Sweep 27, A122: a slice of a test file (indices 1000, 1003) was predicted under 0, 1,
  each prediction under another example's id."""
  read = lambda *lines: glue_data.read_examples(  # noqa: E731
      glue_data.TASKS["sst-2"], _file(tmp_path, None, "index\tsentence", *lines), "test")
  examples = read("1000\tA b.", "1003\tC d.").examples
  assert [(e.index, e.guid) for e in examples] == [(1000, "test-1000"), (1003, "test-1003")]
  with pytest.raises(ValueError, match=r"train.tsv:3: index 1000 is given again \(first at "
                                       r"line 2\)"):
    read("1000\tA b.", "1000\tC d.")
  with pytest.raises(ValueError, match="train.tsv:2: index .x. is not a whole number"):
    read("x\tA b.")


def test_a_gzip_file_is_named_as_one(tmp_path):
  path = tmp_path / "train.tsv.gz"
  path.write_bytes(gzip.compress(b"sentence\tlabel\nA b.\t1\n"))
  with pytest.raises(ValueError, match=re.escape(f"{path} is gzip-compressed: decompress it "
                                                 f"(gunzip {path}), then pass")):
    glue_data.read_examples(glue_data.TASKS["sst-2"], str(path), "train")


def test_skip_malformed_reports_each_bad_row_and_keeps_the_rest(tmp_path):
  # Like GLUE's QQP train set, which has rows with missing fields.
  rows = ["1\t1\t2\tA?\tB?\t1", "2\t3\t4\tonly one question\t0", "3\t5\t6\tC?\tD?\tyes",
          "4\t7\t8\tE?\tF?\t0"]
  path = _file(tmp_path, ROWS["qqp"][0], *rows)
  read = glue_data.read_examples(glue_data.TASKS["qqp"], path, "train", skip_malformed=True)
  assert [(e.index, e.line, e.text_a) for e in read.examples] == [(0, 2, "A?"), (3, 5, "E?")]
  assert read.skipped == [f"{path}:3: 5 columns, expected 6 (as the first line)",
                          f"{path}:4: column 5 (label) is 'yes', not one of 0, 1"]


def test_limit_reads_a_prefix(tmp_path):
  path = _file(tmp_path, "sentence\tlabel", *[f"s{i}\t{i % 2}" for i in range(10)])
  read = glue_data.read_examples(glue_data.TASKS["sst-2"], path, "train", limit=3)
  assert [e.text_a for e in read.examples] == ["s0", "s1", "s2"]


def test_custom_csv_reads_quoted_fields_with_commas_and_newlines(tmp_path):
  fmt = glue_data.CustomFormat(text_a_column=2, text_b_column=0, label_column=-1,
                               has_header=True, delimiter=",", labels=("neg", "pos"))
  task = glue_data.custom_task(fmt)
  assert task.train_file == "train.csv" and task.metrics == ("accuracy", "f1",
                                                              "matthews_corrcoef")
  path = _file(tmp_path, "b,id,a,label", '"second, with comma",7,"first ""quoted""\nline 2",pos',
               "x,8,y,neg", name="train.csv")
  read = glue_data.read_examples(task, path, "train")
  assert [(e.line, e.text_a, e.text_b, e.label) for e in read.examples] == [
      (2, 'first "quoted"\nline 2', "second, with comma", "pos"), (4, "y", "x", "neg")]


STSB_ROW = "0\tg\tf\ty\to\ts\ts\tA.\tB.\t{}"


@pytest.mark.parametrize("score", ["7.5", "-1.0", "5.01"])
@pytest.mark.parametrize("split", ["train", "dev"])
def test_stsb_scores_outside_its_documented_range_are_refused(tmp_path, score, split):
  # Old code: 7.5 and -1.0 trained on without a word (sweep 6, C07/C08).
  path = _file(tmp_path, ROWS["sts-b"][0], STSB_ROW.format("4.0"), STSB_ROW.format(score))
  with pytest.raises(ValueError, match=rf"train.tsv:3: column 9 \(label\) is '{score}', "
                     r"outside sts-b's score range \[0, 5\]"):
    glue_data.read_examples(glue_data.TASKS["sts-b"], path, split)
  skipped = glue_data.read_examples(glue_data.TASKS["sts-b"], path, split, skip_malformed=True)
  assert [e.label for e in skipped.examples] == [4.0] and len(skipped.skipped) == 1


def test_stsb_range_ends_are_scores_and_a_custom_regression_has_no_range(tmp_path):
  path = _file(tmp_path, ROWS["sts-b"][0], STSB_ROW.format("0"), STSB_ROW.format("5.000"))
  read = glue_data.read_examples(glue_data.TASKS["sts-b"], path, "train")
  assert [e.label for e in read.examples] == [0.0, 5.0]
  custom = glue_data.custom_task(glue_data.CustomFormat(regression=True))
  assert custom.score_range is None  # Nothing documents one: any finite score is read.
  path = _file(tmp_path, None, "A.\t7.5", "B.\t-1", name="custom.tsv")
  assert [e.label for e in glue_data.read_examples(custom, path, "train").examples] == [7.5, -1.0]


def test_custom_regression_and_multiclass_tasks():
  regression = glue_data.custom_task(glue_data.CustomFormat(regression=True))
  assert regression.is_regression and regression.metrics == ("pearson", "spearman")
  assert not regression.layout.quoting  # TSV: quoting off, as GLUE.
  three = glue_data.custom_task(glue_data.CustomFormat(labels=("a", "b", "c")))
  assert three.metrics == ("accuracy",) and three.num_classes == 3
  assert three.test_layout.label is None


@pytest.mark.parametrize("fmt, message", [
    # Named by the tool's flags (an empty list said "needs >= 2 distinct labels, got []").
    (glue_data.CustomFormat(), r"^a custom classification task needs --custom_labels "
     r"\(its label names in class-id order, e.g. --custom_labels=neg,pos\), or "
     r"--custom_regression for a float target$"),
    (glue_data.CustomFormat(labels=("a",)), r"^--custom_labels needs >= 2 distinct labels, "
     r"got \['a'\]$"),
    # Sweep 14 P1: "needs >= 2 distinct labels" for 2 distinct labels, one of them repeated.
    (glue_data.CustomFormat(labels=("a", "b", "a")), r"^--custom_labels names 'a' twice "
     r"\(positions 0 and 2\): each label once, in class-id order$"),
    (glue_data.CustomFormat(labels=("a", "b", "a", "b", "b")), r"^--custom_labels names 'a' "
     r"twice \(positions 0 and 2\) and 'b' 3 times \(positions 1, 3 and 4\): each label once"),
    (glue_data.CustomFormat(labels=("a", "a")), r"^--custom_labels names 'a' twice"),
    (glue_data.CustomFormat(labels=("a", "b"), regression=True),
     r"--custom_labels \(classification\) or --custom_regression .*not both"),
    (glue_data.CustomFormat(labels=("a", "b"), delimiter=";"), "tab or a comma"),
    # The gold label read as text_b: trained without a word (sweep 7, C04).
    (glue_data.CustomFormat(labels=("a", "b"), text_b_column=2, label_column=2),
     r"^--custom_text_b_column and --custom_label_column are both column 2: each of the text "
     r"columns and the label column must be its own$"),
])
def test_custom_formats_that_cannot_work_are_refused(fmt, message):
  with pytest.raises(ValueError, match=message):
    glue_data.custom_task(fmt)


@pytest.mark.parametrize("columns, flags", [
    (dict(text_a_column=-1, label_column=1), r"--custom_text_a_column \(-1\) and "
     r"--custom_label_column \(1\) are both column 1"),
    (dict(text_a_column=0, text_b_column=-2, label_column=1),
     r"--custom_text_a_column \(0\) and --custom_text_b_column \(-2\) are both column 0"),
])
def test_custom_columns_resolving_to_one_column_are_refused_at_line_1(tmp_path, columns, flags):
  # Sweep 17 S1: -1 is the label column of a 2-column file: the label read as the text.
  task = glue_data.custom_task(glue_data.CustomFormat(labels=("neg", "pos"), delimiter=",",
                                                      has_header=True, **columns))
  path = _write(tmp_path / "train.csv", ["text,label", '"a, b",pos', "c,neg"])
  with pytest.raises(ValueError, match=rf"^{re.escape(path)}:1: {flags} of its 2 columns: "
                     r"each of the text columns and the label column must be its own"):
    glue_data.read_examples(task, path, "train")


def test_unknown_task_and_custom_without_format_are_refused():
  with pytest.raises(ValueError, match="unknown task 'mnli-mm'"):
    glue_data.get_task("mnli-mm")
  with pytest.raises(ValueError, match="needs its columns and labels"):
    glue_data.get_task("custom")
  with pytest.raises(FileNotFoundError, match="task file not found: /nonexistent.tsv"):
    glue_data.read_examples(glue_data.TASKS["rte"], "/nonexistent.tsv", "dev")


def test_task_files_come_from_data_dir_unless_given():
  mnli = glue_data.TASKS["mnli"]
  assert glue_data.task_files(mnli, "/d", "dev") == ["/d/dev_matched.tsv",
                                                     "/d/dev_mismatched.tsv"]
  assert glue_data.task_files(mnli, "/d", "test", "/x/my.tsv") == ["/x/my.tsv"]
  assert glue_data.split_name("/d/dev_mismatched.tsv") == "dev_mismatched"
  with pytest.raises(ValueError, match="data_dir or an explicit train_file"):
    glue_data.task_files(mnli, None, "train")


# Real GLUE files: (task, directory, split) -> label counts documented in SOURCES.md.
DOCUMENTED = {
    ("mrpc", "MRPC", "dev"): {"1": 279, "0": 129},
    ("mrpc", "MRPC", "train"): {"1": 2474, "0": 1194},
    ("sst-2", "SST-2", "dev"): {"1": 444, "0": 428},
    ("sst-2", "SST-2", "train"): {"1": 37569, "0": 29780},
    ("cola", "CoLA", "dev"): {"1": 721, "0": 322},
    ("cola", "CoLA", "train"): {"1": 6023, "0": 2528},
    ("rte", "RTE", "dev"): {"entailment": 146, "not_entailment": 131},
    ("rte", "RTE", "train"): {"entailment": 1249, "not_entailment": 1241},
    ("sts-b", "STS-B", "dev"): None,  # SOURCES.md: 1500 rows.
    ("sts-b", "STS-B", "train"): None,  # 5749 rows.
}
DOCUMENTED_ROWS = {("sts-b", "dev"): 1500, ("sts-b", "train"): 5749}


def _physical_lines(path):
  with open(path, "rb") as f:
    data = f.read()
  return data.count(b"\n") + (not data.endswith(b"\n"))


@pytest.mark.parametrize("task, directory, split", sorted(DOCUMENTED))
def test_real_glue_files_give_every_row(shared_data, task, directory, split):
  path = os.path.join(shared_data, "glue", directory, f"{split}.tsv")
  read = glue_data.read_examples(glue_data.TASKS[task], path, split)
  has_header = directory != "CoLA"  # SOURCES.md: "CoLA files have no header line."
  assert len(read.examples) == _physical_lines(path) - has_header and not read.skipped
  documented = DOCUMENTED[task, directory, split]
  if documented is None:
    assert len(read.examples) == DOCUMENTED_ROWS[task, split]
    assert all(0.0 <= e.label <= 5.0 for e in read.examples)
  else:
    assert collections.Counter(e.label for e in read.examples) == documented
  assert all(e.text_a for e in read.examples)
  assert all(bool(e.text_b) == glue_data.TASKS[task].is_pair for e in read.examples)


def test_real_mrpc_dev_starts_with_the_documented_row(shared_data):
  path = os.path.join(shared_data, "glue", "MRPC", "dev.tsv")
  first = glue_data.read_examples(glue_data.TASKS["mrpc"], path, "dev").examples[0]
  # SOURCES.md: "1 1355540 1355592 He said the foodservice pie business doesn 't fit ...".
  assert (first.label, first.line) == ("1", 2)
  assert first.text_a == ("He said the foodservice pie business doesn 't fit the company 's "
                          "long-term growth strategy .")
  assert first.text_b.startswith('" The foodservice pie business')


def test_real_cola_dev_keeps_its_last_row_without_newline(shared_data):
  path = os.path.join(shared_data, "glue", "CoLA", "dev.tsv")
  with open(path, "rb") as f:
    last_line = f.read().rsplit(b"\n", 1)[1]
  assert last_line  # The file ends without "\n" (SOURCES.md).
  last = glue_data.read_examples(glue_data.TASKS["cola"], path, "dev").examples[-1]
  assert last.text_a == last_line.decode("utf-8").split("\t")[3] and last.line == 1043


def test_a_task_file_that_is_a_link_to_nothing_is_named_as_one(tmp_path):
  """`ls` lists it: "task file not found" named what the user sees there (sweep 8, RP02)."""
  os.symlink("gone.tsv", tmp_path / "dev.tsv")
  with pytest.raises(FileNotFoundError) as e:
    glue_data.read_examples(glue_data.TASKS["rte"], str(tmp_path / "dev.tsv"), "dev")
  assert str(e.value) == (f"task file {tmp_path / 'dev.tsv'} is a symbolic link to gone.tsv, "
                          "which does not exist")


def test_a_field_longer_than_the_csv_modules_limit_is_read_and_the_limit_kept(tmp_path):
  """Rule: a row of any length is read, in every layout (it was refused at Python's csv
  field limit, 131,072 characters: a 20,000-word review); the limit, one per process, is
  lifted only while a row is parsed, and found unchanged between rows and after."""
  import csv  # pylint: disable=import-outside-toplevel
  long = "word " * 40_000
  path = _file(tmp_path, "sentence\tlabel", f"{long}\t1", "short\t0")
  before = csv.field_size_limit()
  read = glue_data.read_examples(glue_data.TASKS["sst-2"], path, "train")
  assert [e.text_a for e in read.examples] == [long, "short"]
  fmt = glue_data.CustomFormat(text_a_column=0, label_column=1, has_header=False,
                               delimiter=",", labels=("neg", "pos"))
  path = _file(tmp_path, None, f'"{long}, quoted",pos', name="train.csv")
  read = glue_data.read_examples(glue_data.custom_task(fmt), path, "train")
  assert read.examples[0].text_a == f"{long}, quoted"
  rows = glue_data._rows(path, glue_data.custom_task(fmt).layout)  # pylint: disable=protected-access
  assert next(rows)[1][0] == f"{long}, quoted" and csv.field_size_limit() == before
  rows.close()
  assert csv.field_size_limit() == before == 131_072


@pytest.mark.parametrize("fmt, header, rows", [
    (glue_data.CustomFormat(has_header=True, labels=("0", "1")), "I liked it.\t1", ["Bad.\t0"]),
    (glue_data.CustomFormat(has_header=True, regression=True), "Fine.\t3.5", ["Bad.\t0.5"]),
])
def test_a_custom_header_holding_a_label_is_skipped_with_a_warning(tmp_path, caplog, fmt,
                                                                   header, rows):
  """Sweep 22 S2: --custom_header on a headerless file dropped each file's first example
  without a word. The skipped line is logged; one whose label cell holds a label warns."""
  path = _file(tmp_path, None, header, *rows, name="dev.tsv")
  with caplog.at_level("INFO", logger="absl"):
    read = glue_data.read_examples(glue_data.custom_task(fmt), path, "dev")
  assert len(read.examples) == 1
  label = header.split("\t")[1]
  logged = {r.levelname: r.getMessage() for r in caplog.records}
  assert logged["INFO"].startswith(f"{path}:1 skipped as a header (--custom_header): ")
  assert logged["WARNING"].startswith(
      f"{path}:1 skipped as a header (--custom_header), but its label column 1 holds "
      f"'{label}'")
  assert logged["WARNING"].endswith("leave --custom_header out if the file has no header")


def test_a_real_custom_header_is_logged_without_a_warning(tmp_path, caplog):
  fmt = glue_data.CustomFormat(has_header=True, labels=("0", "1"))
  path = _file(tmp_path, None, "sentence\tlabel", "Bad.\t0", name="dev.tsv")
  with caplog.at_level("INFO", logger="absl"):
    glue_data.read_examples(glue_data.custom_task(fmt), path, "dev")
  assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
      ("INFO", f"{path}:1 skipped as a header (--custom_header): 'sentence\\tlabel'")]


def test_a_label_with_white_space_under_custom_header_is_named_as_such(tmp_path):
  """Sweep 28, A11: 'pos ' on the first row after a --custom_header header was refused with
  "looks like a header: pass --custom_header", the flag already given."""
  fmt = glue_data.CustomFormat(has_header=True, labels=("neg", "pos"))
  path = _file(tmp_path, None, "sentence\tlabel", "Good.\tpos ", name="train.tsv")
  with pytest.raises(ValueError) as e:
    glue_data.read_examples(glue_data.custom_task(fmt), path, "train")
  assert str(e.value) == (f"{path}:2: column 1 (label) is 'pos ', not one of neg, pos; labels "
                          "are matched as written, and this one has white space around 'pos'")


def test_a_label_in_another_unicode_normalization_is_named_as_such(tmp_path):
  """Sweep 29, A52: "label is 'négatif', not one of négatif, positif" (NFD against NFC)."""
  fmt = glue_data.CustomFormat(labels=("négatif", "positif"))
  nfd = unicodedata.normalize("NFD", "négatif")
  path = _file(tmp_path, None, f"Bad.\t{nfd}", name="train.tsv")
  with pytest.raises(ValueError) as e:
    glue_data.read_examples(glue_data.custom_task(fmt), path, "train")
  assert str(e.value) == (
      f"{path}:1: column 1 (label) is {nfd!r}, not one of négatif, positif; it is 'négatif' "
      "written with the same letters in another Unicode normalization (NFC and NFD: an "
      "accented letter as one code point, or as a letter and a combining mark), and tfbert "
      "compares them as written: normalize the file to NFC")  # No header hint either.


@pytest.mark.parametrize("regression", [False, True])
def test_a_header_read_without_custom_header_says_to_pass_it(tmp_path, regression):
  """Sweep 22 P2: a custom file whose line 1 is a header, read without --custom_header, was
  refused at "file:1: column 1 (label) is 'label', ..." without naming the flag."""
  fmt = glue_data.CustomFormat(labels=() if regression else ("0", "1"), regression=regression)
  path = _file(tmp_path, None, "sentence\tlabel", "Bad.\t0", name="train.tsv")
  with pytest.raises(ValueError, match=rf"^{re.escape(path)}:1: column 1 \(label\) is "
                     r"'label', .*; line 1 looks like a header: pass --custom_header$"):
    glue_data.read_examples(glue_data.custom_task(fmt), path, "train")
  bad_later = _file(tmp_path, None, "Good.\t1", "Bad.\tlabel", name="dev.tsv")
  with pytest.raises(ValueError, match=r":2: column 1 \(label\) is 'label', not one of") as e:
    glue_data.read_examples(glue_data.custom_task(glue_data.CustomFormat(labels=("0", "1"))),
                            bad_later, "dev")
  assert "--custom_header" not in str(e.value)


def test_a_recorded_custom_header_on_a_file_not_trained_on_is_checked(tmp_path, caplog):
  """Sweep 23 S1: a predict-only rerun of a run trained with --custom_header read a headerless
  predict file with the recorded setting, dropping its first row (every index off by one)
  with an INFO line crediting --custom_header, not given. Line 1 that is not the train
  file's header is refused naming the flags either way; the train file's header is skipped;
  without the train file to compare, the skip is a WARNING."""
  task = glue_data.custom_task(glue_data.CustomFormat(has_header=True, labels=("0", "1")))
  train = _file(tmp_path, "sentence\tlabel", "Bad.\t0")
  recorded = glue_data.RecordedHeader("run/run_config.json", (train, ("sentence", "label")),
                                      "--custom_labels=0,1")
  headerless = _file(tmp_path, None, "Fine.", "Bad.", name="test.tsv")
  with pytest.raises(ValueError, match=re.escape(
      f"{headerless}:1: would be skipped as a header by --custom_header of the run's record "
      f"(run/run_config.json), not given here, but it is not the train file's header "
      f"({train}:1: 'sentence\\tlabel'): 'Fine.'; pass --nocustom_header --custom_labels=0,1 "
      "to read line 1 as data, or --custom_header --custom_labels=0,1 to skip it as a "
      "header")):
    glue_data.read_examples(task, headerless, "test", recorded_header=recorded)
  headed = _file(tmp_path, "sentence", "Fine.", name="test2.tsv")
  with caplog.at_level("INFO", logger="absl"):
    read = glue_data.read_examples(task, headed, "test", recorded_header=recorded)
  assert [e.text_a for e in read.examples] == ["Fine."]
  assert [r.levelname for r in caplog.records] == ["INFO"]
  caplog.clear()
  with caplog.at_level("INFO", logger="absl"):
    read = glue_data.read_examples(task, headerless, "test", recorded_header=(
        glue_data.RecordedHeader("run/run_config.json")))
  assert [e.text_a for e in read.examples] == ["Bad."]
  assert [(r.levelname, r.getMessage()) for r in caplog.records] == [(
      "WARNING", f"{headerless}:1 skipped as a header by --custom_header of the run's record "
      "(run/run_config.json), not given here, and the run's train file is not at hand to "
      "compare: 'Fine.'; if the file has no header, pass --nocustom_header to read line 1 "
      "as data, or --custom_header to skip it as a header")]
