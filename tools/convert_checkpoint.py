"""Converts a BERT checkpoint between Google TF1, Hugging Face and tfbert formats.

  python tools/convert_checkpoint.py --input_format=google --input=.../bert_model.ckpt \
      --output_format=hf --output=/tmp/hf_bert
"""

import tfbert_tools  # noqa: F401  (first: a Ctrl-C while TensorFlow imports is one line)

# isort: split

from absl import flags

from tfbert.checkpoints.convert import convert_checkpoint, source_vocab_file
from tfbert.inference.loading import recorded_settings
from tfbert.runtime import cli
from tfbert_flags import common_flags, convert_flags


def main(argv):
  del argv
  model = convert_checkpoint(convert_flags.INPUT_FORMAT.value, convert_flags.INPUT.value,
                             convert_flags.OUTPUT_FORMAT.value, convert_flags.OUTPUT.value,
                             convert_flags.BERT_CONFIG_FILE.value,
                             vocab_file=convert_flags.VOCAB_FILE.value,
                             do_lower_case=convert_flags.DO_LOWER_CASE.value,
                             allow_casing_mismatch=convert_flags.ALLOW_CASING_MISMATCH.value,
                             settings_of=_settings_of)
  vocab = convert_flags.VOCAB_FILE.value or source_vocab_file(convert_flags.INPUT_FORMAT.value,
                                                              convert_flags.INPUT.value)
  vocab_note = ("with vocab.txt and tokenizer_config.json" if vocab
                else "no vocab.txt beside the input to copy")
  if convert_flags.OUTPUT_FORMAT.value == "google" and getattr(model, "labels", None):
    vocab_note += "; its class names in labels.txt"
  print(f"wrote {type(model).__name__} ({len(model.weights)} weights) as "
        f"{convert_flags.OUTPUT_FORMAT.value}: {convert_flags.OUTPUT.value} ({vocab_note})")


def _settings_of(model, input_path):
  """The text settings the input records (S, a classifier's arity, a span labeler's
  windows), kept in the output (as `tfbert.load` reads them)."""
  return recorded_settings(model, convert_flags.INPUT_FORMAT.value, input_path)


def run():
  """Entry point of `python tools/convert_checkpoint.py` and of `tfbert-convert-checkpoint`."""
  flags.mark_flags_as_required(["input", "output"])
  common_flags.show_in_help(convert_flags)
  cli.run_tool(main, common_flags.TRACEBACK)


if __name__ == "__main__":
  run()
