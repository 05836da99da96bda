"""tfbert: a TensorFlow 2 / Keras 3 BERT whose every training feature is proven correct."""

from tfbert.config import BertConfig
from tfbert.encoder import BertEncoder
from tfbert.google_checkpoint import (LoadReport, export_google_checkpoint,
                                      load_google_checkpoint, read_google_checkpoint)
from tfbert.models import BertClassifier, BertPretrainer, BertSpanLabeler

__all__ = [
    "BertConfig", "BertEncoder", "BertPretrainer", "BertSpanLabeler", "BertClassifier",
    "LoadReport", "load_google_checkpoint", "export_google_checkpoint", "read_google_checkpoint",
]
