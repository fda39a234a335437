#!/usr/bin/env bash
# devcluster_up.sh - ctest fixture: a fresh devcluster in KOP_DEVCLUSTER_DIR
# for the integration tests. A cluster left over from an interrupted run is
# stopped first. If the cluster cannot start, this fails, and ctest then
# fails every test that requires it: integration tests never skip.
set -euo pipefail
DEVCLUSTER=${DEVCLUSTER:?}
DIR=${KOP_DEVCLUSTER_DIR:?}
[ -x "$DEVCLUSTER" ] || { echo "devcluster_up: $DEVCLUSTER not built (run: make devcluster)" >&2; exit 1; }
"$DEVCLUSTER" stop --dir "$DIR" >/dev/null 2>&1 || true
rm -rf "$DIR"
# Tests must see old resourceVersions expire (410 Gone) within seconds: etcd
# history is compacted every 5 s, and ConfigMaps are served without the
# apiserver's watch cache, whose window would otherwise still answer from
# memory. Everything else keeps the defaults.
exec "$DEVCLUSTER" start --dir "$DIR" --nodes 2 --compaction-interval 5s \
    --apiserver-arg=--watch-cache-sizes=configmaps#0
