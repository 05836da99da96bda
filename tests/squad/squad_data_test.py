"""Tests for tfbert.squad.squad_data: real SQuAD files, field-path errors, misaligned answers."""

import copy
import json
import logging
import os
import re
import unicodedata

import pytest

from tfbert.squad import squad_data

FIXTURE = "allennlp_squad_fixture.json"
SQUAD_DEV = "squad_v1.1_dev_reconstructed/dev-v1.1.reconstructed.json.gz"

V2_DATA = {"version": "2.0", "data": [{"title": "T", "paragraphs": [{
    "context": "Paris is the capital of France.",
    "qas": [{"id": "a", "question": "Capital of France?", "is_impossible": False,
             "answers": [{"text": "Paris", "answer_start": 0}]},
            {"id": "b", "question": "Capital of Mars?", "is_impossible": True,
             "answers": [], "plausible_answers": [{"text": "France", "answer_start": 24}]}]}]}]}


def _fixture(shared_data):
  with open(os.path.join(shared_data, FIXTURE), encoding="utf-8") as f:
    return json.load(f)


def _write(tmp_path, data, name="squad.json"):
  path = tmp_path / name
  path.write_text(json.dumps(data), "utf-8")
  return str(path)


def test_reads_the_allennlp_fixture_as_v1_1(shared_data):
  dataset = squad_data.read_squad_file(os.path.join(shared_data, FIXTURE), is_training=False)
  assert (dataset.version, dataset.is_v2, len(dataset.examples)) == ("1.1", False, 5)
  first = dataset.examples[0]
  assert first.qas_id == "5733be284776f41900661182"
  assert first.title == "University_of_Notre_Dame"
  assert first.answers == (squad_data.SquadAnswer("Saint Bernadette Soubirous", 515),)
  assert first.context_text[515:first.answers[0].answer_end] == "Saint Bernadette Soubirous"
  assert [len(e.answers) for e in dataset.examples] == [1, 3, 1, 1, 1]
  assert not any(e.is_impossible or e.plausible_answers for e in dataset.examples)
  # Every answer of the fixture sits at its offset, so training keeps all five.
  training = squad_data.read_squad_file(os.path.join(shared_data, FIXTURE), is_training=True)
  assert (len(training.examples), training.skipped) == (5, [])


def test_reads_the_gzipped_dev_set(shared_data):
  dataset = squad_data.read_squad_file(os.path.join(shared_data, SQUAD_DEV), is_training=True)
  examples = dataset.examples
  assert (dataset.version, len(examples), len(dataset.skipped)) == ("1.1", 10570, 0)
  assert len({e.title for e in examples}) == 48
  assert len({e.context_text for e in examples}) == 2067
  assert sum(len(e.answers) for e in examples) == 34726  # SOURCES.md's counts.


def test_reads_v2_unanswerable_questions_and_plausible_answers(tmp_path):
  dataset = squad_data.read_squad_file(_write(tmp_path, V2_DATA), is_training=True)
  assert dataset.is_v2 and not dataset.skipped
  answerable, impossible = dataset.examples
  assert not answerable.is_impossible and answerable.answers[0].text == "Paris"
  assert impossible.is_impossible and impossible.answers == ()
  assert impossible.plausible_answers == (squad_data.SquadAnswer("France", 24),)


def _break(data, path, value):
  """A copy of `data` with the field at `path` (a list of keys) set, or deleted if None."""
  data = copy.deepcopy(data)
  target = data
  for key in path[:-1]:
    target = target[key]
  if value is None:
    del target[path[-1]]
  else:
    target[path[-1]] = value
  return data


