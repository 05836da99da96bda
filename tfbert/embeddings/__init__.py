"""Sentence embeddings: evaluation metrics of sentence encoders (similarity and retrieval)."""
