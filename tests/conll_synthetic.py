"""A small named-entity task in CoNLL format, made offline, for the tagging tests.

Every sentence names people and places drawn from ONE pool of capitalized words, so a
word alone does not say its type: after "met" the next one or two pool words are a
person (B-person, I-person), after "in" a location, before "Labs" or "Corp" (which
belong to it) an organization. A tagger must read the context; looking words up does
not work: each pool word is a person, a location or part of an organization about
equally often, so the best tagging by the word alone gets about a third of the entities
right (`word_baseline_f1` computes it on the test's data). Some pool words split into
several WordPieces under the uncased BERT vocabulary, and some sentences carry U+FE0F
(a word with no WordPiece) as an O word.
"""

import collections
import random

POOL = ("Mira", "Oscar", "Lena", "Tomas", "Zyxwar", "Nora", "Quillon", "Selma", "Ivo", "Brekka")
FILLERS = ("today", "again", "twice", "\ufe0f", "early")


def _entity(rng, kind):
  words = [rng.choice(POOL) for _ in range(rng.choice((1, 2)))]
  if kind == "organization":
    words.append(rng.choice(("Labs", "Corp")))
  return list(zip(words, [f"B-{kind}"] + [f"I-{kind}"] * (len(words) - 1)))


def sentences(count: int, seed: int) -> list[list[tuple[str, str]]]:
  """`count` sentences of (word, tag)."""
  rng = random.Random(seed)
  result = []
  for _ in range(count):
    words = [("We", "O"), ("met", "O"), *_entity(rng, "person"), ("in", "O"),
             *_entity(rng, "location")]
    if rng.random() < 0.5:
      words += [("at", "O"), *_entity(rng, "organization")]
    words += [(rng.choice(FILLERS), "O"), (".", "O")]
    result.append(words)
  return result


def write(path, rows) -> str:
  """Writes sentences as CoNLL (`word<TAB>tag`, an empty line after each); returns path."""
  with open(path, "w", encoding="utf-8") as f:
    for sentence in rows:
      f.write("".join(f"{w}\t{t}\n" for w, t in sentence) + "\n")
  return str(path)


def word_baseline_tags(train, test) -> list[list[str]]:
  """Each test word's most frequent train tag (O for unseen words)."""
  counts = collections.defaultdict(collections.Counter)
  for sentence in train:
    for word, tag in sentence:
      counts[word][tag] += 1
  return [[counts[w].most_common(1)[0][0] if counts[w] else "O" for w, _ in s] for s in test]
