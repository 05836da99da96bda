"""tfbert.embeddings.embedding_data: pairs, triplets and scored pairs from TSV and JSONL,
errors naming file:line, STS-B from its GLUE file."""

import json
import logging
import os
import re

import pytest

from tfbert.embeddings import embedding_data
from tfbert.embeddings.embedding_data import Columns


def _write(path, lines):
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return str(path)


def test_tsv_by_header_name_and_by_index(tmp_path):
  named = _write(tmp_path / "triplets.tsv", ["query\tdoc\tneg", "a cat\ta feline\ta car",
                                             "", "rain\twet weather\tsun"])
  got = embedding_data.read_examples(named, Columns("query", "doc", "neg"))
  assert [(e.texts, e.line) for e in got] == [(("a cat", "a feline", "a car"), 2),
                                              (("rain", "wet weather", "sun"), 4)]
  indexed = _write(tmp_path / "scored.tsv", ["0.5\tx y\tx z", "1\tp\tq"])
  got = embedding_data.read_examples(indexed, Columns(1, 2, score=0), limit=1)
  assert [(e.texts, e.score) for e in got] == [(("x y", "x z"), 0.5)]


def test_a_headerless_file_by_index_as_the_flags_give_it_and_a_byte_order_mark(tmp_path):
  """The flags give columns as strings: "0" is the first column of a file without a header
  row. A file saved by Excel or a Windows editor starts with a byte-order mark and ends
  lines with CRLF: the first header name (or JSONL line) is read as written."""
  column = embedding_data.column
  assert [column("0"), column("12"), column("score"), column(None)] == [0, 12, "score", None]
  indexed = _write(tmp_path / "headerless.tsv", ["a cat\ta feline", "rain\twet weather"])
  got = embedding_data.read_examples(indexed, Columns(column("0"), column("1")))
  assert [e.texts for e in got] == [("a cat", "a feline"), ("rain", "wet weather")]
  bom = tmp_path / "bom.tsv"
  bom.write_bytes("\ufeffquery\tdoc\r\na cat\ta feline\r\n".encode("utf-8"))
  got = embedding_data.read_examples(str(bom), Columns("query", "doc"))
  assert [(e.texts, e.line) for e in got] == [(("a cat", "a feline"), 2)]
  jsonl = tmp_path / "bom.jsonl"
  jsonl.write_bytes(("\ufeff" + json.dumps({"q": "a", "p": "b"}) + "\r\n").encode("utf-8"))
  assert [e.texts for e in embedding_data.read_examples(str(jsonl), Columns("q", "p"))] == [
      ("a", "b")]
  latin1 = tmp_path / "latin1.tsv"
  latin1.write_bytes(b"query\tdoc\na cat\ta feline\ncaf\xe9\tbar\n")
  with pytest.raises(ValueError, match=r"latin1.tsv:3: not UTF-8 text \(byte 0xe9"):
    embedding_data.read_examples(str(latin1), Columns("query", "doc"))


def test_jsonl_by_key(tmp_path):
  path = _write(tmp_path / "pairs.jsonl", [json.dumps({"q": "what is tf", "p": "a library"}),
                                           json.dumps({"q": "é", "p": "ü", "extra": 1})])
  got = embedding_data.read_examples(path, Columns("q", "p"))
  assert [e.texts for e in got] == [("what is tf", "a library"), ("é", "ü")]


@pytest.mark.parametrize("lines, columns, message", [
    (["a\tb", "x\t"], Columns("a", "b"), r"pairs.tsv:2: positive is empty"),
    # A text that yields no wordpiece is as empty (sweep 33, A25).
    (["a\tb", "\u200b\u200b\ty"], Columns("a", "b"), r"pairs.tsv:2: anchor is empty or not "
     r"text \('\\u200b\\u200b'\)"),
    (["a\tb", "x\ty"], Columns("a", "c"), r"pairs.tsv:1: the header has no column "
                                          r"positive \('c'\); columns: 'a', 'b'"),
    # Said "columns: a,b" alone: the file was comma-separated.
    (["a,b", "x,y"], Columns("a", "b"), r"pairs.tsv:1: the header has no column .*one "
                                        r"column: a comma-separated file\? give a TSV"),
    (["x\ty"], Columns(0, 2), r"pairs.tsv:1: 2 columns, but positive is column 2"),
    (["a\tb\ts", "x\ty\tnan"], Columns("a", "b", score="s"),
     r"pairs.tsv:2: score 'nan' is not a finite number"),
    (["a\tb"], Columns("a", "b"), r"pairs.tsv: no example in the file"),
])
def test_tsv_errors_name_file_line_and_column(tmp_path, lines, columns, message):
  path = _write(tmp_path / "pairs.tsv", lines)
  with pytest.raises(ValueError, match=message):
    embedding_data.read_examples(path, columns)


