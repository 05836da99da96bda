"""Tests for tfbert.tagging.tagging_metrics: conlleval's entity F1, the seven official WNUT
2017 scores, the join of a system output to its gold file by line position, and
tools/evaluate_ner.py."""

import json
import os

import pytest
from seqeval.metrics import f1_score

from tests import tool_process
from tfbert.tagging import conll, tagging_metrics

# The seven files of wnut17/submissions/, named as expected_scores.json names them.
SUBMISSIONS = ("arcada", "drexel_cci", "flytxt", "mic-cis.txt", "sjtu_adapt.txt",
               "spinningbytes.txt", "uh_ritual")


def test_entities_and_scores_by_hand():
  gold = [["B-per", "I-per", "O", "B-loc"], ["B-org", "O"]]
  # Entities: (0, per, 0-1) right; (0, loc, 3) typed wrong as org; (1, org, 0) found
  # with a stray I-org after it ... which begins a second org entity (conlleval).
  predicted = [["B-per", "I-per", "O", "B-org"], ["B-org", "I-per"]]
  assert tagging_metrics.entities(gold) == {(0, "per", 0, 1), (0, "loc", 3, 3), (1, "org", 0, 0)}
  assert tagging_metrics.entities(predicted) == {(0, "per", 0, 1), (0, "org", 3, 3),
                                                 (1, "org", 0, 0), (1, "per", 1, 1)}
  scores = tagging_metrics.entity_scores(gold, predicted)
  assert (scores["gold"], scores["pred"], scores["correct"]) == (3, 4, 2)
  assert scores["precision"] == 50.0 and scores["recall"] == pytest.approx(200 / 3)
  assert scores["f1"] == pytest.approx(2 * 50 * 200 / 3 / (50 + 200 / 3))
  assert scores["accuracy"] == pytest.approx(100 * 4 / 6)
  assert scores["per_type"]["loc"] == {"gold": 1, "pred": 0, "correct": 0, "precision": 0.0,
                                       "recall": 0.0, "f1": 0.0}
  # seqeval's own micro F1 agrees (a fraction there).
  assert scores["f1"] == pytest.approx(100 * f1_score(gold, predicted), abs=1e-12)


def test_lengths_must_match():
  with pytest.raises(ValueError, match="sentence 0: 2 gold tags, 1 predicted"):
    tagging_metrics.entity_scores([["O", "O"]], [["O"]])


def test_read_predictions_errors_name_the_line(tmp_path):
  gold_path = tmp_path / "gold"
  gold_path.write_text("a B-x\nb O\n\nc O\n")
  gold = conll.read_conll(str(gold_path))
  cases = {"a B-x\r\nb\r\n\r\nc O": ":2: need a token and a tag",
           "a B-x\nb O\n\nc O\nd O\n": ":5: a prediction where",
           "a B-x\nb O\nx O\nc O\n": ":3: a prediction where",
           "a B-x\nb Q\n\nc O\n": ":2: predictions file: its last field, tag 'Q'"}
  for text, message in cases.items():
    path = tmp_path / "pred"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
      tagging_metrics.read_predictions(str(path), gold, str(gold_path))


def test_a_predictions_file_laid_out_tag_first_is_named_as_the_predictions(tmp_path):
  """Sweep 20 P1: "tag '@paulwalk' is not O, ..." of a tag-first predictions file said
  neither that it was the predictions file nor that the column flags describe only the
  gold file."""
  gold_path = tmp_path / "gold"
  gold_path.write_text("B-x\ta\nO\tb\n")
  gold = conll.read_conll(str(gold_path), token_column=1, tag_column=0)
  with pytest.raises(ValueError) as error:
    tagging_metrics.read_predictions(str(gold_path), gold, str(gold_path))
  assert str(error.value) == (
      f"{gold_path}:1: predictions file: its last field, tag 'a' is not O, B-<type> or "
      "I-<type> (a predictions file holds the word, then the predicted tag last; "
      f"evaluate_ner's --token_column and --tag_column describe the gold file {gold_path} "
      "only); its first field is the tag 'B-x': the file is laid out tag first: write each "
      "line as word<TAB>tag")


