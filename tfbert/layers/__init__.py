"""The BERT layers: embeddings, attention, transformer layer, heads, fused kernels and dropout."""
