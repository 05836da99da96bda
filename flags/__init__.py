"""absl flag definitions for the tfbert tools, grouped by concern. Only tools import these."""
