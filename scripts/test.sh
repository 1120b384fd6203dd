#!/usr/bin/env bash
# The test command: installs what it needs (scripts/setup.sh), then runs the default test suite.
# The distributed suite (tests/cluster: a three-node Ray cluster on loopback; and the
# several-driver tests, marker `drivers`; 4-8 minutes on 2 cores) is scripts/test_multinode.sh;
# CI (.ci/run) runs both.
# The PostgreSQL tests run against $SWEEPER_TEST_POSTGRES (default: the local server); the first
# line of the run says whether they run or are skipped. Extra arguments go to pytest:
# `scripts/test.sh -m slow` runs the long end-to-end checks and the slow multi-node ones. The slowest tests are
# listed at the end of every run (--durations), so that a test that grows past a minute is seen.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest --durations=15 "$@"
