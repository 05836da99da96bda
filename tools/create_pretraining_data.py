"""Writes masked-LM / next-sentence pretraining TFRecords, as google-research/bert does.

  bash bootstrap.sh python tools/create_pretraining_data.py \
      --input_file=corpus/*.txt --output_dir=/tmp/pretraining_data --num_shards=8

Without --input_file it uses the embedded default corpus, CPython's pydoc topics.
"""

import tfbert_tools  # noqa: F401  (first: a Ctrl-C while TensorFlow imports is one line)

# isort: split

import json
import os

from tfbert.checkpoints import model_paths, pretrained
from tfbert.pretraining import input_pipeline, pretraining_data
from tfbert.runtime import cli, files, paths
from tfbert.text import casing
from tfbert_flags import common_flags
from tfbert_flags import create_pretraining_data_flags as f


def main(argv):
  del argv
  split = input_pipeline.split_list_problems(  # A comma in a path, before any work.
      {"--input_file": f.INPUT_FILE.value})
  if split:
    raise ValueError("; ".join(split))
  vocab_file = f.VOCAB_FILE.value or pretrained.minilm_vocab_file()
  do_lower_case = casing.resolve_do_lower_case(  # Before any work.
      f.DO_LOWER_CASE.value, casing.checkpoint_casing(vocab_file, vocab_file),
      allow_mismatch=f.ALLOW_CASING_MISMATCH.value)
  config = pretraining_data.PretrainingDataConfig(
      vocab_file=vocab_file, do_lower_case=do_lower_case, max_seq_length=f.MAX_SEQ_LENGTH.value,
      max_predictions_per_seq=f.MAX_PREDICTIONS_PER_SEQ.value,
      masked_lm_prob=f.MASKED_LM_PROB.value, dupe_factor=f.DUPE_FACTOR.value,
      short_seq_prob=f.SHORT_SEQ_PROB.value, do_whole_word_mask=f.DO_WHOLE_WORD_MASK.value,
      random_seed=f.RANDOM_SEED.value, num_shards=f.NUM_SHARDS.value,
      shard_assignment=f.SHARD_ASSIGNMENT.value)
  inputs = f.INPUT_FILE.value
  paths.check_apart({"--input_file": inputs, "--vocab_file": vocab_file},
                    {"--output_dir": f.OUTPUT_DIR.value})
  # Before the pydoc corpus is written.
  paths.check_outputs({"--output_dir": f.OUTPUT_DIR.value}, required=True)
  model_paths.check_not_a_model_directory({"--output_dir": f.OUTPUT_DIR.value},
                                          "create_pretraining_data")
  pretraining_data.check_output_prefix(f.OUTPUT_DIR.value, f.OUTPUT_PREFIX.value,
                                       f.NUM_SHARDS.value)
  if not inputs:
    files.makedirs(f.OUTPUT_DIR.value)
    inputs = [pretraining_data.pydoc_corpus(os.path.join(f.OUTPUT_DIR.value, "pydoc_corpus.txt"))]
  summary = pretraining_data.create_pretraining_data(
      inputs, f.OUTPUT_DIR.value, config, output_prefix=f.OUTPUT_PREFIX.value,
      log_every_seconds=f.LOG_EVERY_SECONDS.value)
  print(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=1))
  written = [os.path.join(f.OUTPUT_DIR.value, s["file"]) for s in summary["shards"]]
  written.append(pretraining_data.summary_path(f.OUTPUT_DIR.value, f.OUTPUT_PREFIX.value))
  print("wrote:" + "".join(f"\n  {path}" for path in written), flush=True)


def run():
  """Entry point of `python tools/create_pretraining_data.py` and of its installed command
  `tfbert-create-pretraining-data`."""
  common_flags.show_in_help(f)
  cli.run_tool(main, common_flags.TRACEBACK)


if __name__ == "__main__":
  run()
