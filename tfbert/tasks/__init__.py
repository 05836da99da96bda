"""What every fine-tuning task shares: the fine-tuning run's steps (`fine_tuning`) and the
precision check of every run (`precision`), above the training engine, the models, the
checkpoints and the exports."""
