"""Around the model: atomic files, run directories, config validation, tool errors, progress."""
