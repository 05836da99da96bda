"""Sentence(-pair) classification: GLUE data and metrics, features, fine-tuning, raw-text export."""
