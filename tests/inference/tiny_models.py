"""Tiny random task models over the real uncased vocabulary, with text settings attached,
for the raw-text tests (1 layer, H 32: the property under test is the code path, which any
weights exercise)."""

from tfbert.checkpoints import pretrained
from tfbert.inference import text_settings

TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=64, initializer_range=0.5,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
TAGS = ("O", "B-per", "I-per", "B-loc", "I-loc")
LABELS = ("contradiction", "entailment", "neutral")  # Classes in id order.
TEXTS = ["Mira met Zyxwar in Oslo.", "", "née café au lait", "The cat sat on the mat!"]
PAIRS = [("A man eats.", "Someone is eating."), ("It rains.", ""), ("x", "y z")]


def with_text(model, seq_length, **span):
  """`model` built, with the uncased vocabulary and S = `seq_length` attached."""
  model.build()
  return text_settings.attach_text(model, pretrained.minilm_vocab_file(), True, seq_length,
                                   **span)
