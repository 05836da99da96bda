"""tfbert: a TensorFlow 2 / Keras 3 BERT whose every training feature is proven correct.

The top level holds the model (`config`, `encoder`, `models`) and the names most users
import; the subpackages group the rest by concern:

  layers/       the BERT layers and the fused kernels under them
  text/         WordPiece tokenization and input packing
  checkpoints/  Google TF1, Hugging Face and .keras weights in and out
  training/     optimizers, schedules, gradient accumulation, strategies, fine-tuning
  runtime/      atomic files, owned run directories, the tools' errors and progress
  serving/      SavedModel exports with validated signatures
  pretraining/  pretraining data, input pipeline, loss and the resumable run
  squad/        SQuAD v1.1/v2.0: data, features, postprocessing, evaluation, run, export
  classifier/   GLUE-format classification: data, metrics, features, run, export
  alignment/    the harness proving that two training set-ups train the same
  inference/    raw text in, answers out: `load`, `save` and each task model's text calls
"""

from tfbert.checkpoints.google_checkpoint import (
                                                  LoadReport,
                                                  export_google_checkpoint,
                                                  load_google_checkpoint,
                                                  read_google_checkpoint,
)
from tfbert.config import BertConfig
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.encoder import BertEncoder
from tfbert.models import BertClassifier, BertPretrainer, BertSpanLabeler, BertTokenClassifier
from tfbert.training.accumulation import with_gradient_accumulation
from tfbert.training.optimization import create_optimizer

# The release, as in pyproject.toml (tests/packaging_test.py keeps the two equal).
__version__ = "0.1.0"

__all__ = [
    "__version__",
    "BertConfig", "BertEncoder", "BertPretrainer", "BertSpanLabeler", "BertClassifier",
    "BertTokenClassifier", "BertSentenceEncoder",
    "LoadReport", "load_google_checkpoint", "export_google_checkpoint", "read_google_checkpoint",
    "with_gradient_accumulation", "create_optimizer", "load", "save",
]


def __getattr__(name: str):
  """`load` and `save` (`tfbert.inference`), imported when first used: they read every
  task's modules, which import this package."""
  if name == "load":
    from tfbert.inference.loading import load  # pylint: disable=import-outside-toplevel
    return load
  if name == "save":
    from tfbert.inference.saving import save  # pylint: disable=import-outside-toplevel
    return save
  raise AttributeError(f"module 'tfbert' has no attribute {name!r}")