@pytest.mark.parametrize("lines, message", [
    (["A plane is taking off.\tAn air plane is taking off."],
     "the file seems to have no header: line 1 has no column anchor ('anchor'), positive "
     "('positive') and reads as data ('A plane is taking off.', 'An air plane is taking "
     "off.'); the columns of a headerless file are picked by 0-based index: "
     "--anchor_column=0 --positive_column=1"),
    (["cat\tfeline\t4.5"], "by 0-based index: --anchor_column=0 --positive_column=1 "
                            "[--score_column=2]"),
    # Names that are no data: a header of other names keeps the header message.
    (["query\tdoc", "a\tb"], "the header has no column anchor ('anchor'), positive "
                              "('positive'); columns: 'query', 'doc': pick them with"),
])
def test_a_headerless_tsv_read_by_names_says_to_pick_columns_by_index(tmp_path, lines,
                                                                     message):
  """Sweep 24 P1: the first pair was called "the header", with "pick them with
  --anchor_column" (inviting a sentence as the column name)."""
  path = _write(tmp_path / "pairs.tsv", lines + ["x\ty\t1" if "4.5" in lines[0] else "x\ty"])
  flags = {name: f"{name}_column" for name in ("anchor", "positive", "negative", "score")}
  with pytest.raises(ValueError) as e:
    embedding_data.read_examples(path, Columns(), flags=flags)
  assert str(e.value).startswith(f"{path}:1: ") and message in str(e.value)


def test_jsonl_errors_name_file_and_line(tmp_path):
  path = _write(tmp_path / "pairs.jsonl", [json.dumps({"q": "a", "p": "b"}), "{oops"])
  with pytest.raises(ValueError, match=r"pairs.jsonl:2: not a JSON object"):
    embedding_data.read_examples(path, Columns("q", "p"))
  path = _write(tmp_path / "pairs.jsonl", [json.dumps({"q": "a"})])
  with pytest.raises(ValueError, match=r"pairs.jsonl:1: missing positive \('p'\); keys: q"):
    embedding_data.read_examples(path, Columns("q", "p"))
  with pytest.raises(FileNotFoundError, match="nope.tsv"):
    embedding_data.read_examples(str(tmp_path / "nope.tsv"))


def test_stsb_dev_is_read_as_scored_pairs(shared_data):
  examples = embedding_data.stsb_examples(os.path.join(shared_data, "glue", "STS-B", "dev.tsv"))
  assert len(examples) == 1500  # GLUE's STS-B dev: 1,500 pairs.
  first = examples[0]
  assert first.texts == ("A man with a hard hat is dancing.",
                         "A man wearing a hard hat is dancing.")
  assert first.score == 5.0 and first.line == 2
  assert all(0.0 <= e.score <= 5.0 for e in examples)


def test_a_retrieval_set_is_read_and_its_errors_name_file_and_line(tmp_path):
  queries = _write(tmp_path / "queries.tsv", ["q1\twhat purrs", "q2\twhat falls from clouds"])
  corpus = _write(tmp_path / "corpus.tsv", ["d1\ta cat", "d2\train", "d3\tsnow"])
  qrels = _write(tmp_path / "qrels.tsv", ["q1\td1", "q2\td2", "q2\td3"])
  got = embedding_data.read_retrieval_set(queries, corpus, qrels)
  assert got.query_ids == ["q1", "q2"] and got.corpus == ["a cat", "rain", "snow"]
  assert got.qrels == {"q1": {"d1"}, "q2": {"d2", "d3"}}
  bad = _write(tmp_path / "bad_qrels.tsv", ["q1\td1", "q3\td1"])
  with pytest.raises(ValueError, match=r"bad_qrels.tsv:2: query 'q3' is not in"):
    embedding_data.read_retrieval_set(queries, corpus, bad)
  repeated = _write(tmp_path / "repeated.tsv", ["d1\ta", "d1\tb"])
  with pytest.raises(ValueError, match=r"repeated.tsv:2: id 'd1' is also on line 1"):
    embedding_data.read_retrieval_set(queries, repeated, qrels)
  malformed = _write(tmp_path / "malformed.tsv", ["q1 what purrs"])
  with pytest.raises(ValueError, match=r"malformed.tsv:1: expected id<TAB>text"):
    embedding_data.read_retrieval_set(malformed, corpus, qrels)
  invisible = _write(tmp_path / "invisible.tsv", ["d1\ta", "d2\t\u200b"])  # Sweep 33, A25.
  with pytest.raises(ValueError, match=r"invisible.tsv:2: expected id<TAB>text"):
    embedding_data.read_retrieval_set(queries, invisible, qrels)


