"""SavedModel exports of the encoder and the base of the task exports, with validated signatures."""
