"""Losses below the models: the MLM + NSP pretraining loss (`models` and `pretraining` use it)."""