def test_read_predictions_names_the_first_misaligned_line(tmp_path):
  """An extra sentence break is named where it is, not where the shifted words end up; a
  file that ends early says where it ends and where the gold file goes on to."""
  gold_path = tmp_path / "gold"
  gold_path.write_text("a O\nb O\nc O\n\nd O\ne O\n")
  gold = conll.read_conll(str(gold_path))
  path = tmp_path / "pred"
  path.write_text("a O\n\nb O\nc O\n\nd O\ne O\n")
  with pytest.raises(ValueError, match=rf"^{path}:2: a blank line \(sentence break\) where "
                     rf"{gold_path}:2 has the word 'b'"):
    tagging_metrics.read_predictions(str(path), gold, str(gold_path))
  path.write_text("a O\nb O\nc O\n\n")
  with pytest.raises(ValueError, match=rf"^{path} ends at line 4, {gold_path} goes on to line 6 "
                     r"\(its line 5, 'd', is in sentence 2 of 2\): incomplete predictions"):
    tagging_metrics.read_predictions(str(path), gold, str(gold_path))


def test_docstart_lines_are_skipped_in_the_gold_and_the_predictions(tmp_path):
  """run_ner's predictions (`conll.format_conll`) leave out the gold's -DOCSTART- lines and
  the blank line after each; a file keeping them is joined alike."""
  gold_path = tmp_path / "gold"
  gold_path.write_text("-DOCSTART-\tO\n\nI\tB-per\nam\tO\n\n-DOCSTART- O\n\nhe\tO\n")
  gold = conll.read_conll(str(gold_path))
  path = tmp_path / "pred"
  path.write_text(conll.format_conll(gold, [["I-per", "O"], ["B-loc"]]))
  expected = [["I-per", "O"], ["B-loc"]]
  assert tagging_metrics.read_predictions(str(path), gold, str(gold_path)) == expected
  path.write_text("-DOCSTART- O\n\nI I-per\nam O\n\n-DOCSTART- O\n\nhe B-loc\n")
  assert tagging_metrics.read_predictions(str(path), gold, str(gold_path)) == expected
  # Given in memory: the gold's separators are passed.
  assert tagging_metrics.read_predictions(
      str(path), gold, "g", gold_document_lines=conll.document_lines(
          gold_path.read_text().split("\n"))) == expected
  # A misalignment says DOCSTART lines are skipped, and how many each file has.
  path.write_text("I I-per\nam O\nhe B-loc\n")
  with pytest.raises(ValueError, match=r":3: a prediction where .*\(-DOCSTART- lines and the "
                     r"blank line after each are skipped in both files: .*gold has 2, .* 0"):
    tagging_metrics.read_predictions(str(path), gold, str(gold_path))


def test_repeated_blank_lines_count_as_one_sentence_break_in_either_file(tmp_path):
  """Sweep 27, A65: run_ner's own predictions of a gold file with two blank lines between
  sentences (one in the predictions) were refused as "a prediction where ... has no word"."""
  gold_path = tmp_path / "gold"
  gold_path.write_text("I\tB-per\nam\tO\n\n\n\nhe\tO\n\n\nshe\tO\n")
  gold = conll.read_conll(str(gold_path))
  path = tmp_path / "pred"
  expected = [["I-per", "O"], ["B-loc"], ["O"]]
  path.write_text(conll.format_conll(gold, expected))
  assert tagging_metrics.read_predictions(str(path), gold, str(gold_path)) == expected
  path.write_text("I I-per\nam O\n\n\nhe B-loc\n\nshe O\n")  # Its own layout.
  assert tagging_metrics.read_predictions(str(path), gold, str(gold_path)) == expected
  path.write_text("I I-per\nam O\nhe B-loc\n\nshe O\n")  # A break missing: refused.
  with pytest.raises(ValueError, match=r"pred:3: a prediction where .* has no word"):
    tagging_metrics.read_predictions(str(path), gold, str(gold_path))


