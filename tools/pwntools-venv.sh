#!/usr/bin/env bash
# pwntools-venv.sh - the Python virtual environment with pwntools, pinned in
# test/e2e/pwntools-requirements.txt, that runs the participant page's
# pwntools line for real (test/e2e/pwntools_line.py): made in
# build/pwntools-venv on first use and again whenever the requirements
# change (the same way bench/run.sh makes build/bench-venv). With
# PWNTOOLS_VENV_CACHE (a directory) it lives there instead, one per
# requirements stamp, under a lock, so fresh clones on a warm machine share
# it. Prints the venv's directory on stdout; progress goes to stderr.
#
# About 12 s and 250 MB on a warm network (pwntools pulls unicorn, capstone,
# paramiko and friends); needs python3-venv (tools/install-deps.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
reqs=$ROOT/test/e2e/pwntools-requirements.txt
stamp=$(sha256sum "$reqs" | cut -c1-16)
venv=$ROOT/build/pwntools-venv
mkdir -p "$ROOT/build"
if [ -n "${PWNTOOLS_VENV_CACHE:-}" ]; then
    mkdir -p "$PWNTOOLS_VENV_CACHE"
    venv=$PWNTOOLS_VENV_CACHE/pwntools-venv-$stamp
fi
exec 8>"$venv.lock"
flock 8
if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$stamp" ]; then
    echo "pwntools-venv: installing $(grep -v '^#' "$reqs" | tr '\n' ' ')into $venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv" >&2 || {
        echo "pwntools-venv: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2
        exit 1
    }
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$reqs" >&2 || {
        echo "pwntools-venv: pip install -r $reqs failed" >&2
        exit 1
    }
    echo "$stamp" >"$venv/.stamp"
fi
echo "$venv"
