"""Pretrains BERT (MLM + NSP) on google-research/bert TFRecords; rerun to resume.

  bash bootstrap.sh python tools/run_pretraining.py --bert_config_file=bert_config.json \
      --input_files='data/*.tfrecord' --model_dir=runs/bert --num_train_steps=1000
"""

from absl import flags

from flags import common_flags, run_directory_flags
from flags import run_pretraining_flags as f
from tfbert.config import BertConfig
from tfbert.pretraining.pretraining_run import PretrainingRunConfig, run_pretraining
from tfbert.runtime import cli
from tfbert.training import optimization


def main(argv):
  del argv
  optimizer = optimization.OptimizerConfig(
      optimizer=f.OPTIMIZER.value, learning_rate=f.LEARNING_RATE.value,
      num_warmup_steps=f.NUM_WARMUP_STEPS.value, num_train_steps=f.NUM_TRAIN_STEPS.value,
      lr_schedule=f.LR_SCHEDULE.value, weight_decay_rate=f.WEIGHT_DECAY_RATE.value,
      clip_norm=f.CLIP_NORM.value or None,
      gradient_accumulation_steps=f.GRADIENT_ACCUMULATION_STEPS.value)
  config = PretrainingRunConfig(
      bert_config=BertConfig.from_json_file(f.BERT_CONFIG_FILE.value),
      input_files=f.INPUT_FILES.value, model_dir=f.MODEL_DIR.value, optimizer=optimizer,
      train_batch_size=f.TRAIN_BATCH_SIZE.value, max_seq_length=f.MAX_SEQ_LENGTH.value,
      max_predictions_per_seq=f.MAX_PREDICTIONS_PER_SEQ.value,
      init_checkpoint=f.INIT_CHECKPOINT.value,
      dtype=f.DTYPE.value, distribution_strategy=f.DISTRIBUTION_STRATEGY.value,
      num_cpu_devices=f.NUM_CPU_DEVICES.value, jit_compile=f.JIT_COMPILE.value,
      run_eagerly=f.RUN_EAGERLY.value, stop_at_step=f.STOP_AT_STEP.value, seed=f.SEED.value,
      deterministic=f.DETERMINISTIC.value, save_checkpoints_steps=f.SAVE_CHECKPOINTS_STEPS.value,
      keep_checkpoint_max=f.KEEP_CHECKPOINT_MAX.value, log_steps=f.LOG_STEPS.value,
      eval_input_files=f.EVAL_INPUT_FILES.value,
      eval_every_steps=f.EVAL_EVERY_STEPS.value, eval_batch_size=f.EVAL_BATCH_SIZE.value,
      max_eval_steps=f.MAX_EVAL_STEPS.value, best_metric=f.BEST_METRIC.value,
      early_stopping_patience=f.EARLY_STOPPING_PATIENCE.value, export_dir=f.EXPORT_DIR.value,
      export_dtype=f.EXPORT_DTYPE.value,
      allow_config_change=run_directory_flags.ALLOW_CONFIG_CHANGE.value)
  print(run_pretraining(config, common_flags.flagfile(f))["summary"], flush=True)


def run():
  """Entry point: `python tools/run_pretraining.py`, or the installed `tfbert-run-pretraining`."""
  flags.mark_flags_as_required(["bert_config_file", "input_files", "model_dir"])
  common_flags.show_in_help(f)
  cli.run_tool(main, common_flags.TRACEBACK)


if __name__ == "__main__":
  run()
