"""Training engine: optimizers, schedules, gradient accumulation, strategies, the training loop."""