QA = ["data", 0, "paragraphs", 1, "qas", 2]
MALFORMED = [
    (["data"], None, "data is missing"),
    (["data"], {"a": 1}, 'data: expected list, got dict {"a": 1}'),
    (["version"], 3, "version: expected str, got int 3"),
    (["version"], "3.0", "version: expected '1.x' or '2.x', got '3.0'"),
    (["data", 0], [], r"data\[0\]: expected a JSON object, got list \[\]"),
    (["data", 0, "paragraphs", 1, "context"], 7,
     r"data\[0\].paragraphs\[1\].context: expected str, got int 7"),
    (QA + ["id"], None, r"data\[0\].paragraphs\[1\].qas\[2\].id is missing"),
    (QA + ["answers", 0, "answer_start"], "49",
     r"data\[0\].paragraphs\[1\].qas\[2\].answers\[0\].answer_start: expected int, got str"),
    (QA + ["answers", 0, "answer_start"], True,
     r"qas\[2\].answers\[0\].answer_start: expected int, got bool true"),
    (QA + ["answers", 0, "answer_start"], -1, r"qas\[2\].answers\[0\].answer_start: negative"),
    (QA + ["answers", 0, "text"], None, r"qas\[2\].answers\[0\].text is missing"),
    # A file to predict may be unlabelled, but not in part (training: see below).
    (QA + ["answers"], [], r"data\[0\].paragraphs\[1\].qas\[2\]: question "
     r"'5733b1da4776f41900661067' has no answers, but data\[0\].paragraphs\[0\].qas\[0\]: "
     r"question '5733be284776f41900661182' has: give every question its answers"),
    (QA + ["is_impossible"], "no", r"qas\[2\].is_impossible: expected bool, got str"),
    (QA + ["is_impossible"], True, r"qas\[2\].answers: is_impossible is true but 1 answer"),
    (QA + ["id"], "5733b1da4776f41900661068",
     r"qas\[2\].id: '5733b1da4776f41900661068' is also the id of data\[0\].paragraphs\[1\]"
     r".qas\[0\]"),
]


@pytest.mark.parametrize("path,value,message", MALFORMED)
def test_malformed_files_name_the_file_and_the_field_path(shared_data, tmp_path, path, value,
                                                          message):
  file = _write(tmp_path, _break(_fixture(shared_data), path, value))
  with pytest.raises(ValueError, match=message) as error:
    squad_data.read_squad_file(file, is_training=False)
  assert str(error.value).startswith(f"{file}: ")


def _without_answers(data, empty):
  """`data` with every question's answers removed (`empty`: "answers": [] instead)."""
  data = copy.deepcopy(data)
  for article in data["data"]:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        del qa["answers"]
        qa.update({"answers": []} if empty else {})
  return data


@pytest.mark.parametrize("empty", [False, True])
def test_questions_without_answers_are_read_to_predict_but_not_to_train(
    shared_data, tmp_path, caplog, empty):
  # Old code: refused 'qas[0].answers is missing' (sweep 6, Q15): google-research/bert's
  # run_squad predicts such a file.
  file = _write(tmp_path, _without_answers(_fixture(shared_data), empty))
  with caplog.at_level(logging.INFO):
    dataset = squad_data.read_squad_file(file, is_training=False)
  assert not dataset.has_answers and len(dataset.examples) == 5
  assert all(e.answers == () and not e.is_impossible for e in dataset.examples)
  assert f"{file}: no question has answers: its 5 questions can be predicted, not scored" in (
      caplog.text)
  message = ("answers: empty, but the question is not marked is_impossible" if empty else
             "answers is missing")
  with pytest.raises(ValueError, match=re.escape(f"{file}: data[0].paragraphs[0].qas[0]."
                                                 f"{message}")):
    squad_data.read_squad_file(file, is_training=True)


def test_a_file_with_answers_or_unanswerable_questions_has_answers(shared_data, tmp_path):
  assert squad_data.read_squad_file(_write(tmp_path, V2_DATA), is_training=False).has_answers
  assert squad_data.read_squad_file(os.path.join(shared_data, FIXTURE), False).has_answers
  # An unanswerable question still writes its (empty) answers in a file that is scored.
  unanswerable = _break(V2_DATA, ["data", 0, "paragraphs", 0, "qas", 1, "answers"], None)
  with pytest.raises(ValueError, match=re.escape("data[0].paragraphs[0].qas[1].answers is "
                                                 "missing")):
    squad_data.read_squad_file(_write(tmp_path, unanswerable), is_training=False)


