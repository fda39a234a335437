#!/usr/bin/env bash
# run.sh - the benchmark in one command (make bench, make bench-quick).
#
#   bench/run.sh [--quick] [--out DIR] [bench.py flags: --only, --no-api, --write-doc, ...]
#
# Builds the peers (Go with the default module and build caches, so a warm
# machine rebuilds them in seconds; kopf and matplotlib into the venv
# build/bench-venv, pinned), installs wrk and nginx for the API read path
# when missing (full mode only), then runs bench/bench.py. Needs
# build/bin/{devcluster,kubectl,flightticket-operator,ctf-operator,bench-loader}
# (make build devcluster). BENCH_QUICK=1 is the same as --quick.
# Results: bench/results/<date>[-quick]/ unless --out is given.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

quick=${BENCH_QUICK:-0}
out=""
args=()
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=1 ;;
    --out) out=$2; shift ;;
    *) args+=("$1") ;;
    esac
    shift
done
[ "$quick" = 0 ] || [ "$quick" = "" ] || args+=(--quick)
if [ -z "$out" ]; then
    out=bench/results/$(date -u +%Y%m%d-%H%M%S)
    [ "$quick" = 0 ] || out=$out-quick
fi

for b in devcluster kubectl flightticket-operator ctf-operator bench-loader; do
    [ -x "build/bin/$b" ] || { echo "bench: build/bin/$b missing: make build devcluster" >&2; exit 1; }
done

echo "bench: building the Go peers (controller-runtime)"
mkdir -p build/bench
for p in flightticket-go challenge-go; do
    (cd "bench/peers/$p" && nice -n 10 go build -o "$ROOT/build/bench/$p" .)
done

# The venv: kopf (the Python peer) and matplotlib (the plot), pinned.
# BENCH_VENV_CACHE (a directory; bench/smoke_test.sh sets it) keeps it
# outside the tree, one per requirements stamp, so a fresh clone on a warm
# machine does not install it again, as Go's caches spare the rebuilds;
# a lock lets two runs share it.
reqs=(bench/peers/flightticket-kopf/requirements.txt bench/requirements.txt)
stamp=$(cat "${reqs[@]}" | sha256sum | cut -c1-16)
venv=build/bench-venv
if [ -n "${BENCH_VENV_CACHE:-}" ]; then
    mkdir -p "$BENCH_VENV_CACHE"
    venv=$BENCH_VENV_CACHE/bench-venv-$stamp
    exec 8>"$venv.lock"
    flock 8
fi
export BENCH_VENV=$venv
if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$stamp" ]; then
    echo "bench: installing kopf and matplotlib into $venv"
    python3 -m venv "$venv" 2>/dev/null || {
        SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
        $SUDO apt-get install -y -q --no-install-recommends python3-venv
        python3 -m venv "$venv"
    }
    "$venv/bin/pip" install -q --disable-pip-version-check "${reqs[@]/#/-r}"
    echo "$stamp" >"$venv/.stamp"
fi
[ -z "${BENCH_VENV_CACHE:-}" ] || exec 8>&-

# wrk and nginx for the API read path: only the full run measures it.
if [ "$quick" = 0 ] || [ "$quick" = "" ]; then
    missing=()
    command -v wrk >/dev/null || missing+=(wrk)
    command -v nginx >/dev/null || missing+=(nginx-light)
    if [ ${#missing[@]} -gt 0 ]; then
        echo "bench: installing ${missing[*]} (Debian) for the API read path"
        SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
        $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" ||
            { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"; }
    fi
fi

echo "bench: load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$venv/bin/python" bench/bench.py --out "$out" "${args[@]}"
