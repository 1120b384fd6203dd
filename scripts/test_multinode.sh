#!/usr/bin/env bash
# The multi-node suite (tests/cluster): a three-node Ray cluster on loopback addresses with token
# authentication, Sweeper launched against it with --address (~3 minutes on 2 cores, the cluster's
# start included). CI runs it after the README's test command (.ci/run). Extra arguments go to
# pytest: `bash scripts/test_multinode.sh -m multinode` adds the slow multi-node checks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest tests/cluster -m 'multinode and not slow' --durations=5 "$@"
