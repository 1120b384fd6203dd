#!/usr/bin/env bash
# Make (or refresh) the project's virtualenv in .venv and install Sweeper into it.
# torch is installed first, pinned, so that a CPU box that has a local CPU wheel uses it and a
# GPU box gets the CUDA build from PyPI; set SWEEPER_TORCH to pick another spec (e.g. "torch").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.sweeper-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ scripts/setup.sh -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    .venv/bin/python -m pip install -q "${SWEEPER_TORCH:-torch==2.13.0}"
  fi
  # compat: a static path in a .pth, which mypy follows (the default import hook hides the
  # package from a user's mypy); setuptools calls that mode transitional, hence the fallback
  .venv/bin/python -m pip install -q -e ".[dev]" --config-settings editable_mode=compat \
    || .venv/bin/python -m pip install -q -e ".[dev]"
  touch "$stamp"
fi
