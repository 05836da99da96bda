"""The alignment report as a PNG: loss curves, and each variant's deviation from the reference."""

import matplotlib

matplotlib.use("Agg")  # Files only; no display needed.
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from tfbert.runtime import files  # noqa: E402


def plot_curves(report: dict, path: str, title: str = "") -> str:
  """Writes `report` (`tfbert.alignment.alignment.report_json`) as a two-panel PNG; returns `path`.

  Top: per-step loss of every variant. Bottom: |loss - reference| / |reference| per step
  (log scale; a dot per step that is not bit-identical, the count of identical steps in the
  legend) with each pair's tolerance dashed.
  """
  losses, reference = report["losses"], report["reference"]
  figure, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 6.0), sharex=True, dpi=90)
  for name, curve in losses.items():
    top.plot(np.arange(1, len(curve) + 1), curve, label=name,
             linewidth=2.0 if name == reference else 1.0)
  top.set_ylabel("loss")
  top.legend(fontsize=8)
  top.set_title(title or f"alignment against {reference!r}")
  ref = np.asarray(losses[reference], np.float64)
  for pair, color in zip(report["pairs"], plt.rcParams["axes.prop_cycle"].by_key()["color"][1:]):
    curve = np.asarray(losses[pair["variant"]], np.float64)
    n = min(len(ref), len(curve))
    relative = np.abs(curve[:n] - ref[:n]) / np.maximum(np.abs(ref[:n]), 1e-30)
    differs = relative > 0
    bottom.plot(np.arange(1, n + 1)[differs], relative[differs], ".", color=color,
                markersize=3, label=f"{pair['variant']} ({'ok' if pair['passed'] else 'DIFFERS'}"
                f"; {n - differs.sum()} of {n} steps identical)")
    bottom.axhline(pair["tolerance"], color=color, linestyle="--", linewidth=0.8)
  bottom.set_yscale("log")
  bottom.set_xlabel("applied step")
  bottom.set_ylabel("relative deviation")
  bottom.legend(fontsize=8)
  figure.tight_layout()
  with files.open_file(path, "wb") as f:  # Any filesystem (`tfbert.runtime.files`).
    figure.savefig(f, format="png")
  plt.close(figure)
  return path
