"""Tests for tools.demos.squad_synthetic: valid SQuAD v1.1, answerable only by reading the
question."""

import collections

import pytest

from tfbert.squad import squad_data
from tfbert_tools.demos import squad_synthetic


def _questions(dataset):
  for paragraph in dataset["data"][0]["paragraphs"]:
    for qa in paragraph["qas"]:
      yield paragraph["context"], qa


def test_every_answer_sits_at_its_answer_start_and_the_reader_skips_nothing(tmp_path):
  dataset = squad_synthetic.synthetic_squad(7, seed=3)
  for context, qa in _questions(dataset):
    answer = qa["answers"][0]
    assert context[answer["answer_start"]:][:len(answer["text"])] == answer["text"]
  path = squad_synthetic.write_squad_json(str(tmp_path / "s.json"), dataset)
  read = squad_data.read_squad_file(path, is_training=True)
  assert len(read.examples) == 28 and not read.skipped


def test_each_paragraph_asks_four_distinct_relations_with_answers_among_four_candidates():
  dataset = squad_synthetic.synthetic_squad(25, seed=11, people=1, fillers=3)
  for paragraph in dataset["data"][0]["paragraphs"]:
    questions = [qa["question"] for qa in paragraph["qas"]]
    assert len(set(questions)) == 4
    # One person: questions differ only by relation, so the answer depends on the question.
    assert len({q.split()[0] for q in questions}) >= 3  # Where / What / Which / When
    answers = [qa["answers"][0]["text"] for qa in paragraph["qas"]]
    assert all(a in paragraph["context"] for a in answers)
    assert paragraph["context"].count(".") >= 4 + 3  # 4 facts + 3 fillers (fillers end in ".")


def test_the_same_seed_makes_the_same_set_and_ids_are_unique():
  a, b = (squad_synthetic.synthetic_squad(5, seed=2) for _ in range(2))
  assert a == b
  assert a != squad_synthetic.synthetic_squad(5, seed=4)
  ids = [qa["id"] for _, qa in _questions(squad_synthetic.synthetic_squad(30, seed=1))]
  assert len(ids) == len(set(ids)) == 120
  assert collections.Counter(len(i.split("q")[-1]) for i in ids) == {1: 120}


def test_fillers_are_plain_documentation_sentences():
  fillers = squad_synthetic.filler_sentences()
  assert len(fillers) > 100
  assert all(f.endswith(".") and 6 <= len(f.split()) <= 16 for f in fillers)


def test_people_out_of_range_is_an_error():
  with pytest.raises(ValueError, match="people"):
    squad_synthetic.synthetic_squad(1, seed=0, people=5)