@pytest.mark.parametrize("names", [("qid", "text", "did", "text", "qid", "did"),
                                   ("_id", "text", "_id", "title", "query-id", "corpus-id"),
                                   ("query_id", "Text", "docid", "text", "query_id", "docid")])
def test_the_header_rows_of_a_retrieval_set_are_skipped_and_logged(tmp_path, caplog, names):
  """BEIR / MTEB / pandas exports start with a header row: it was read as a query `qid`
  (text "text") whose relevant document, the corpus' header `did`, trivially ranked first,
  inflating every metric. Each file's header is skipped, and logged."""
  q, text, d, body, qrel_q, qrel_d = names
  queries = _write(tmp_path / "q.tsv", [f"{q}\t{text}", "q1\tdog running", "q2\tkitten"])
  corpus = _write(tmp_path / "c.tsv", [f"{d}\t{body}", "d1\ta puppy", "d2\ta kitten"])
  qrels = _write(tmp_path / "r.tsv", [f"{qrel_q}\t{qrel_d}", "q1\td1", "q2\td2"])
  with caplog.at_level(logging.INFO, logger="absl"):
    got = embedding_data.read_retrieval_set(queries, corpus, qrels)
  assert got.query_ids == ["q1", "q2"] and got.corpus_ids == ["d1", "d2"]
  assert got.qrels == {"q1": {"d1"}, "q2": {"d2"}}
  assert f"{queries}:1: header row ({q!r}, {text!r}) skipped" in caplog.text
  assert f"{qrels}:1: header row" in caplog.text and f"{corpus}:1: header row" in caplog.text
  # A header only in the qrels file, or only in the queries file: read alike.
  plain = _write(tmp_path / "plain_q.tsv", ["q1\tdog running", "q2\tkitten"])
  assert embedding_data.read_retrieval_set(plain, corpus, qrels).qrels == got.qrels
  plain_r = _write(tmp_path / "plain_r.tsv", ["q1\td1", "q2\td2"])
  assert embedding_data.read_retrieval_set(queries, corpus, plain_r).qrels == got.qrels


def test_a_first_row_mixing_a_column_name_and_another_word_is_refused(tmp_path):
  """Sweep 30, A11/A12: `doc_id<TAB>passage` was read as a document and ranked (MRR 50 ->
  33.3), since only a row of known column names is a header."""
  queries = _write(tmp_path / "q.tsv", ["q1\tpassage"])
  corpus = _write(tmp_path / "c.tsv", ["doc_id\tpassage", "d1\ta puppy", "d2\ta kitten"])
  qrels = _write(tmp_path / "r.tsv", ["q1\td1"])
  with pytest.raises(ValueError, match=re.escape(
      f"{corpus}:1: a header row? 'doc_id' is a column name, 'passage' is none tfbert knows")):
    embedding_data.read_retrieval_set(queries, corpus, qrels)


def test_a_pair_judged_both_relevant_and_not_is_refused_naming_both_lines(tmp_path):
  """Sweep 30, A29: `q1 d2 1` then `q1 d2 0` counted the pair relevant while the log said
  the 0 line was left out."""
  queries = _write(tmp_path / "q.tsv", ["q1\tdog running"])
  corpus = _write(tmp_path / "c.tsv", ["d1\ta puppy", "d2\ta kitten"])
  qrels = _write(tmp_path / "r.tsv", ["q1\td1\t1", "q1\td2\t1", "q1\td2\t0"])
  with pytest.raises(ValueError, match=re.escape(
      f"{qrels}:3: query 'q1' and document 'd2' are judged not relevant here and relevant "
      "on line 2: keep one judgement")):
    embedding_data.read_retrieval_set(queries, corpus, qrels)
  again = _write(tmp_path / "again.tsv", ["q1\td1\t1", "q1\td1\t2"])  # Agreeing: read.
  assert embedding_data.read_retrieval_set(queries, corpus, again).qrels == {"q1": {"d1"}}


