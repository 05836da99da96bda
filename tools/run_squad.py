"""Fine-tunes BERT on SQuAD and/or predicts and scores (google-research/bert run_squad.py).

  bash bootstrap.sh python tools/run_squad.py --do_train --do_predict --init_hf_dir=minilm \
      --train_file=train-v1.1.json --predict_file=dev-v1.1.json --output_dir=runs/squad

See flags/run_squad_flags.py for every flag and tfbert/squad/squad_run.py for the run directory.
"""


import tfbert_tools  # noqa: F401  (first: a Ctrl-C while TensorFlow imports is one line)

# isort: split

from tfbert.runtime import cli, json_values
from tfbert.squad.squad_run import SquadRunConfig, run_squad
from tfbert.tasks import fine_tuning
from tfbert_flags import common_flags
from tfbert_flags import run_squad_flags as f


def main(argv):
  del argv
  common_flags.check_data_files(("train_file", "predict_file"))  # Before any work.
  common_flags.check_strategy_flags()
  given = common_flags.given(f)
  config = cli.config_from_values(SquadRunConfig,
                                  fine_tuning.source_sequence_values(common_flags.values(f), given),
                                  fine_tuning.FLAG_CONVERTERS, given_settings=given)
  result = run_squad(config, common_flags.flagfile(f))
  if "scores" in result:
    print(json_values.dumps(result["scores"]))
  print(cli.format_written(result["written"]), flush=True)


def run():
  """Entry point: `python tools/run_squad.py`, or the installed `tfbert-run-squad`."""
  common_flags.show_in_help(f)
  cli.run_tool(main, common_flags.TRACEBACK)


if __name__ == "__main__":
  run()
