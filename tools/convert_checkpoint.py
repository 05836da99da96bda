"""Converts a BERT checkpoint between Google TF1, Hugging Face and tfbert formats.

  python tools/convert_checkpoint.py --input_format=google --input=.../bert_model.ckpt \
      --output_format=hf --output=/tmp/hf_bert
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

from flags import convert_flags  # noqa: E402
from tfbert.convert import convert_checkpoint  # noqa: E402


def main(argv):
  del argv
  model = convert_checkpoint(convert_flags.INPUT_FORMAT.value, convert_flags.INPUT.value,
                             convert_flags.OUTPUT_FORMAT.value, convert_flags.OUTPUT.value,
                             convert_flags.BERT_CONFIG_FILE.value)
  print(f"wrote {type(model).__name__} ({len(model.weights)} weights) as "
        f"{convert_flags.OUTPUT_FORMAT.value}: {convert_flags.OUTPUT.value}")


if __name__ == "__main__":
  flags.mark_flags_as_required(["input", "output"])
  app.run(main)
