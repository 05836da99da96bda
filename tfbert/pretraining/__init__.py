"""Pretraining: Google-format data, input pipeline and checks, MLM + NSP loss, the resumable run."""