def test_a_beir_qrels_score_column_is_read_as_the_relevance_grade(tmp_path, caplog):
  """BEIR's qrels are `query-id<TAB>corpus-id<TAB>score`: once refused as malformed. A grade
  of 0 is a document judged not relevant (left out, not counted as relevant); grades above
  1 are relevant, said to be read as binary; a score that is not an integer is named."""
  queries = _write(tmp_path / "q.tsv", ["q1\tdog running", "q2\tkitten", "q3\tcar"])
  corpus = _write(tmp_path / "c.tsv", ["d1\ta puppy", "d2\ta kitten", "d3\ta truck"])
  qrels = _write(tmp_path / "r.tsv", ["query-id\tcorpus-id\tscore", "q1\td1\t1",
                                      "q1\td2\t0", "q2\td2\t2", "q3\td3\t1"])
  with caplog.at_level(logging.INFO, logger="absl"):
    got = embedding_data.read_retrieval_set(queries, corpus, qrels)
  assert got.qrels == {"q1": {"d1"}, "q2": {"d2"}, "q3": {"d3"}}
  assert "1 line(s) with score 0 or less: judged not relevant, left out" in caplog.text
  assert "relevance grades above 1 are read as relevant (1)" in caplog.text
  bad = _write(tmp_path / "bad.tsv", ["q1\td1\t1", "q2\td2\thigh"])
  with pytest.raises(ValueError, match=r"bad.tsv:2: score 'high' is not an integer relevance"):
    embedding_data.read_retrieval_set(queries, corpus, bad)
  four = _write(tmp_path / "four.tsv", ["q1\tQ0\td1\t1"])
  with pytest.raises(ValueError, match=r"four.tsv:1: expected query_id<TAB>doc_id or "
                     r"query_id<TAB>doc_id<TAB>score"):
    embedding_data.read_retrieval_set(queries, corpus, four)


def test_a_first_qrels_line_of_unknown_column_names_is_refused_as_a_possible_header(tmp_path):
  queries = _write(tmp_path / "q.tsv", ["q1\tdog running"])
  corpus = _write(tmp_path / "c.tsv", ["d1\ta puppy"])
  qrels = _write(tmp_path / "r.tsv", ["question\tpassage", "q1\td1"])
  with pytest.raises(ValueError, match=re.escape(
      f"r.tsv:1: query 'question' is not in {queries} (a header row? only one of column "
      "names such as qid, query-id, did, corpus-id is skipped: rename its columns or remove "
      "it)")):
    embedding_data.read_retrieval_set(queries, corpus, qrels)
  later = _write(tmp_path / "later.tsv", ["q1\td1", "q9\td1"])  # Not the first line: no hint.
  with pytest.raises(ValueError, match=r"later.tsv:2: query 'q9' is not in \S+$"):
    embedding_data.read_retrieval_set(queries, corpus, later)


def test_a_row_of_other_width_and_a_line_break_character_inside_a_cell(tmp_path):
  path = _write(tmp_path / "pairs.tsv", ["anchor\tpositive", "a cat\ta kitten\tEXTRA",
                                         "x\u2028rain\twater"])
  with pytest.raises(ValueError, match=r"pairs.tsv:2: 3 columns, but the header has 2 "
                                       r"\(anchor, positive\): a text holding a tab\?"):
    embedding_data.read_examples(path)
  path = _write(tmp_path / "ok.tsv", ["anchor\tpositive", "x\u2028rain\twater", "a\x85b\tc"])
  examples = embedding_data.read_examples(path)
  assert [e.texts for e in examples] == [("x\u2028rain", "water"), ("a\x85b", "c")]


@pytest.mark.parametrize("which", ["train", "queries", "qrels"])
def test_a_data_file_that_is_a_link_to_nothing_is_named_as_one(tmp_path, which):
  for name in ("queries", "corpus"):
    _write(tmp_path / f"{name}.tsv", ["q1\ttext"])
  _write(tmp_path / "qrels.tsv", ["q1\tq1"])
  link = tmp_path / "link.tsv"
  os.symlink("gone.tsv", link)
  with pytest.raises(FileNotFoundError) as e:
    if which == "train":
      embedding_data.read_examples(str(link))
    else:
      paths = {f"{name}_file": str(tmp_path / f"{name}.tsv")
               for name in ("queries", "corpus", "qrels")}
      embedding_data.read_retrieval_set(**{**paths, f"{which}_file": str(link)})
  what = {"train": "data file", "queries": "queries file", "qrels": "qrels file"}[which]
  assert str(e.value) == f"{what} {link} is a symbolic link to gone.tsv, which does not exist"


def test_a_missing_data_file_is_named_with_what_it_is(tmp_path):
  """Issue 47: a missing training or qrels file raised Python's bare "[Errno 2] No such file
  or directory", naming no role."""
  with pytest.raises(FileNotFoundError, match=f"^data file not found: {tmp_path}/no.tsv$"):
    embedding_data.read_examples(str(tmp_path / "no.tsv"))
