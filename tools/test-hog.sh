#!/usr/bin/env bash
# tools/test-hog.sh [N] - `make test` on a fresh clone of HEAD, N times in a
# row (default 3), with a CPU hog beside every run: the check that the suite
# holds on a loaded machine (docs/reliability.md, "the whole suite under
# load"). Run by `make test-hog` (HOG_RUNS=N).
#
# Each run clones the repository afresh (the commit HEAD names now, so
# uncommitted changes are not tested) into build/test-hog/<time>/run-<i>/kopc;
# a ../shared beside the repository (the vendored CTFd) is linked beside the
# clone so the clone finds it as the checkout does. The hog is
# `stress-ng --cpu 1` (installed through apt-get when missing and possible),
# else a shell busy loop on one core; it runs for the whole of each run and
# is stopped after it. The loop stops at the first failing run. At the end a
# table says, for each run, when it started and ended and how it went (its
# log is beside it); the exit status is 1 when any run failed.
#
# Env: HOG_DRY=1 prints what would be done and runs nothing; HOG_DIR chooses
# where the clones and logs go. N=0 runs nothing and prints an empty table.
# Takes about 37 minutes a run on 2 cores (docs/reliability.md, "The suite's time budget").
set -euo pipefail
N=${1:-${HOG_RUNS:-3}}
[[ $N =~ ^[0-9]+$ ]] || { echo "test-hog: N must be a number, not '$N'" >&2; exit 2; }
SRC=$(cd "$(dirname "$0")/.." && pwd)
COMMIT=$(git -C "$SRC" rev-parse HEAD)
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${HOG_DIR:-$SRC/build/test-hog/$STAMP}
DRY=${HOG_DRY:-}
HOG_PID=
ROWS=()

say() { printf 'test-hog: %s\n' "$*"; }

# hog_command prints the command of the CPU hog, installing stress-ng when
# it is missing and apt-get can (quietly: the busy loop does as well).
hog_command() {
    if ! command -v stress-ng >/dev/null && [ -z "$DRY" ] && [ "$N" -gt 0 ] && command -v apt-get >/dev/null; then
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends stress-ng \
            >"$OUT/apt-stress-ng.log" 2>&1 || true
    fi
    if command -v stress-ng >/dev/null; then
        echo "stress-ng --cpu 1 --quiet"
    else
        echo "bash -c 'while :; do :; done'"
    fi
}

hog_start() {
    bash -c "exec $HOG" >/dev/null 2>&1 &
    HOG_PID=$!
}

hog_stop() {
    if [ -n "$HOG_PID" ]; then
        kill "$HOG_PID" 2>/dev/null || true
        wait "$HOG_PID" 2>/dev/null || true
        HOG_PID=
    fi
}
trap hog_stop EXIT
trap 'exit 130' INT TERM

table() {
    printf '\n%-4s %-20s %-20s %s\n' run "start (UTC)" "end (UTC)" result
    local row
    for row in "${ROWS[@]}"; do
        printf '%s\n' "$row"
    done
}

mkdir -p "$OUT"
HOG=$(hog_command)
say "commit $COMMIT, $N run(s) of make test, each on a fresh clone under $OUT"
say "the hog beside each run: $HOG"
if [ -n "$DRY" ]; then
    for i in $(seq 1 "$N"); do
        say "would run $i: git clone $SRC $OUT/run-$i/kopc; git checkout $COMMIT; make test (log $OUT/run-$i.log)"
    done
    table
    exit 0
fi

failed=0
for i in $(seq 1 "$N"); do
    dir=$OUT/run-$i
    mkdir -p "$dir"
    [ -d "$SRC/../shared" ] && ln -sfn "$(cd "$SRC/../shared" && pwd)" "$dir/shared"
    start=$(date -u '+%F %T')
    t0=$SECONDS
    result=pass
    if ! git clone --quiet --no-checkout "$SRC" "$dir/kopc" >"$dir.log" 2>&1 ||
        ! git -C "$dir/kopc" checkout --quiet --detach "$COMMIT" >>"$dir.log" 2>&1; then
        result="FAIL (clone; see $dir.log)"
    else
        say "run $i of $N: make test (log $dir.log)"
        hog_start
        if ! make -C "$dir/kopc" test >>"$dir.log" 2>&1; then
            result="FAIL (see $dir.log)"
        fi
        hog_stop
    fi
    secs=$((SECONDS - t0))
    ROWS+=("$(printf '%-4s %-20s %-20s %s, %dm%02ds' "$i" "$start" "$(date -u '+%F %T')" "$result" \
        $((secs / 60)) $((secs % 60)))")
    say "run $i: $result"
    if [ "$result" != pass ]; then
        failed=1
        break
    fi
done
table
if [ "$failed" = 1 ]; then
    say "FAILED: a run failed; its log's failures: grep -n 'Failed\\|FAIL' on the log named above"
    exit 1
fi
say "all $N run(s) passed at $COMMIT"