def test_read_predictions_refuses_the_tokens_of_another_text(tmp_path):
  """Two of five tokens changed is not a normalization: the first is named, with both lines."""
  gold_path = tmp_path / "gold"
  gold_path.write_text("Alan B-PER\nwent O\nhome O\n\nBee B-LOC\nsat O\n")
  gold = conll.read_conll(str(gold_path))
  path = tmp_path / "pred"
  path.write_text("Bob B-PER\nran O\nhome O\n\nBee B-LOC\nsat O\n")
  with pytest.raises(ValueError) as error:
    tagging_metrics.read_predictions(str(path), gold, str(gold_path))
  assert str(error.value).startswith(
      f"{path}:1: token 'Bob' is not the gold file's 'Alan' ({gold_path}:1); 2 of 5 tokens "
      f"differ from {gold_path}'s")
  # One changed token in five, and changes of case or Unicode form, are a system's
  # normalization (as in the MIC-CIS submission): scored with the gold words.
  path.write_text("ALAN B-PER\nwent O\nhOme O\n\nBe B-LOC\nsat O\n")
  assert tagging_metrics.read_predictions(str(path), gold, str(gold_path)) == [
      ["B-PER", "O", "O"], ["B-LOC", "O"]]
  with pytest.raises(ValueError, match="1 of 5 tokens differ"):
    tagging_metrics.read_predictions(str(path), gold, str(gold_path), max_changed_tokens=0.1)


def test_a_changed_token_below_the_refusal_share_is_warned_of_naming_both_files(tmp_path,
                                                                               caplog):
  """Sweep 23, S3: one word of run_ner's predictions changed (a file of the same shape
  predicting another text) was scored without a word. Scored still (a system's
  normalization, as MIC-CIS's), but the first change is named with both files' lines and
  words, and the count; run_ner's own predictions (`conll.format_conll` of the words as
  read: Unicode spaces, invisible characters, a word with a space, CRLF, -DOCSTART-) pass
  without one."""
  gold_path = tmp_path / "gold"
  gold_path.write_bytes("-DOCSTART- O\r\n\r\nNew York\tB-LOC\r\nwent\tO\r\n\r\n"
                        "a\u00a0b B-PER\n\u3000x\u200bz O\ne\u0301 O\nHOME O\n".encode())
  gold = conll.read_conll(str(gold_path))
  path = tmp_path / "pred"
  path.write_text(conll.format_conll(gold, [list(s.tags) for s in gold]), encoding="utf-8")
  with caplog.at_level("WARNING"):
    assert tagging_metrics.read_predictions(str(path), gold, str(gold_path)) == [
        ["B-LOC", "O"], ["B-PER", "O", "O", "O"]]
  assert not [r for r in caplog.records if "differ" in r.getMessage()]
  lines = path.read_text(encoding="utf-8").split("\n")
  lines[4] = "XXXX\tO"  # The gold's line 7 ("\u3000x\u200bz").
  path.write_text("\n".join(lines), encoding="utf-8")
  with caplog.at_level("WARNING"):
    assert tagging_metrics.read_predictions(str(path), gold, str(gold_path)) == [
        ["B-LOC", "O"], ["B-PER", "O", "O", "O"]]
  assert [r.getMessage() for r in caplog.records if "differ" in r.getMessage()] == [
      f"{path}:5: token 'XXXX' is not the gold file's {gold[1].words[1]!r} ({gold_path}:7); 1 of 6 "
      f"tokens differ from {gold_path}'s (a system's normalization of its text? up to 25% may "
      f"differ): scored with the gold words; if these are predictions of another file, "
      f"predict {gold_path} itself"]


def test_predicted_entity_types_the_gold_never_has_are_warned_of_naming_both_sides(tmp_path,
                                                                                    caplog):
  """Sweep 33, A98: predictions of another tag set (PER, LOC against person, location)
  scored F1 0.0 without a word. Scored still (a system may predict a type the gold lacks),
  with a warning naming the unknown types and the gold's types never predicted."""
  gold_path = tmp_path / "gold"
  gold_path.write_text("John B-person\nin O\nNew B-location\nYork I-location\n\n"
                       "Ann B-person\nsang O\n", encoding="utf-8")
  gold = conll.read_conll(str(gold_path))
  path = tmp_path / "pred"
  path.write_text("John B-PER\nin O\nNew B-LOC\nYork I-LOC\n\nAnn B-person\nsang O\n",
                  encoding="utf-8")
  with caplog.at_level("WARNING"):
    tagging_metrics.read_predictions(str(path), gold, str(gold_path))
  assert [r.getMessage() for r in caplog.records if "type" in r.getMessage()] == [
      f"{path}: predicts entity type(s) LOC, PER, which {gold_path} never has; {gold_path}'s "
      "type(s) never predicted: location (its types: location, person): an entity of a type "
      "the gold lacks never matches; predictions of another tag set?"]
  caplog.clear()
  path.write_text("John B-person\nin O\nNew O\nYork O\n\nAnn O\nsang O\n", encoding="utf-8")
  with caplog.at_level("WARNING"):  # Types of the gold's only, some never predicted: silent.
    tagging_metrics.read_predictions(str(path), gold, str(gold_path))
  assert not caplog.records


