"""A small SQuAD v1.1-format question set made offline, for the main job and smoke tests.

Each paragraph states four facts, one per relation, about one or two people, from templates
("Mira was born in Rio de Janeiro."), shuffled among plain sentences of Python's own
documentation (`pydoc_data.topics`, shipped with CPython); each question asks for one fact
("Where was Mira born?"). A model that ignores the question cannot tell the four answers
apart (F1 ~25 at best), and answers are 1 to 3 words, so start and end both have to be
learned. Every `answer_start` points at its answer text, so the set passes
`tfbert.squad.squad_data`'s checks with nothing skipped.
"""

import functools
import json
import pydoc_data.topics
import random
import re

NAMES = ("Mira", "Oscar", "Lena", "Tomas", "Aisha", "Victor", "Nora", "Hugo", "Selma", "Ivan",
         "Clara", "Felix", "Greta", "Jonas", "Rosa", "Emil")
CITIES = ("Paris", "Rio de Janeiro", "Oslo", "New York", "Cairo", "San Francisco", "Lima",
          "Berlin", "Kyoto", "Buenos Aires", "Dublin", "Nairobi")
JOBS = ("doctor", "piano teacher", "pilot", "farmer", "software engineer", "baker", "judge",
        "fire fighter", "nurse", "chess coach")
PETS = ("cat", "parrot", "dog", "horse", "goldfish", "rabbit", "turtle", "hamster")
YEARS = tuple(str(y) for y in range(1950, 2011, 3))
# relation -> (fact template, question template, values).
RELATIONS = {
    "born": ("{name} was born in {value}.", "Where was {name} born?", CITIES),
    "job": ("{name} worked as a {value}.", "What did {name} work as?", JOBS),
    "pet": ("{name} owned a {value}.", "Which animal did {name} own?", PETS),
    "year": ("{name} got married in {value}.", "When did {name} get married?", YEARS),
}


@functools.lru_cache(maxsize=1)
def filler_sentences() -> tuple[str, ...]:
  """Plain one-line sentences of 6-16 words from Python's documentation topics, sorted."""
  text = re.sub(r"\s+", " ", " ".join(pydoc_data.topics.topics.values()))
  return tuple(sorted({s for s in re.split(r"(?<=[.!?])\s+", text)
                 if re.fullmatch(r"[A-Z][A-Za-z ,'()-]+\.", s) and 6 <= len(s.split()) <= 16}))


def synthetic_squad(num_paragraphs: int, seed: int, people: int = 2, fillers: int = 2) -> dict:
  """A SQuAD v1.1 JSON dict: one article of `num_paragraphs` paragraphs, 4 questions each.

  Args:
    num_paragraphs: paragraphs in the article.
    seed: makes the set (and the question ids, `s{seed}p{paragraph}q{question}`).
    people: distinct names per paragraph (1 to 4).
    fillers: documentation sentences mixed into each paragraph.

  Returns:
    {"version": "1.1", "data": [{"title", "paragraphs": [{"context", "qas"}]}]}.
  """
  if not 1 <= people <= 4:
    raise ValueError(f"people must be in [1, 4], got {people}")
  rng, filler = random.Random(seed), filler_sentences()
  paragraphs = []
  for p in range(num_paragraphs):
    names = rng.sample(NAMES, people)
    facts = [(name, relation, rng.choice(RELATIONS[relation][2]))
             for name, relation in zip(rng.choices(names, k=4), rng.sample(sorted(RELATIONS), 4))]
    sentences = [RELATIONS[r][0].format(name=n, value=v) for n, r, v in facts]
    sentences += rng.sample(filler, fillers)
    order = rng.sample(range(len(sentences)), len(sentences))
    context = " ".join(sentences[i] for i in order)
    qas = []
    for q, (name, relation, value) in enumerate(facts):
      sentence = RELATIONS[relation][0].format(name=name, value=value)
      start = context.index(sentence) + sentence.index(value, len(name))
      qas.append({"id": f"s{seed}p{p}q{q}", "question": RELATIONS[relation][1].format(name=name),
                  "answers": [{"text": value, "answer_start": start}]})
    paragraphs.append({"context": context, "qas": qas})
  return {"version": "1.1", "data": [{"title": f"synthetic {seed}", "paragraphs": paragraphs}]}


def write_squad_json(path: str, dataset: dict) -> str:
  """Writes a SQuAD JSON dict to `path` (UTF-8); returns `path`."""
  with open(path, "w", encoding="utf-8") as f:
    json.dump(dataset, f)
  return path
