"""What the predictions files of an output directory predict: `predictions_source.json`.

A rerun may predict another input file into the same name (run_classifier's and run_ner's
`test_predictions.*` of another `--predict_file`, run_squad's `predictions.json` of another
`--predict_file` or `--predict_articles` range). The record names, for each predictions
file, the file it answers (an absolute path, and a part's range where one was predicted);
the log says when predictions of one file replace another's (or predictions whose source
was not recorded). A file's entry is dropped before its predictions are written and
recorded after (`replacing`, then `record`; `written` does both around a write): an
interrupted write leaves no entry naming the wrong file.

    predictions_source.json   {"test_predictions.tsv": "/data/mrpc/test.tsv",
                               "predictions.json": "/data/dev-v1.1.json (articles 1:2)"}
"""

import os
from typing import Any, Callable, Sequence

from absl import logging

from tfbert.runtime import atomic, files, json_values

SOURCE_FILE = "predictions_source.json"


def _read(output_dir: str) -> dict[str, str]:
  """The record of `output_dir` ({} when missing or unreadable: it describes, it is never
  an input). An earlier run_squad's `{"predict_file", "articles"}` reads as its
  predictions.json's entry."""
  path = os.path.join(output_dir, SOURCE_FILE)
  if not files.isfile(path):
    return {}
  try:
    record = json_values.read(path)
  except (ValueError, OSError):
    return {}
  if not isinstance(record, dict):
    return {}
  if isinstance(record.get("predict_file"), str):  # run_squad's record before this module.
    articles = record.get("articles")
    return {"predictions.json": record["predict_file"] + (
        f" (articles {articles})" if isinstance(articles, str) and articles else "")}
  return {name: source for name, source in record.items() if isinstance(source, str)}


def replacing(output_dir: str, name: str, source: str, also: Sequence[str] = (),
              note: str = "", say: bool = True) -> None:
  """Before predictions of `source` are written as `name` in `output_dir`: says in the log
  when they replace another source's (or unrecorded ones), and drops `name`'s entry until
  `record` writes the new one.

  Args:
    output_dir: the directory of the predictions.
    name: the predictions file's name (the record's key).
    source: what it predicts, as the record and the log name it (`describe`).
    also: the other files written with it, for the log (run_squad's nbest_predictions.json).
    note: appended to the log line (where the replaced predictions' scores stay).
    say: False where the caller's own line says it (an evaluation's scores and predictions
      replaced: `fine_tuning.merge_eval_results`).
  """
  record = _read(output_dir)
  old = record.pop(name, None)
  path = os.path.join(output_dir, SOURCE_FILE)
  if old is not None:
    if record:
      atomic.write_json(path, record)
    else:
      files.remove(path)
  names = ", ".join([name, *also])
  if not say:
    return
  if old and old != source:
    logging.warning("%s: replacing the predictions of %s (%s) with those of %s%s", output_dir,
                    old, names, source, note)
  elif not old and files.isfile(os.path.join(output_dir, name)):
    logging.warning("%s: replacing %s (their source was not recorded) with the predictions "
                    "of %s%s", output_dir, names, source, note)


def record(output_dir: str, name: str, source: str) -> str:
  """Records `source` as what the predictions file `name` just written in `output_dir`
  predicts; returns the record's path."""
  return atomic.write_json(os.path.join(output_dir, SOURCE_FILE),
                           {**_read(output_dir), name: source})


def written(path: str, source: str, write: Callable[[], Any], say: bool = True) -> Any:
  """Writes the predictions file `path` with `write()` between `replacing` and `record`, so
  that its entry never names the wrong file; returns what `write` returns. `say`: as
  `replacing`'s."""
  directory, name = files.parent(path), os.path.basename(path)
  replacing(directory, name, source, say=say)
  result = write()
  record(directory, name, source)
  return result


def describe(path: str, part: str = "") -> str:
  """A predicted file as the record names it: its absolute path, with the `part`
  predicted (run_squad's articles range) when not the whole file."""
  return files.absolute(path) + (f" (articles {part})" if part else "")