@pytest.mark.parametrize("team", SUBMISSIONS)
def test_the_official_wnut17_scores_of_every_submission(shared_data, team):
  """Counts exactly equal, F1 to 1e-9 of the F1 of the official counts, and the published
  Table 2 figure (two decimals) by rounding. The submissions are CRLF, space- or
  TAB-separated, without the final empty line, and mic-cis changed its tokens."""
  folder = os.path.join(shared_data, "wnut17")
  with open(os.path.join(folder, "expected_scores.json")) as f:
    expected = json.load(f)["submissions"][team]
  gold = conll.read_conll(os.path.join(folder, "emerging.test.annotated"))
  predicted = tagging_metrics.read_predictions(
      os.path.join(folder, "submissions", team), gold)
  scores = tagging_metrics.entity_scores([s.tags for s in gold], predicted)
  official = expected["entity"]
  assert (scores["gold"], scores["pred"], scores["correct"]) == (
      official["gold"], official["pred"], official["correct"])
  precision, recall = official["correct"] / official["pred"], official["correct"] / official["gold"]
  assert scores["f1"] == pytest.approx(100 * 2 * precision * recall / (precision + recall),
                                       abs=1e-9)
  # The JSON holds percentages rounded to 4 decimals, the paper to 2.
  assert scores["f1"] == pytest.approx(official["f1"], abs=5e-5)
  assert round(scores["f1"], 2) == expected["paper_f1_entity"]
  assert scores["accuracy"] == pytest.approx(expected["token_accuracy"], abs=5e-5)
  for kind, counts in expected["entity_per_type"].items():
    ours = scores["per_type"].get(kind, {"gold": 0, "pred": 0, "correct": 0})
    assert (ours["gold"], ours["pred"], ours["correct"]) == (
        counts["gold"], counts["pred"], counts["correct"]), kind


def test_the_tool_prints_one_json_line_per_file_and_names_a_bad_line(shared_data, tmp_path):
  folder = os.path.join(shared_data, "wnut17")
  gold = os.path.join(folder, "emerging.test.annotated")
  files = [os.path.join(folder, "submissions", name) for name in ("arcada", "uh_ritual")]
  # In this process (tests/tool_process.py): what the tool prints is the subject, not a
  # fresh interpreter; stdout holds native output too, so "only JSON lines" still holds.
  run = tool_process.run_tool("evaluate_ner", gold, *files)
  assert run.returncode == 0, run.stderr[-3000:]
  lines = [json.loads(line) for line in run.stdout.splitlines()]
  with open(os.path.join(folder, "expected_scores.json")) as f:
    expected = json.load(f)["submissions"]
  assert [round(line["f1"], 2) for line in lines] == [
      expected[name]["paper_f1_entity"] for name in ("arcada", "uh_ritual")]
  assert sorted(lines[0]["per_type"]) == ["corporation", "creative-work", "group", "location",
                                          "person", "product"]
  broken = tmp_path / "broken"
  broken.write_text("a B-x\nb I-y\n")
  run = tool_process.run_tool("evaluate_ner", str(broken), files[0])
  assert run.returncode == 1 and f"{broken}:2: I-y after B-x breaks IOB2" in run.stderr
  # Every file is read before any score is printed (sweep 29, A39: the first file's line,
  # then the refusal of the second, and the third never scored).
  missing = tmp_path / "missing"
  run = tool_process.run_tool("evaluate_ner", gold, files[0], str(missing), files[1])
  assert run.returncode == 1 and str(missing) in run.stderr
  assert "{" not in run.stdout, run.stdout[-2000:]
