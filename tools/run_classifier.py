"""Fine-tunes BERT on a GLUE-format task; evaluates and predicts (run_classifier.py).

  bash bootstrap.sh python tools/run_classifier.py --task_name=mrpc --do_train --do_eval \
      --data_dir=glue/MRPC --init_hf_dir=minilm --output_dir=runs/mrpc

See flags/run_classifier_flags.py for every flag and tfbert/classifier/classifier_run.py for the run
directory.
"""

import json

from flags import common_flags, run_directory_flags
from flags import run_classifier_flags as f
from tfbert.checkpoints import pretrained
from tfbert.classifier import glue_data
from tfbert.classifier.classifier_run import ClassifierRunConfig, run_classifier
from tfbert.runtime import cli


def main(argv):
  del argv
  init_hf_dir = f.INIT_HF_DIR.value
  custom = None
  if f.TASK_NAME.value == glue_data.CUSTOM_TASK:
    custom = glue_data.CustomFormat(
        text_a_column=f.CUSTOM_TEXT_A_COLUMN.value, text_b_column=f.CUSTOM_TEXT_B_COLUMN.value,
        label_column=f.CUSTOM_LABEL_COLUMN.value, has_header=f.CUSTOM_HEADER.value,
        delimiter={"tab": "\t", "comma": ","}[f.CUSTOM_DELIMITER.value],
        labels=tuple(f.CUSTOM_LABELS.value or ()), regression=f.CUSTOM_REGRESSION.value)
  config = ClassifierRunConfig(
      output_dir=f.OUTPUT_DIR.value, task_name=f.TASK_NAME.value, data_dir=f.DATA_DIR.value,
      train_file=f.TRAIN_FILE.value, eval_file=f.EVAL_FILE.value,
      predict_file=f.PREDICT_FILE.value, custom=custom, do_train=f.DO_TRAIN.value,
      do_eval=f.DO_EVAL.value, do_predict=f.DO_PREDICT.value,
      max_train_examples=f.MAX_TRAIN_EXAMPLES.value,
      skip_malformed_rows=f.SKIP_MALFORMED_ROWS.value, vocab_file=f.VOCAB_FILE.value,
      do_lower_case=f.DO_LOWER_CASE.value,
      allow_casing_mismatch=f.ALLOW_CASING_MISMATCH.value,
      bert_config_file=f.BERT_CONFIG_FILE.value,
      init_checkpoint=f.INIT_CHECKPOINT.value,
      init_hf_dir=pretrained.minilm_dir() if init_hf_dir == "minilm" else init_hf_dir,
      init_tfbert=f.INIT_TFBERT.value, max_seq_length=f.MAX_SEQ_LENGTH.value,
      classifier_dropout=f.CLASSIFIER_DROPOUT.value, train_batch_size=f.TRAIN_BATCH_SIZE.value,
      eval_batch_size=f.EVAL_BATCH_SIZE.value, learning_rate=f.LEARNING_RATE.value,
      num_train_epochs=f.NUM_TRAIN_EPOCHS.value, max_train_steps=f.MAX_TRAIN_STEPS.value,
      warmup_proportion=f.WARMUP_PROPORTION.value, weight_decay_rate=f.WEIGHT_DECAY_RATE.value,
      clip_norm=f.CLIP_NORM.value or None,
      gradient_accumulation_steps=f.GRADIENT_ACCUMULATION_STEPS.value,
      dtype=f.DTYPE.value, distribution_strategy=f.DISTRIBUTION_STRATEGY.value,
      num_cpu_devices=f.NUM_CPU_DEVICES.value,
      jit_compile=f.JIT_COMPILE.value, seed=f.SEED.value, log_steps=f.LOG_STEPS.value,
      save_checkpoints_steps=f.SAVE_CHECKPOINTS_STEPS.value,
      keep_checkpoint_max=f.KEEP_CHECKPOINT_MAX.value, eval_every_steps=f.EVAL_EVERY_STEPS.value,
      best_metric=f.BEST_METRIC.value,
      early_stopping_patience=f.EARLY_STOPPING_PATIENCE.value, stop_at_step=f.STOP_AT_STEP.value,
      verbose=f.VERBOSE.value, export_dir=f.EXPORT_DIR.value,
      export_dtype=f.EXPORT_DTYPE.value,
      allow_config_change=run_directory_flags.ALLOW_CONFIG_CHANGE.value)
  result = run_classifier(config, common_flags.flagfile(f))
  if "eval" in result:
    print(json.dumps(result["eval"], sort_keys=True))
  print(cli.format_written(result["written"]), flush=True)


def run():
  """Entry point: `python tools/run_classifier.py`, or the installed `tfbert-run-classifier`."""
  common_flags.show_in_help(f)
  cli.run_tool(main, common_flags.TRACEBACK)


if __name__ == "__main__":
  run()
