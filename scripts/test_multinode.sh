#!/usr/bin/env bash
# The distributed suite: the multi-node tests (tests/cluster: a three-node Ray cluster on loopback
# addresses with token authentication, Sweeper launched against it with --address) and the
# several-driver tests (marker `drivers`: two drivers racing for a sweep, takeovers, a driver
# SIGKILLed or SIGTERMed part-way and relaunched, two drivers on PostgreSQL, a local launch
# listening on loopback only), each in processes of its own. 4-8 minutes on 2 cores: 246-457 s in
# the clean-clone CI runs of 2026-11-28 (536 s in one with other work beside it). CI runs it after
# the README's test command (.ci/run). Extra arguments go to pytest:
# `bash scripts/test_multinode.sh -m multinode` runs the multi-node checks alone, slow ones too.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest tests -m '(multinode or drivers) and not slow' --durations=10 "$@"
