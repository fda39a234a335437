#!/usr/bin/env bash
# smoke_test.sh - the benchmark harness in its quick mode (ctest e2e_bench_smoke,
# so `make test` proves it works): a few objects per operator and cell, then
# bench/check.py asserts the output is sane - every object reconciled by
# every operator, every team served (from the pool in the pooled runs),
# every expiring instance gone, every updated instance on the new generation
# with never more than maxUnavailable replaced at once, every team's own token
# accepted and another team's refused, writes counted by the apiserver,
# every measurement gated and placed in its trial's order, every CSV
# non-empty, the tables and the plots written. It never asserts a time: benchmarks are not tests.
#
# Env: KOP_TEST_TMP (scratch directory).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "${KOP_TEST_TMP:-/tmp}"
OUT=$(mktemp -d "${KOP_TEST_TMP:-/tmp}/bench-smoke.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
# The venv (kopf, matplotlib) is kept in the user's cache, not in the tree:
# a fresh clone on a warm machine skips installing it (about 30 s).
BENCH_VENV_CACHE=${BENCH_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopc} \
    "$ROOT/bench/run.sh" --quick --out "$OUT/results" --settle 1
PYTHONDONTWRITEBYTECODE=1 python3 "$ROOT/bench/check.py" "$OUT/results"
