#!/usr/bin/env bash
# ctf_isolation_test.sh - instance isolation, enforced and observed on a real
# node: instances of two teams (a TCP one and a two-pod one each) and one
# with internet egress run there, and connections are made from inside their
# containers (ctf_real_test.py isolation):
#   - a pod of a two-pod instance reaches its database by Service name;
#   - team-a's instance reaches neither team-b's pod, its Service (by address
#     or by name), its NodePort, the apiserver (its Service or its address)
#     nor the node's kubelet; team-a's app reaches no database of team-b;
#   - an instance with internet egress still reaches no private, cluster or
#     node address;
#   - each of these is the NetworkPolicies' doing: with the operator stopped
#     and the policies deleted every one of those connections succeeds, and
#     once the operator is back it re-applies them and they fail again.
# The policies are also evaluated with NetworkPolicy's own semantics for every
# pair of instance pods (ctf_check.py isolation), and every instance namespace
# enforces the restricted Pod Security level with no service-account token.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=ctf_real_lib.sh
source "$(dirname "$0")/ctf_real_lib.sh"
real_ctf_init ctf-isolation
check() { python3 "$SRC/test/e2e/ctf_check.py" --kubectl "$KUBECTL" --kubeconfig "$DIR/kubeconfig" "$@"; }

log "a devcluster with a real node, the sample images, the operator"
real_ctf_up
ok "the operator runs against a cluster with a real node at $NODE_IP"

echo "$passed" >"$WORK/passed"
python3 "$SRC/test/e2e/ctf_real_test.py" isolation || fail "ctf_real_test.py isolation"
passed=$(cat "$WORK/passed")

log "the policies by NetworkPolicy's semantics, and pod security"
check isolation --egress-definitions ncnet || fail "isolation does not hold by the policies' semantics (see above)"
ok "no cross-instance connection allowed by the policies; own instance, DNS, internet-if-asked and exposed ports only"
for ns in $(k get ns -l app.kubernetes.io/managed-by=kopc-ctf -o name); do
    [ "$(k get "$ns" -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}')" = restricted ] ||
        fail "$ns does not enforce the restricted level"
done
tokens=$(k get pods -A -l app.kubernetes.io/managed-by=kopc-ctf -o jsonpath='{range .items[*]}{.spec.automountServiceAccountToken}{"\n"}{end}' | sort -u)
[ "$tokens" = false ] || fail "some instance pod mounts a service-account token: $tokens"
ok "restricted Pod Security on every instance namespace; no service-account token in any pod"
stop_real_operator
grep -q Forbidden "$WORK/op.log" && fail "the operator met Forbidden answers"
ok "the operator stops cleanly; no Forbidden"
echo "PASS: $passed checks"
