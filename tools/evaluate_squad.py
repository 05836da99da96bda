"""Scores SQuAD predictions with the reference evaluation, printing the official JSON.

  python tools/evaluate_squad.py DATASET_FILE PREDICTIONS_FILE [PREDICTIONS_FILE ...]

Like the official evaluate-v1.1.py / evaluate-v2.0.py: the version comes from the
dataset's "version" as the official files write it ("1.1", "v2.0"; none means v1.1), and a
v1.1 file with an `is_impossible` question is refused, naming it; one JSON line per
predictions file, in order: `{"exact_match": ..., "f1": ...}` (v1.1, percent) or the
official v2.0 keys.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ INFO/WARNING lines

from absl import app, flags  # noqa: E402

from flags import common_flags  # noqa: E402
from flags import evaluate_squad_flags  # noqa: E402
from tfbert import cli  # noqa: E402
from tfbert import squad_evaluation  # noqa: E402


def main(argv):
  if len(argv) < 3:
    raise app.UsageError("usage: evaluate_squad.py DATASET_FILE PREDICTIONS_FILE "
                         "[PREDICTIONS_FILE ...] [--na_prob_file=NULL_ODDS_FILE]")
  results = squad_evaluation.evaluate_files(argv[1], argv[2:],
                                            evaluate_squad_flags.NA_PROB_FILE.value)
  for result in results:
    print(json.dumps(result))


if __name__ == "__main__":
  flags.adopt_module_key_flags(evaluate_squad_flags)
  cli.run_tool(main, common_flags.TRACEBACK)
