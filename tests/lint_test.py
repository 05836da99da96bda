"""The code passes the project's linter (ruff, configured in pyproject.toml)."""

import os
import subprocess
import sys

from tests import helpers


def test_ruff_finds_nothing():
  result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."],
                          cwd=helpers.ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
  assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]


def test_the_linter_can_fail(tmp_path):
  # Proof that the check above is live: the same configuration flags a long line.
  bad = tmp_path / "bad.py"
  bad.write_text("x = '" + "y" * 120 + "'\n")
  result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
                           os.path.join(helpers.ROOT, "pyproject.toml"), str(bad)],
                          capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 1 and "E501" in result.stdout, result.stdout
