"""The main job on the embedded default: real pretrained MiniLM (PyPI) through tfbert.

  bash bootstrap.sh demo [--sentence="..." --sentence="..."]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # noqa: E402

from flags import demo_flags  # noqa: E402
from tfbert import demo  # noqa: E402


def main(argv):
  del argv
  sentences = demo_flags.SENTENCES.value or list(demo.DEFAULT_SENTENCES)
  result = demo.run_demo(sentences, demo_flags.SEQ_LENGTH.value)
  print(demo.format_result(sentences, result))


if __name__ == "__main__":
  app.run(main)
