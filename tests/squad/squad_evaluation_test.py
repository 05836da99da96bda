"""Tests for tfbert.squad.squad_evaluation and tools/evaluate_squad.py.

v1.1: five real leaderboard prediction files reproduce the unmodified official
evaluate-v1.1.py's scores on the reconstructed dev set (shared data). v2.0: a hand-made
dataset with hand-computed scores.
"""

import json
import math
import os
import re

import pytest

from tests import tool_process
from tfbert.squad import squad_evaluation

DEV = "squad_v1.1_dev_reconstructed"

# Two answerable questions ("a", "b") and three unanswerable ones ("c", "d", "e").
V2_DATASET = {"version": "2.0", "data": [{"title": "T", "paragraphs": [{
    "context": "Paris is the capital of France.",
    "qas": [
        {"id": "a", "question": "What is Paris?", "is_impossible": False,
         "answers": [{"text": "the capital of France", "answer_start": 9}]},
        {"id": "b", "question": "Capital of France?", "is_impossible": False,
         "answers": [{"text": "Paris", "answer_start": 0}]},
        {"id": "c", "question": "Capital of Mars?", "is_impossible": True, "answers": []},
        {"id": "d", "question": "Capital of Venus?", "is_impossible": True, "answers": []},
        {"id": "e", "question": "Capital of Pluto?", "is_impossible": True, "answers": []}]}]}]}
# "capital" vs gold tokens [capital, of, france] ("the" is dropped): precision 1, recall
# 1/3, F1 0.5. "" is right exactly for unanswerable questions.
V2_PREDICTIONS = {"a": "capital", "b": "Paris", "c": "", "d": "France", "e": ""}
V2_SCORES = {
    "exact": 100 * 3 / 5, "f1": 100 * 3.5 / 5, "total": 5,
    "HasAns_exact": 100 * 1 / 2, "HasAns_f1": 100 * 1.5 / 2, "HasAns_total": 2,
    "NoAns_exact": 100 * 2 / 3, "NoAns_f1": 100 * 2 / 3, "NoAns_total": 3}
# Null odds <= 1 change no prediction (the official na_prob_thresh is 1.0). Best threshold,
# official `find_best_thresh`: start from "all unanswered" = 3 right (c, d, e), walk the ids
# by odds a(0.05) e(0.1) b(0.3) d(0.7) c(0.8) adding has-answer scores (a: 0 / F1 0.5,
# b: 1) and -1 for a wrong no-answer (d): EM peaks at 4 after b, F1 at 4.5 after b.
V2_NULL_ODDS = {"a": 0.05, "b": 0.3, "c": 0.8, "d": 0.7, "e": 0.1}
V2_BEST = {"best_exact": 100 * 4 / 5, "best_exact_thresh": 0.3,
           "best_f1": 100 * 4.5 / 5, "best_f1_thresh": 0.3}


def _write(tmp_path, name, content):
  path = tmp_path / name
  path.write_text(json.dumps(content), "utf-8")
  return str(path)


@pytest.mark.slow
def test_leaderboard_predictions_reproduce_the_official_script(shared_data):
  folder = os.path.join(shared_data, DEV)
  with open(os.path.join(folder, "expected_scores_official_evaluate_v1.1.json"),
            encoding="utf-8") as f:
    expected = json.load(f)
  assert len(expected) == 5
  dataset = os.path.join(folder, "dev-v1.1.reconstructed.json.gz")
  files = [os.path.join(folder, "predictions", name) for name in sorted(expected)]
  in_process = squad_evaluation.evaluate_files(dataset, files)
  # The tool scores all five in one run, in this process (tests/tool_process.py): what it
  # prints is the subject, not a fresh interpreter.
  tool = tool_process.run_tool("evaluate_squad", dataset, *files)
  assert tool.returncode == 0, tool.stderr[-2000:]
  from_tool = [json.loads(line) for line in tool.stdout.splitlines() if line.startswith("{")]
  for name, got, printed in zip(sorted(expected), in_process, from_tool, strict=True):
    want = expected[name]
    assert set(got) == set(printed) == {"exact_match", "f1"}, name
    for key in ("exact_match", "f1"):
      # Model Garden divides before scaling by 100, the official script after: the last
      # bit may differ (e.g. 40.14191106906338 vs ...339).
      assert got[key] == pytest.approx(want[key], abs=1e-9), (name, key)
      assert printed[key] == got[key], (name, key)