def test_unreadable_files_name_the_file(tmp_path):
  missing = str(tmp_path / "nowhere.json")
  with pytest.raises(FileNotFoundError, match=re.escape(missing)):
    squad_data.read_squad_file(missing, is_training=False)
  garbage = tmp_path / "garbage.json"
  garbage.write_text("{not json", "utf-8")
  with pytest.raises(ValueError, match=re.escape(f"{garbage} is not valid")):
    squad_data.read_squad_file(str(garbage), is_training=False)
  top_list = _write(tmp_path, [1, 2], "list.json")
  with pytest.raises(ValueError, match=re.escape(f"{top_list}: (top level): expected a JSON")):
    squad_data.read_squad_file(top_list, is_training=False)


def test_misaligned_training_answers_are_reported_counted_and_skipped(shared_data, tmp_path,
                                                                      caplog):
  data = _break(_fixture(shared_data), QA + ["answers", 0, "answer_start"], 50)  # Off by one.
  data = _break(data, ["data", 0, "paragraphs", 0, "qas", 0, "answers", 0, "answer_start"],
                10000)  # Past the end of the context.
  file = _write(tmp_path, data)
  with caplog.at_level(logging.WARNING):
    dataset = squad_data.read_squad_file(file, is_training=True)
  assert [e.qas_id for e in dataset.examples] == [
      "5733be284776f4190066117e", "5733b1da4776f41900661068", "5733b1da4776f4190066106b"]
  assert dataset.skipped == [
      squad_data.SkippedExample(
          "5733be284776f41900661182", "data[0].paragraphs[0].qas[0].answers[0]",
          "answer text 'Saint Bernadette Soubirous' is not at answer_start 10000; the "
          "context has '' there"),
      squad_data.SkippedExample(
          "5733b1da4776f41900661067", "data[0].paragraphs[1].qas[2].answers[0]",
          "answer text 'an early wind tunnel' is not at answer_start 50; the context has "
          "'n early wind tunnel ' there")]
  assert sum("Skipping training question" in r.message for r in caplog.records) == 2
  # Evaluation does not use answer_start: every question is kept, untouched.
  evaluation = squad_data.read_squad_file(file, is_training=False)
  assert len(evaluation.examples) == 5 and not evaluation.skipped
  assert evaluation.examples[4].answers[0].answer_start == 50


def test_an_answer_in_another_unicode_normalization_than_its_context_is_named_so(tmp_path):
  """Sweep 29, A58: an NFD answer "café" against an NFC context was skipped with "the
  context has 'café ' there": two strings that print alike."""
  answer = unicodedata.normalize("NFD", "café")
  data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{
      "context": "The café opened.", "qas": [
          {"id": "q", "question": "What opened?",
           "answers": [{"text": answer, "answer_start": 4}]},
          {"id": "q2", "question": "What did the café do?",
           "answers": [{"text": "opened", "answer_start": 9}]}]}]}]}
  skipped = squad_data.read_squad_file(_write(tmp_path, data), is_training=True).skipped
  assert [s.reason for s in skipped] == [
      f"answer text {answer!r} is not at answer_start 4; the context has 'café ' there; the "
      "context holds it in the same letters in another Unicode normalization (NFC and NFD: "
      "an accented letter as one code point, or as a letter and a combining mark), and "
      "tfbert compares them as written: normalize the file to NFC"]


@pytest.mark.parametrize("written, version", [
    ("1.1", "1.1"), ("v1.1", "1.1"), (None, "1.1"), ("2.0", "2.0"), ("v2.0", "2.0")])
