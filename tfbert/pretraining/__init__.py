"""Pretraining: Google-format data, input pipeline and checks, held-out evaluation, the resumable
run (its loss is `tfbert.losses.pretraining_loss`)."""