def test_v1_fixture_gold_answers_score_100_and_unanswered_score_0(shared_data, tmp_path,
                                                                  caplog):
  fixture = os.path.join(shared_data, "allennlp_squad_fixture.json")  # Has no "version".
  with open(fixture, encoding="utf-8") as f:
    qas = [qa for p in json.load(f)["data"][0]["paragraphs"] for qa in p["qas"]]
  gold = {qa["id"]: qa["answers"][-1]["text"] for qa in qas}  # Any gold answer counts.
  assert squad_evaluation.evaluate_files(fixture, [_write(tmp_path, "p.json", gold)]) == [
      {"exact_match": 100.0, "f1": 100.0}]
  del gold[qas[0]["id"]]
  gold[qas[1]["id"]] = "golden statue"  # F1 vs "a golden statue of the Virgin Mary": 4/7.
  gold["not-a-question"] = "ignored"
  caplog.set_level("WARNING", logger="absl")
  [scores] = squad_evaluation.evaluate_files(fixture, [q := _write(tmp_path, "q.json", gold)])
  assert scores == pytest.approx({"exact_match": 60.0,
                                  "f1": 100 * (3 + 2 * (2 / 2) * (2 / 5) / (1 + 2 / 5)) / 5})
  # Ignored with the warning v2.0 gives, not without a word (sweep 33, A2).
  assert f"{q}: 1 answer(s) for ids not in the dataset (e.g. ['not-a-question']), ignored" in (
      caplog.text)


def test_v2_scores_by_hand(tmp_path):
  dataset = _write(tmp_path, "v2.json", V2_DATASET)
  predictions = _write(tmp_path, "predictions.json", V2_PREDICTIONS)
  [scores] = squad_evaluation.evaluate_files(dataset, [predictions])
  assert list(scores) == list(V2_SCORES)  # The official script's keys, in its order.
  assert scores == pytest.approx(V2_SCORES, abs=1e-12)
  null_odds = _write(tmp_path, "null_odds.json", {**V2_NULL_ODDS, "unknown": 0.5})
  [with_odds] = squad_evaluation.evaluate_files(dataset, [predictions], null_odds)
  assert list(with_odds) == list(V2_SCORES) + list(V2_BEST)
  assert with_odds == pytest.approx({**V2_SCORES, **V2_BEST}, abs=1e-12)


def test_v2_extra_answers_are_ignored_with_a_warning_and_negative_odds_get_a_real_threshold(
    tmp_path, caplog):
  """Sweep 30, A36: an answer for an id not in a v2.0 dataset ended in the official
  script's KeyError (v1.1's ignores it). A49: with null odds below 0 (tfbert's), the
  search's all-unanswered start was reported as threshold 0.0, which answers those."""
  dataset = _write(tmp_path, "v2.json", V2_DATASET)
  extra = _write(tmp_path, "extra.json", {**V2_PREDICTIONS, "bogus": "x"})
  caplog.set_level("WARNING", logger="absl")
  [scores] = squad_evaluation.evaluate_files(dataset, [extra])
  assert scores == pytest.approx(V2_SCORES, abs=1e-12)
  assert f"{extra}: 1 answer(s) for ids not in the dataset (e.g. ['bogus']), ignored" in (
      caplog.text)
  # Every answered question wrong or unanswerable: the best is "all unanswered" (3 of 5).
  wrong = {"a": "x", "b": "x", "c": "x", "d": "x", "e": "x"}
  odds = {"a": -0.7, "b": -0.2, "c": 0.4, "d": 1.5, "e": -1.1}
  scores = squad_evaluation.evaluate(V2_DATASET, wrong, "v2.0", odds)
  assert scores["best_f1"] == pytest.approx(60.0)
  assert scores["best_f1_thresh"] == scores["best_exact_thresh"] == math.nextafter(-1.1, -2)
  # Applied, that threshold leaves every question unanswered: the best F1 (0.0 answers 3).
  applied = {q: "" if odds[q] > scores["best_f1_thresh"] else wrong[q] for q in wrong}
  assert squad_evaluation.evaluate(V2_DATASET, applied, "v2.0")["f1"] == pytest.approx(60.0)


def test_v2_needs_a_prediction_for_every_question(tmp_path):
  dataset = _write(tmp_path, "v2.json", V2_DATASET)
  partial = {k: v for k, v in V2_PREDICTIONS.items() if k != "d"}
  path = _write(tmp_path, "partial.json", partial)
  with pytest.raises(ValueError, match=re.escape(f"{path}: 1 of 5 questions have no "
                                                 "prediction (e.g. ['d'])")):
    squad_evaluation.evaluate_files(dataset, [path])


def test_null_odds_written_as_strings_are_named_so(tmp_path):
  """Sweep 30, A37: string values read as "a predictions file", naming no id or value."""
  dataset = _write(tmp_path, "v2.json", V2_DATASET)
  predictions = _write(tmp_path, "predictions.json", V2_PREDICTIONS)
  odds = _write(tmp_path, "odds.json", {k: str(v) for k, v in V2_NULL_ODDS.items()})
  with pytest.raises(ValueError, match=re.escape(
      f"{odds}: its values are strings holding numbers (e.g. 'a': '0.05'): write the null "
      "odds file's values as JSON numbers, unquoted")):
    squad_evaluation.evaluate_files(dataset, [predictions], odds)


