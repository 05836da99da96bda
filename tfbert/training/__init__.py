"""Training engine: optimizers, schedules, gradient accumulation, strategies, fine-tuning runs."""