def test_version_strings_as_the_official_files_write_them(shared_data, tmp_path, written,
                                                          version):
  # The real v1.1 excerpt (no "version") and the v2.0 sample, under each spelling: the
  # official dev-v1.1.json writes "1.1", dev-v2.0.json and train-v2.0.json "v2.0".
  data = _fixture(shared_data) if version == "1.1" else copy.deepcopy(V2_DATA)
  data.pop("version", None)
  if written is not None:
    data["version"] = written
  dataset = squad_data.read_squad_file(_write(tmp_path, data), is_training=False)
  assert (dataset.version, dataset.is_v2) == (version, version == "2.0")
  assert dataset.unanswerable == (None if version == "1.1" else
                                  "data[0].paragraphs[0].qas[1].is_impossible")
  assert squad_data.squad_version(written) == version


def test_files_without_questions_are_refused_naming_the_file(shared_data, tmp_path):
  for data, message in (({"version": "1.1", "data": []}, "data: no questions (in 0 articles)"),
                        ({"data": [{"paragraphs": [{"context": "c", "qas": []}]}]},
                         "data: no questions (in 1 articles)")):
    file = _write(tmp_path, data)
    for is_training in (False, True):
      with pytest.raises(ValueError, match=re.escape(f"{file}: {message}")):
        squad_data.read_squad_file(file, is_training)
  # Training: nothing left once the answers that are not at their offset are skipped.
  data = _fixture(shared_data)
  for qa in (qa for p in data["data"][0]["paragraphs"] for qa in p["qas"]):
    qa["answers"][0]["answer_start"] += 1
  file = _write(tmp_path, data)
  with pytest.raises(ValueError, match=re.escape(
      f"{file}: none of its 5 questions can be used (first: "
      "data[0].paragraphs[0].qas[0].answers[0]: answer text 'Saint Bernadette Soubirous'")):
    squad_data.read_squad_file(file, is_training=True)
  assert len(squad_data.read_squad_file(file, is_training=False).examples) == 5


def test_a_squad_file_that_is_a_link_to_nothing_is_named_as_one(tmp_path):
  os.symlink("gone.json", tmp_path / "dev.json")
  with pytest.raises(FileNotFoundError) as e:
    squad_data.read_squad_file(str(tmp_path / "dev.json"), is_training=False)
  assert str(e.value) == (f"SQuAD JSON file {tmp_path / 'dev.json'} is a symbolic link to "
                          "gone.json, which does not exist")


@pytest.mark.parametrize("field, blank", [("question", " \t "), ("context", "\n"),
                                          ("question", "\u200b \u200b"), ("context", "\ufeff")])
def test_a_blank_question_or_context_is_skipped_naming_its_field_path(
    tmp_path, shared_data, caplog, field, blank):
  """Sweep 16 S1: a question "   " was trained on and answered without a word. A blank
  question or context (nothing to ask, or nothing to answer from) is skipped with a warning
  naming its field path and id, as a misplaced training answer is, in training and
  prediction. Blank is no wordpiece: zero-width spaces too (sweep 33, A25)."""
  data = _fixture(shared_data)
  paragraph = data["data"][0]["paragraphs"][0]
  if field == "question":
    paragraph["qas"][0]["question"] = blank
    path, skipped = "data[0].paragraphs[0].qas[0].question", 1
  else:
    paragraph["context"] = blank
    path, skipped = "data[0].paragraphs[0].context", len(paragraph["qas"])
  file = _write(tmp_path, data)
  total = sum(len(p["qas"]) for a in data["data"] for p in a["paragraphs"])
  for is_training in (True, False):
    caplog.clear()
    with caplog.at_level(logging.WARNING):
      dataset = squad_data.read_squad_file(file, is_training)
    assert len(dataset.examples) == total - skipped
    assert dataset.skipped[0].field_path == path
    assert f"{paragraph['qas'][0]['id']} ({path}): the {field} is blank" in caplog.text