def test_null_odds_missing_a_question_name_the_null_odds_file(tmp_path):
  """Sweep 17 P3: the message said "the null odds", not which file."""
  dataset = _write(tmp_path, "v2.json", V2_DATASET)
  predictions = _write(tmp_path, "predictions.json", V2_PREDICTIONS)
  odds = _write(tmp_path, "na_missing.json", {k: v for k, v in V2_NULL_ODDS.items() if k != "c"})
  with pytest.raises(ValueError, match=re.escape(f"{odds}: 1 of 5 questions have no null "
                                                 "odds (e.g. ['c'])")):
    squad_evaluation.evaluate_files(dataset, [predictions], odds)


def test_a_dataset_without_answers_is_not_scored(tmp_path):
  # squad_data reads a file to predict only (no question with answers); the old code refused
  # it while reading ("answers is missing"), and scoring must refuse it still.
  unlabelled = {"data": [{"paragraphs": [{"context": "Paris is the capital of France.",
                                          "qas": [{"id": "a", "question": "What is Paris?"}]}]}]}
  dataset = _write(tmp_path, "questions.json", unlabelled)
  with pytest.raises(ValueError, match=re.escape(f"{dataset}: no question has answers, so "
                                                 "there is nothing to score")):
    squad_evaluation.evaluate_files(dataset, [_write(tmp_path, "p.json", {"a": "capital"})])


def test_a_question_answered_twice_in_one_predictions_file_is_refused(tmp_path):
  """JSON readers keep the last of two equal keys: it was scored on one answer silently."""
  dataset = _write(tmp_path, "v2.json", V2_DATASET)
  text = json.dumps(V2_PREDICTIONS)
  twice = tmp_path / "twice.json"
  twice.write_text(text[:-1] + ', "d": "another answer"}', "utf-8")
  with pytest.raises(ValueError, match=re.escape(f"{twice}: key 'd' appears twice")):
    squad_evaluation.evaluate_files(dataset, [str(twice)])


def test_bad_predictions_files_are_named(tmp_path, shared_data):
  fixture = os.path.join(shared_data, "allennlp_squad_fixture.json")
  missing = str(tmp_path / "missing.json")
  with pytest.raises(FileNotFoundError, match=re.escape(f"predictions file not found: "
                                                        f"{missing}")):
    squad_evaluation.evaluate_files(fixture, [missing])
  garbage = tmp_path / "garbage.json"
  garbage.write_bytes(b"\x00\xffnot json")
  with pytest.raises(ValueError, match=re.escape(f"{garbage}:1: not UTF-8 text (byte 0xff")):
    squad_evaluation.evaluate_files(fixture, [str(garbage)])
  garbage.write_bytes(b"{not json")
  with pytest.raises(ValueError, match=re.escape(f"{garbage} is not valid")):
    squad_evaluation.evaluate_files(fixture, [str(garbage)])
  for content, message in (([1, 2], "expected a JSON object"),
                           ({"y": "a", "x": 3},
                            "value of 'x' should be an answer string, got 3")):
    path = _write(tmp_path, "bad.json", content)
    with pytest.raises(ValueError, match=re.escape(f"{path}: {message}")):
      squad_evaluation.evaluate_files(fixture, [path])
  odds = _write(tmp_path, "odds.json", {"x": 0.5})
  # The flag, its file and the dataset file named, and what to do (sweep 12 P4).
  with pytest.raises(ValueError, match=re.escape(
      f"--na_prob_file={odds}: null odds are for SQuAD v2.0, but {fixture} is SQuAD v1.1")
      + ".*drop --na_prob_file to score a v1.1 set"):
    squad_evaluation.evaluate_files(fixture, [_write(tmp_path, "p.json", {})], odds)


@pytest.mark.parametrize("written", ["v2.0", "2.0"])
def test_v2_version_strings_as_the_official_files_write_them(tmp_path, written):
  dataset = _write(tmp_path, "v2.json", {**V2_DATASET, "version": written})
  [scores] = squad_evaluation.evaluate_files(dataset, [_write(tmp_path, "p.json",
                                                              V2_PREDICTIONS)])
  assert scores == pytest.approx(V2_SCORES, abs=1e-12)
  with open(dataset, encoding="utf-8") as f:
    assert squad_evaluation.evaluate(json.load(f), V2_PREDICTIONS) == scores


