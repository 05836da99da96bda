"""tools/demo.py's library: the main job (pydoc pretraining, SQuAD fine-tuning, the real MiniLM)."""
