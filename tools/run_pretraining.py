"""Pretrains BERT (MLM + NSP, or MLM alone: --objective=mlm) on google-research/bert
TFRecords; rerun to resume.

  bash bootstrap.sh python tools/run_pretraining.py --bert_config_file=bert_config.json \
      --input_files='data/*.tfrecord' --model_dir=runs/bert --num_train_steps=1000

Raw text instead (tokenized, packed and masked dynamically in the input pipeline):

  bash bootstrap.sh python tools/run_pretraining.py --init_hf_dir=minilm \
      --train_text_files='corpus/*.txt' --objective=mlm --model_dir=runs/mlm

Continued pretraining starts from the model a user has (`--init_hf_dir`, `--init_tfbert`,
`--init_checkpoint`), whose config is then the model's.
"""

import tfbert_tools  # noqa: F401  (first: a Ctrl-C while TensorFlow imports is one line)

# isort: split

import types

from absl import flags

from tfbert.checkpoints import pretrained
from tfbert.config import BertConfig
from tfbert.pretraining import input_pipeline, pretraining_init, pretraining_run
from tfbert.pretraining.pretraining_run import PretrainingRunConfig, run_pretraining
from tfbert.runtime import cli
from tfbert_flags import common_flags
from tfbert_flags import run_pretraining_flags as f


def main(argv):
  del argv
  common_flags.check_optimizer_flags(f)  # Before any work.
  common_flags.check_strategy_flags()
  values = common_flags.values(f)
  split = input_pipeline.split_list_problems(  # A comma in a path named, before any work.
      {f"--{name}": values[name] for name in pretraining_run.INPUT_FLAGS})
  if split:
    raise ValueError("; ".join(split))
  values["init_hf_dir"] = pretrained.hf_dir(values["init_hf_dir"])  # "minilm": the shipped one.
  # The source exists and is its flag's kind before any part of it is read.
  pretraining_init.check_source(types.SimpleNamespace(**values),
                                needs_config=not values["bert_config_file"])
  if values["bert_config_file"]:
    bert_config = BertConfig.from_json_file(values["bert_config_file"], "--bert_config_file")
  else:
    bert_config = pretraining_init.source_config(types.SimpleNamespace(**values))
    if bert_config is None:
      raise ValueError("--bert_config_file is needed without --init_checkpoint, --init_hf_dir "
                       "or --init_tfbert (whose config the model then takes)")
  problem = pretraining_run.text_objective_problem(  # In flags, before the config says it.
      values["train_text_files"], values["objective"], flags.FLAGS["objective"].present)
  if problem:
    raise ValueError(problem)
  config = cli.config_from_values(
      PretrainingRunConfig, values, {"clip_norm": cli.zero_is_none,
                                     "input_files": lambda given: given or []},
      bert_config=bert_config)
  print(run_pretraining(config, common_flags.flagfile(f))["summary"], flush=True)


def run():
  """Entry point: `python tools/run_pretraining.py`, or the installed `tfbert-run-pretraining`."""
  flags.mark_flags_as_required(["model_dir"])  # And --input_files or --train_text_files.
  common_flags.show_in_help(f)
  cli.run_tool(main, common_flags.TRACEBACK)


if __name__ == "__main__":
  run()