def test_v2_dataset_labelled_1_1_is_not_scored_as_1_1(tmp_path):
  # Without "version" the file is v1.1 (as the official evaluate-v1.1.py assumes), but
  # question "c" is unanswerable: v1.1 scoring has no gold answer for it (Model Garden's
  # script failed with "max() arg is an empty sequence").
  unversioned = {"data": V2_DATASET["data"]}
  predictions = _write(tmp_path, "p.json", V2_PREDICTIONS)
  for name, data in (("none.json", unversioned), ("v11.json", {**unversioned, "version": "1.1"})):
    dataset = _write(tmp_path, name, data)
    with pytest.raises(ValueError, match=re.escape(
        f"{dataset}: data[0].paragraphs[0].qas[2].is_impossible: true, a SQuAD 2.0 question, "
        "but the file's \"version\" is 1.1")) as error:
      squad_evaluation.evaluate_files(dataset, [predictions])
    assert str(error.value).endswith('set "version": "v2.0" to score it as SQuAD 2.0')


@pytest.mark.parametrize("name, content, kind", [
    ("predictions.json", V2_PREDICTIONS, "a predictions file"),
    ("nbest_predictions.json", {"a": [{"text": "capital", "probability": 1.0}]},
     "an n-best predictions file"),
    ("null_odds.json", V2_NULL_ODDS, "a null odds file"),
])
def test_swapped_arguments_are_named_as_swapped(tmp_path, name, content, kind):
  """A run's per-question file given as the dataset, or the dataset as the predictions:
  said so, not "data is missing" or "value of 'data' should be an answer string"."""
  dataset = _write(tmp_path, "v2.json", V2_DATASET)
  given = _write(tmp_path, name, content)
  with pytest.raises(ValueError, match=re.escape(
      f"{given}: {kind} ({{question id: ...}}, no \"data\"), not a SQuAD dataset: the "
      "dataset comes first, then the predictions (usage: evaluate_squad.py DATASET_FILE "
      "PREDICTIONS_FILE")):
    squad_evaluation.evaluate_files(given, [dataset])
  with pytest.raises(ValueError, match=re.escape(
      f"{dataset}: a SQuAD dataset (it has \"data\"), not a predictions file {{question id: "
      "an answer string}: the dataset comes first")):
    squad_evaluation.evaluate_files(dataset, [dataset])


@pytest.mark.parametrize("role, name, content, kind, expected", [
    ("predictions", "nbest_predictions.json",
     {"a": [{"text": "capital", "probability": 0.052016798, "start_logit": 1.0}]},
     "an n-best predictions file", "a predictions file {question id: an answer string}: "
     "pass the run's predictions.json"),
    ("predictions", "null_odds.json", V2_NULL_ODDS, "a null odds file",
     "a predictions file {question id: an answer string}: pass the run's predictions.json"),
    ("null odds", "predictions.json", V2_PREDICTIONS, "a predictions file",
     "a null odds file {question id: a number}: pass the run's null_odds.json"),
])
def test_a_runs_other_per_question_file_is_named(tmp_path, role, name, content, kind,
                                                 expected):
  """The wrong output of a run as the predictions or null odds: one whole line naming
  the file, what it is and the file to pass, not a value cut mid-dict (sweep 19 P1)."""
  dataset = _write(tmp_path, "v2.json", V2_DATASET)
  given = _write(tmp_path, name, content)
  predictions = _write(tmp_path, "p.json", V2_PREDICTIONS)
  args = ([given], None) if role == "predictions" else ([predictions], given)
  with pytest.raises(ValueError) as error:
    squad_evaluation.evaluate_files(dataset, *args)
  assert str(error.value) == f"{given}: {kind}, not {expected}"


def test_a_bad_value_is_described_whole(tmp_path, shared_data):
  fixture = os.path.join(shared_data, "allennlp_squad_fixture.json")
  path = _write(tmp_path, "bad.json", {"x": "a", "y": [{"text": "t" * 80}]})
  with pytest.raises(ValueError) as error:
    squad_evaluation.evaluate_files(fixture, [path])
  assert str(error.value) == (f"{path}: value of 'y' should be an answer string, got a JSON "
                              "array of 1 item(s)")


@pytest.mark.parametrize("version", ["1.1", "2.0"])
@pytest.mark.parametrize("answer", [["capital"], None, 3])
def test_an_answer_that_is_no_text_is_named_by_its_question_in_python_calls(version, answer):
  """Sweep 31, B66: the file path named such a value, but `evaluate` given a dict passed it
  to the official scripts, which failed with "AttributeError: 'list' object has no
  attribute 'lower'"."""
  dataset = {**V2_DATASET, "version": version}
  with pytest.raises(ValueError, match=rf"predictions: the answer of question 'b' is "
                                       rf"{type(answer).__name__} .*: an answer is its text, "
                                       r"a str"):
    squad_evaluation.evaluate(dataset, {**V2_PREDICTIONS, "b": answer})
  with pytest.raises(ValueError, match=r"predictions: expected a dict \{question id: answer "
                                       r"text\}, got list"):
    squad_evaluation.evaluate(dataset, list(V2_PREDICTIONS.values()))
