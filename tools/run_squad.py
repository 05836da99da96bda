"""Fine-tunes BERT on SQuAD and/or predicts and scores (google-research/bert run_squad.py).

  bash bootstrap.sh python tools/run_squad.py --do_train --do_predict --init_hf_dir=minilm \
      --train_file=train-v1.1.json --predict_file=dev-v1.1.json --output_dir=runs/squad

See flags/run_squad_flags.py for every flag and tfbert/squad/squad_run.py for the run directory.
"""

import json

from flags import common_flags, run_directory_flags
from flags import run_squad_flags as f
from tfbert.checkpoints import pretrained
from tfbert.runtime import cli
from tfbert.squad import squad_features, squad_postprocess
from tfbert.squad.squad_run import SquadRunConfig, run_squad


def main(argv):
  del argv
  init_hf_dir = f.INIT_HF_DIR.value
  config = SquadRunConfig(
      output_dir=f.OUTPUT_DIR.value, do_train=f.DO_TRAIN.value, do_predict=f.DO_PREDICT.value,
      train_file=f.TRAIN_FILE.value, predict_file=f.PREDICT_FILE.value,
      train_articles=f.TRAIN_ARTICLES.value, predict_articles=f.PREDICT_ARTICLES.value,
      vocab_file=f.VOCAB_FILE.value, do_lower_case=f.DO_LOWER_CASE.value,
      allow_casing_mismatch=f.ALLOW_CASING_MISMATCH.value,
      bert_config_file=f.BERT_CONFIG_FILE.value, init_checkpoint=f.INIT_CHECKPOINT.value,
      init_hf_dir=pretrained.minilm_dir() if init_hf_dir == "minilm" else init_hf_dir,
      init_tfbert=f.INIT_TFBERT.value,
      features=squad_features.FeatureConfig(f.MAX_SEQ_LENGTH.value, f.DOC_STRIDE.value,
                                            f.MAX_QUERY_LENGTH.value),
      postprocess=squad_postprocess.PostprocessConfig(
          f.N_BEST_SIZE.value, f.MAX_ANSWER_LENGTH.value, f.VERSION_2_WITH_NEGATIVE.value,
          f.NULL_SCORE_DIFF_THRESHOLD.value),
      train_batch_size=f.TRAIN_BATCH_SIZE.value, predict_batch_size=f.PREDICT_BATCH_SIZE.value,
      learning_rate=f.LEARNING_RATE.value, num_train_epochs=f.NUM_TRAIN_EPOCHS.value,
      max_train_steps=f.MAX_TRAIN_STEPS.value, warmup_proportion=f.WARMUP_PROPORTION.value,
      weight_decay_rate=f.WEIGHT_DECAY_RATE.value, clip_norm=f.CLIP_NORM.value or None,
      gradient_accumulation_steps=f.GRADIENT_ACCUMULATION_STEPS.value, dtype=f.DTYPE.value,
      distribution_strategy=f.DISTRIBUTION_STRATEGY.value, num_cpu_devices=f.NUM_CPU_DEVICES.value,
      jit_compile=f.JIT_COMPILE.value,
      seed=f.SEED.value, log_steps=f.LOG_STEPS.value,
      save_checkpoints_steps=f.SAVE_CHECKPOINTS_STEPS.value,
      keep_checkpoint_max=f.KEEP_CHECKPOINT_MAX.value, eval_every_steps=f.EVAL_EVERY_STEPS.value,
      best_metric=f.BEST_METRIC.value,
      early_stopping_patience=f.EARLY_STOPPING_PATIENCE.value, stop_at_step=f.STOP_AT_STEP.value,
      verbose=f.VERBOSE.value,
      export_dir=f.EXPORT_DIR.value,
      export_dtype=f.EXPORT_DTYPE.value,
      allow_config_change=run_directory_flags.ALLOW_CONFIG_CHANGE.value)
  result = run_squad(config, common_flags.flagfile(f))
  if "scores" in result:
    print(json.dumps(result["scores"]))
  print(cli.format_written(result["written"]), flush=True)


def run():
  """Entry point: `python tools/run_squad.py`, or the installed `tfbert-run-squad`."""
  common_flags.show_in_help(f)
  cli.run_tool(main, common_flags.TRACEBACK)


if __name__ == "__main__":
  run()
