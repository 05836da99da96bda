"""Weight I/O: Google TF1 checkpoints, Hugging Face safetensors, tfbert .keras files, conversion."""
