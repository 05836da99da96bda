"""Tests for tfbert.alignment.alignment_plot: a readable two-panel PNG of a report."""

import matplotlib.image

from tfbert.alignment import alignment_plot


def test_writes_a_png_with_both_panels(tmp_path):
  report = {"reference": "graph",
            "losses": {"graph": [10.0, 9.0, 8.5], "eager": [10.0, 9.0, 8.5],
                       "bfloat16": [10.0, 9.1, 8.9]},
            "pairs": [{"variant": "eager", "tolerance": 1e-5, "passed": True},
                      {"variant": "bfloat16", "tolerance": 5e-2, "passed": True}]}
  path = alignment_plot.plot_curves(report, str(tmp_path / "a.png"))
  image = matplotlib.image.imread(path)
  assert image.shape[:2] == (540, 675)  # 7.5 x 6.0 inches at 90 dpi.
  # Not blank: lines of several colours were drawn.
  assert len({tuple(p) for p in image.reshape(-1, image.shape[-1])[::37]}) > 20
