#!/usr/bin/env bash
# tools/ctfd.sh DIR - a runnable CTFd 3.8.7 with the kopc plugin, for the tests
# (e2e_ctfd, the plugin's unit tests) and for trying the plugin by hand.
#
# DIR/CTFd-3.8.7 is the CTFd tree: from ../shared/vendor/CTFd-3.8.7.tar.gz
# when this checkout has it (checked against the .sha256 beside it), else the
# tag 3.8.7 fetched from GitHub. Either way the tree's content hash (every
# file's path and bytes, so the archive's own bytes do not matter) must be
# CTFD_TREE_SHA256, or the script fails: a test never runs an unknown CTFd.
# DIR/venv is a Python virtual environment with CTFd's requirements.txt,
# installed from PyPI once and kept while requirements.txt is unchanged
# (in CTFD_VENV_CACHE, when set, shared by every checkout: DIR/venv links there).
# The plugin (integrations/ctfd/kopc_ctfd) is linked into CTFd/plugins, as
# docs/ctfd.md tells an organizer to copy it.
#
# Prints nothing on success; run CTFd with DIR/venv/bin/python serve.py
# from DIR/CTFd-3.8.7.
set -euo pipefail
DIR=${1:?usage: tools/ctfd.sh DIR}
SRC=$(cd "$(dirname "$0")/.." && pwd)
VERSION=3.8.7
VENDOR=$SRC/../shared/vendor/CTFd-$VERSION.tar.gz
UPSTREAM=https://codeload.github.com/CTFd/CTFd/tar.gz/refs/tags/$VERSION
CTFD_TREE_SHA256=${CTFD_TREE_SHA256:-d68935e6a19f10735d71389f5d94643b5d0965f95e9db065055550a496c67d78}
PY=${PYTHON:-python3}
TREE=$DIR/CTFd-$VERSION

die() { echo "tools/ctfd.sh: $*" >&2; exit 1; }

# tree_hash DIR: SHA-256 over every regular file's path and SHA-256, sorted.
tree_hash() {
    (cd "$1" && find . -type f ! -path './CTFd/plugins/kopc_ctfd/*' ! -name '*.pyc' \
        ! -path '*/__pycache__/*' ! -path './.data/*' ! -path './CTFd/uploads/*' \
        ! -path './CTFd/logs/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) |
        sha256sum | cut -d' ' -f1
}

unpack() {
    local tmp=$DIR/unpack.$$ archive
    rm -rf "$tmp" && mkdir -p "$tmp"
    if [ -f "$VENDOR" ]; then
        (cd "$(dirname "$VENDOR")" && sha256sum -c --quiet "CTFd-$VERSION.tar.gz.sha256") ||
            die "$VENDOR does not match its .sha256"
        archive=$VENDOR
    else
        archive=$tmp/ctfd.tar.gz
        curl -fsSL --retry 3 -o "$archive" "$UPSTREAM" ||
            die "no $VENDOR and cannot fetch $UPSTREAM: CTFd $VERSION is needed"
    fi
    tar -xzf "$archive" -C "$tmp" || die "cannot unpack $archive"
    [ -d "$tmp/CTFd-$VERSION" ] || die "$archive has no CTFd-$VERSION/"
    local got
    got=$(tree_hash "$tmp/CTFd-$VERSION")
    [ "$got" = "$CTFD_TREE_SHA256" ] || die "CTFd tree hash $got, want $CTFD_TREE_SHA256"
    rm -rf "$TREE"
    mv "$tmp/CTFd-$VERSION" "$TREE"
    rm -rf "$tmp"
    echo "$CTFD_TREE_SHA256" >"$TREE/.kopc-tree-sha256"
}

mkdir -p "$DIR"
if [ "$(cat "$TREE/.kopc-tree-sha256" 2>/dev/null)" != "$CTFD_TREE_SHA256" ]; then
    unpack
fi

# The virtual environment, rebuilt when requirements.txt changes. With
# CTFD_VENV_CACHE (a directory; e2e_ctfd sets it) it lives there, one per
# requirements hash, made under a lock, and DIR/venv links to it: a fresh
# clone on a warm machine does not install CTFd's requirements again.
want=$(sha256sum "$TREE/requirements.txt" | cut -d' ' -f1)
venv=$DIR/venv
if [ -n "${CTFD_VENV_CACHE:-}" ]; then
    mkdir -p "$CTFD_VENV_CACHE"
    venv=$CTFD_VENV_CACHE/ctfd-venv-${want:0:16}
    exec 8>"$venv.lock"
    flock 8
elif [ -L "$venv" ]; then
    rm -f "$venv" # a link to a cache, now not wanted: a venv of its own
fi
if [ "$(cat "$venv/.kopc-requirements" 2>/dev/null)" != "$want" ]; then
    rm -rf "$venv"
    "$PY" -m venv "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$TREE/requirements.txt" ||
        die "pip install -r requirements.txt failed"
    echo "$want" >"$venv/.kopc-requirements"
fi
if [ -n "${CTFD_VENV_CACHE:-}" ]; then
    exec 8>&-
    [ -L "$DIR/venv" ] || rm -rf "$DIR/venv"
    ln -sfn "$venv" "$DIR/venv"
fi

# The plugin, as an organizer installs it: a directory in CTFd/plugins.
ln -sfn "$SRC/integrations/ctfd/kopc_ctfd" "$TREE/CTFd/plugins/kopc_ctfd"
