"""Text to ids: WordPiece (reference and in-graph), BasicTokenizer normalization, input packing."""
