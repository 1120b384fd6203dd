#!/usr/bin/env bash
# The test command: installs what it needs (scripts/setup.sh), then runs the default test suite.
# Extra arguments go to pytest (e.g. `scripts/test.sh -m slow`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
