"""Scores named-entity predictions against a gold CoNLL file: entity-level P/R/F1.

  python tools/evaluate_ner.py GOLD_FILE PREDICTIONS_FILE [PREDICTIONS_FILE ...]

GOLD_FILE is CoNLL (a word and its tag per line, sentences separated by blank lines; its
columns: --token_column, --tag_column; --tag_scheme).
Each PREDICTIONS_FILE holds, on the same line as the gold word, the word and the predicted
tag (the last whitespace-separated field; the layout of the WNUT 2017 submissions and of
`tools/run_ner.py`'s predictions); other lines are empty. Lines are counted without the
`-DOCSTART-` lines of either file and the blank line after each (document separators,
which run_ner's predictions leave out). One JSON line per predictions
file, in order: micro `precision`, `recall`, `f1` in percent over exact (span, type) entity
matches (conlleval's definition, seqeval's default mode: `tfbert.tagging.tagging_metrics`),
the entity counts, token `accuracy`, and `per_type` scores.
"""


import tfbert_tools  # noqa: F401  (first: a Ctrl-C while TensorFlow imports is one line)

# isort: split

from absl import app

from tfbert.runtime import cli, json_values
from tfbert.tagging import conll, tagging_metrics
from tfbert_flags import common_flags, evaluate_ner_flags


def main(argv):
  if len(argv) < 3:
    raise app.UsageError("usage: evaluate_ner.py GOLD_FILE PREDICTIONS_FILE [PREDICTIONS_FILE ...]")
  f = evaluate_ner_flags
  gold = conll.read_conll(argv[1], token_column=f.TOKEN_COLUMN.value,
                          tag_column=f.TAG_COLUMN.value, scheme=f.TAG_SCHEME.value)
  if not gold:
    raise ValueError(f"{argv[1]}: no sentences")
  gold_tags = [s.tags for s in gold]
  # Every file read (and refused) before any score is printed: a bad second file once
  # ended the tool after the first one's line, the third never scored (sweep 29, A39).
  predictions = [tagging_metrics.read_predictions(path, gold, argv[1]) for path in argv[2:]]
  for predicted in predictions:
    print(json_values.dumps(tagging_metrics.entity_scores(gold_tags, predicted)), flush=True)


def run():
  """Entry point: `python tools/evaluate_ner.py`, or the installed `tfbert-evaluate-ner`."""
  common_flags.show_in_help(evaluate_ner_flags)
  cli.run_tool(main, common_flags.TRACEBACK, takes_arguments=True)


if __name__ == "__main__":
  run()
