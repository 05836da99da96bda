"""Scores SQuAD predictions with the reference evaluation, printing the official JSON.

  python tools/evaluate_squad.py DATASET_FILE PREDICTIONS_FILE [PREDICTIONS_FILE ...]

Like the official evaluate-v1.1.py / evaluate-v2.0.py: the version comes from the
dataset's "version" as the official files write it ("1.1", "v2.0"; none means v1.1), and a
v1.1 file with an `is_impossible` question is refused, naming it; one JSON line per
predictions file, in order: `{"exact_match": ..., "f1": ...}` (v1.1, percent) or the
official v2.0 keys.
"""


import tfbert_tools  # noqa: F401  (first: a Ctrl-C while TensorFlow imports is one line)

# isort: split

from absl import app

from tfbert.runtime import cli, json_values
from tfbert.squad import squad_evaluation
from tfbert_flags import common_flags, evaluate_squad_flags


def main(argv):
  if len(argv) < 3:
    raise app.UsageError("usage: evaluate_squad.py DATASET_FILE PREDICTIONS_FILE "
                         "[PREDICTIONS_FILE ...] [--na_prob_file=NULL_ODDS_FILE]")
  results = squad_evaluation.evaluate_files(argv[1], argv[2:],
                                            evaluate_squad_flags.NA_PROB_FILE.value)
  for result in results:
    print(json_values.dumps(result))


def run():
  """Entry point: `python tools/evaluate_squad.py`, or the installed `tfbert-evaluate-squad`."""
  common_flags.show_in_help(evaluate_squad_flags)
  cli.run_tool(main, common_flags.TRACEBACK, takes_arguments=True)


if __name__ == "__main__":
  run()
