"""Fine-tunes BERT for named-entity recognition on CoNLL files; evaluates, predicts, exports.

  bash bootstrap.sh python tools/run_ner.py --do_train --do_eval --do_predict \
      --train_file=wnut17train.conll --eval_file=emerging.dev.conll \
      --predict_file=emerging.test.annotated --init_hf_dir=minilm --output_dir=runs/wnut17

See flags/run_ner_flags.py for every flag and tfbert/tagging/tagging_run.py for the run
directory.
"""

import json

from flags import common_flags, run_directory_flags
from flags import run_ner_flags as f
from tfbert.checkpoints import pretrained
from tfbert.runtime import cli
from tfbert.tagging.tagging_run import NerRunConfig, run_ner


def main(argv):
  del argv
  init_hf_dir = f.INIT_HF_DIR.value
  config = NerRunConfig(
      output_dir=f.OUTPUT_DIR.value, train_file=f.TRAIN_FILE.value, eval_file=f.EVAL_FILE.value,
      predict_file=f.PREDICT_FILE.value, do_train=f.DO_TRAIN.value, do_eval=f.DO_EVAL.value,
      do_predict=f.DO_PREDICT.value, token_column=f.TOKEN_COLUMN.value,
      tag_column=f.TAG_COLUMN.value, tag_scheme=f.TAG_SCHEME.value,
      vocab_file=f.VOCAB_FILE.value, do_lower_case=f.DO_LOWER_CASE.value,
      allow_casing_mismatch=f.ALLOW_CASING_MISMATCH.value,
      bert_config_file=f.BERT_CONFIG_FILE.value, init_checkpoint=f.INIT_CHECKPOINT.value,
      init_hf_dir=pretrained.minilm_dir() if init_hf_dir == "minilm" else init_hf_dir,
      init_tfbert=f.INIT_TFBERT.value, max_seq_length=f.MAX_SEQ_LENGTH.value,
      doc_stride=f.DOC_STRIDE.value, classifier_dropout=f.CLASSIFIER_DROPOUT.value,
      train_batch_size=f.TRAIN_BATCH_SIZE.value, eval_batch_size=f.EVAL_BATCH_SIZE.value,
      learning_rate=f.LEARNING_RATE.value, num_train_epochs=f.NUM_TRAIN_EPOCHS.value,
      max_train_steps=f.MAX_TRAIN_STEPS.value, warmup_proportion=f.WARMUP_PROPORTION.value,
      weight_decay_rate=f.WEIGHT_DECAY_RATE.value, clip_norm=f.CLIP_NORM.value or None,
      gradient_accumulation_steps=f.GRADIENT_ACCUMULATION_STEPS.value,
      dtype=f.DTYPE.value, distribution_strategy=f.DISTRIBUTION_STRATEGY.value,
      num_cpu_devices=f.NUM_CPU_DEVICES.value, jit_compile=f.JIT_COMPILE.value,
      seed=f.SEED.value, log_steps=f.LOG_STEPS.value,
      save_checkpoints_steps=f.SAVE_CHECKPOINTS_STEPS.value,
      keep_checkpoint_max=f.KEEP_CHECKPOINT_MAX.value, eval_every_steps=f.EVAL_EVERY_STEPS.value,
      best_metric=f.BEST_METRIC.value,
      early_stopping_patience=f.EARLY_STOPPING_PATIENCE.value, stop_at_step=f.STOP_AT_STEP.value,
      verbose=f.VERBOSE.value, export_dir=f.EXPORT_DIR.value,
      export_dtype=f.EXPORT_DTYPE.value,
      allow_config_change=run_directory_flags.ALLOW_CONFIG_CHANGE.value)
  result = run_ner(config, common_flags.flagfile(f))
  if "eval" in result:
    print(json.dumps({k: v for k, v in result["eval"]["dev"].items() if k != "per_type"},
                     sort_keys=True))
  print(cli.format_written(result["written"]), flush=True)


def run():
  """Entry point: `python tools/run_ner.py`, or the installed `tfbert-run-ner`."""
  common_flags.show_in_help(f)
  cli.run_tool(main, common_flags.TRACEBACK)


if __name__ == "__main__":
  run()
