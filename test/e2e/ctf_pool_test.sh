#!/usr/bin/env bash
# ctf_pool_test.sh - warm pools on a real node (ctf_real_test.py pool): a
# definition with a dynamic flag and a pool of 3 becomes Ready, and its warm
# instances hold no flag; four teams ask at once: three are served from the
# pool (their namespaces are the warm ones) and one fresh; each instance
# greets with its own team's flag, which reached the running, unrestarted
# pod after the claim (the delay printed); the pool refills with new
# instances; an expired claimed instance is deleted, never returned; a later
# claim by another team gets its own flag and nobody else's; lowering min and
# deleting the definition delete the unclaimed instances and keep the claimed.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
export TEAMS="team-a team-b team-c team-d team-e"
# shellcheck source=ctf_real_lib.sh
source "$(dirname "$0")/ctf_real_lib.sh"
real_ctf_init ctf-pool

log "a devcluster with a real node, the sample images, the operator"
real_ctf_up
ok "the operator runs against a cluster with a real node at $NODE_IP"

echo "$passed" >"$WORK/passed"
python3 "$SRC/test/e2e/ctf_real_test.py" pool || fail "ctf_real_test.py pool"
passed=$(cat "$WORK/passed")

kill -0 "$OP_PID" 2>/dev/null || fail "the operator died"
grep -q Forbidden "$WORK/op.log" && fail "the operator met Forbidden answers"
stop_real_operator
ok "the operator stops cleanly on SIGTERM; no Forbidden"
echo "PASS: $passed checks"
