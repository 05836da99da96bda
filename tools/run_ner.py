"""Fine-tunes BERT for named-entity recognition on CoNLL files; evaluates, predicts, exports.

  bash bootstrap.sh python tools/run_ner.py --do_train --do_eval --do_predict \
      --train_file=wnut17train.conll --eval_file=emerging.dev.conll \
      --predict_file=emerging.test.annotated --init_hf_dir=minilm --output_dir=runs/wnut17

See flags/run_ner_flags.py for every flag and tfbert/tagging/tagging_run.py for the run
directory.
"""


import tfbert_tools  # noqa: F401  (first: a Ctrl-C while TensorFlow imports is one line)

# isort: split

from tfbert.runtime import cli, json_values
from tfbert.tagging.tagging_run import NerRunConfig, run_ner
from tfbert.tasks import fine_tuning
from tfbert_flags import common_flags
from tfbert_flags import run_ner_flags as f


def main(argv):
  del argv
  common_flags.check_data_files(("train_file", "eval_file", "predict_file"))  # Before any work.
  common_flags.check_strategy_flags()
  config = cli.config_from_values(NerRunConfig, common_flags.values(f),
                                  fine_tuning.FLAG_CONVERTERS,
                                  given_settings=common_flags.given(f))
  result = run_ner(config, common_flags.flagfile(f))
  if "eval" in result:
    print(json_values.dumps({k: v for k, v in result["eval"]["dev"].items() if k != "per_type"},
                     sort_keys=True))
  print(cli.format_written(result["written"]), flush=True)


def run():
  """Entry point: `python tools/run_ner.py`, or the installed `tfbert-run-ner`."""
  common_flags.show_in_help(f)
  cli.run_tool(main, common_flags.TRACEBACK)


if __name__ == "__main__":
  run()
