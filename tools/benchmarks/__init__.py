"""tools/benchmark.py's library: tfbert vs TF Model Garden training steps; kernels, data and MFU."""
