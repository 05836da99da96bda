"""Converts a BERT checkpoint between Google TF1, Hugging Face and tfbert formats.

  python tools/convert_checkpoint.py --input_format=google --input=.../bert_model.ckpt \
      --output_format=hf --output=/tmp/hf_bert
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ INFO/WARNING lines

from absl import flags  # noqa: E402

from flags import common_flags  # noqa: E402
from flags import convert_flags  # noqa: E402
from tfbert import cli  # noqa: E402
from tfbert.convert import convert_checkpoint, source_vocab_file  # noqa: E402


def main(argv):
  del argv
  model = convert_checkpoint(convert_flags.INPUT_FORMAT.value, convert_flags.INPUT.value,
                             convert_flags.OUTPUT_FORMAT.value, convert_flags.OUTPUT.value,
                             convert_flags.BERT_CONFIG_FILE.value)
  vocab = source_vocab_file(convert_flags.INPUT_FORMAT.value, convert_flags.INPUT.value)
  vocab_note = "with vocab.txt" if vocab else "no vocab.txt beside the input to copy"
  print(f"wrote {type(model).__name__} ({len(model.weights)} weights) as "
        f"{convert_flags.OUTPUT_FORMAT.value}: {convert_flags.OUTPUT.value} ({vocab_note})")


if __name__ == "__main__":
  flags.mark_flags_as_required(["input", "output"])
  flags.adopt_module_key_flags(convert_flags)
  cli.run_tool(main, common_flags.TRACEBACK)
