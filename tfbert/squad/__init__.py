"""SQuAD: reading, features, postprocessing, reference evaluation, fine-tuning, raw-text export."""
