"""Small GLUE-format task files made offline, for the classifier tests.

`fruit_pairs` is an MRPC-format sentence-pair task (UTF-8 byte-order mark, MRPC's header
`Quality<TAB>#1 ID<TAB>#2 ID<TAB>#1 String<TAB>#2 String`): sentence 1 gives someone N
fruits, sentence 2 someone else M, N and M in 1..9, and the label is "1" iff N + M > 10.
Pairs with N + M = 10 are left out, so both labels are equally likely (36 of the 72
(N, M) pairs each): the trivial baseline is 50% accuracy. Neither sentence alone decides
the label: the best a model reading one sentence can do is 56 of 72 pairs right (N = 1
means "0" whatever M, N = 5 leaves 4 against 4), 77.8%.

(An earlier version asked whether both sentences name the same city: a tiny model learns
that only as a sudden jump after a seed-dependent number of steps, often too late for a
test.)
"""

import random

NAMES = ("Mira", "Oscar", "Lena", "Tomas", "Victor", "Nora", "Hugo", "Selma", "Ivan", "Clara",
         "Felix", "Greta", "Jonas", "Rosa", "Emil")
FRUITS = ("apples", "pears", "plums", "lemons", "peaches")
FIRST = ("{name} has {count} {fruit}.", "{name} bought {count} {fruit} today.")
SECOND = ("{name} brought {count} {fruit}.", "Then {name} added {count} {fruit} to the basket.")
MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
# Best accuracy from one sentence: sum over N of max(#M with N + M > 10, #M with N + M < 10).
ONE_SENTENCE_CEILING = sum(max(n - 1, 9 - n) for n in range(1, 10)) / 72


def fruit_pairs(count: int, seed: int) -> list[tuple[str, str, str]]:
  """`count` (label, sentence 1, sentence 2) rows, the (N, M) pairs drawn uniformly."""
  rng = random.Random(seed)
  pairs = [(n, m) for n in range(1, 10) for m in range(1, 10) if n + m != 10]
  rows = []
  for _ in range(count):
    n, m = rng.choice(pairs)
    first = rng.choice(FIRST).format(name=rng.choice(NAMES), count=n, fruit=rng.choice(FRUITS))
    second = rng.choice(SECOND).format(name=rng.choice(NAMES), count=m,
                                       fruit=rng.choice(FRUITS))
    rows.append(("1" if n + m > 10 else "0", first, second))
  return rows


def write_mrpc(path, rows) -> str:
  """Writes rows as an MRPC file (byte-order mark, header, ids); returns the path."""
  lines = [MRPC_HEADER] + [f"{label}\t{1000 + 2 * i}\t{1001 + 2 * i}\t{a}\t{b}"
                           for i, (label, a, b) in enumerate(rows)]
  with open(path, "w", encoding="utf-8-sig", newline="") as f:
    f.write("\n".join(lines) + "\n")
  return str(path)


def trained_custom_run(run):
  """Makes `run` (a pathlib.Path) look like a trained custom-task classifier run, without
  training: its run_config.json records a two-label custom format (returned) and
  checkpoints/ holds an (empty) ckpt-2 index, for tests of what a rerun takes from it."""
  from tfbert.classifier import classifier_run, glue_data  # TensorFlow: only when called.
  (run / "checkpoints").mkdir(parents=True)
  (run / "checkpoints" / "ckpt-2.index").write_bytes(b"")
  custom = glue_data.CustomFormat(text_a_column=0, label_column=1, labels=("neg", "pos"))
  (run / "run_config.json").write_text(classifier_run.ClassifierRunConfig(
      output_dir=str(run), task_name="custom", custom=custom, do_train=True,
      data_dir="d").to_json())
  return custom
