# lib.sh - what every e2e scenario shares; sourced, not run: the prologue
# (a work directory, a devcluster, the CRDs, the token Secrets, the
# operator's service-account kubeconfig) and the helpers. Each scenario
# defines fail() itself (it knows which logs to show) and may name a
# cleanup function of its own for e2e_init, run before the cluster stops.

passed=0

# log WORDS: a section heading.
log() { printf '=== %s\n' "$*"; }

# ok WORDS: one more check passed.
ok() { passed=$((passed + 1)); printf 'ok %d - %s\n' "$passed" "$*"; }

# wait_for SECONDS DESCRIPTION COMMAND...: retry COMMAND until it succeeds,
# fail after SECONDS (a generous bound, never a timing assertion). With
# WAIT_FOR_WHY naming a function, the failure adds what it prints (the state
# that was waited on, for the reader of a CI log).
wait_for() {
    local secs=$1 what=$2
    shift 2
    local end=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || fail "timed out after ${secs}s waiting for: $what${WAIT_FOR_WHY:+; $("$WAIT_FOR_WHY" 2>&1)}"
        sleep 0.5
    done
}

# free_port: a loopback TCP port nobody listens on now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# real_node_logs DIR: the last lines of what a devcluster with real nodes
# logged (the cluster, each node's init, kubelet, containerd, kube-proxy,
# kube-router, the registry), for a failing test to show the components' own
# words.
real_node_logs() {
    local dir=$1 f
    for f in "$dir/devcluster.log" "$dir"/nodes/*/node.log "$dir"/nodes/*/kubelet.log \
        "$dir"/nodes/*/containerd.log "$dir"/nodes/*/kube-proxy.log "$dir"/nodes/*/kube-router.log \
        "$dir/registry/registry.log"; do
        [ -s "$f" ] || continue
        echo "--- tail of $f"
        # A push asks the registry for what it lacks; those 404s are not news.
        grep -Ev 'err.code="(manifest|blob) unknown"' "$f" | tail -25
    done
}

# e2e_init NAME [CLEANUP]: a fresh $WORK under $KOP_TEST_TMP with the
# cluster's directory $DIR. At exit CLEANUP runs (the scenario's own
# processes), then the cluster stops and $WORK goes (KOP_TEST_KEEP=1 keeps it).
e2e_init() {
    mkdir -p "${KOP_TEST_TMP:-/tmp}"
    WORK=$(mktemp -d "${KOP_TEST_TMP:-/tmp}/$1.XXXXXX")
    DIR=$WORK/cluster
    E2E_CLEANUP=${2:-}
    trap e2e_cleanup EXIT
}

e2e_cleanup() {
    if [ -n "${E2E_CLEANUP:-}" ]; then "$E2E_CLEANUP" || true; fi
    "$DEVCLUSTER" stop --dir "$DIR" >/dev/null 2>&1 || true
    if [ "${KOP_TEST_KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}

# k / kc: kubectl on the scenario's cluster (kc: in the namespace ctf).
k() { "$KUBECTL" --kubeconfig "$DIR/kubeconfig" --request-timeout=30s "$@"; }
kc() { k -n ctf "$@"; }

# fail_summary WORDS: the failure once more, last, after the logs a fail()
# showed, so that whoever reads only the end of the output sees why.
fail_summary() { printf 'FAIL (summary): %s\n' "$*" >&2; }

# ctf_crds: the CTF's CRDs, Established and served.
ctf_crds() {
    k apply -k "$SRC/config/crd" >/dev/null
    k wait --for=condition=Established crd/challenges.ctf.kopc.io crd/challengedefinitions.ctf.kopc.io \
        --timeout=60s >/dev/null || fail "CRDs not Established"
    wait_for 60 "CRDs served" k get chaldef -A
}

# rbac_in_force VERB RESOURCE [KUBECTL-ARGS...]: wait until the apiserver's
# authorizer lets the operator's service account do VERB on RESOURCE. A
# Role or binding just written takes a moment to reach the authorizer's
# cache; an operator started before that meets a 403 its RBAC does not
# deserve, and the scenarios count every Forbidden.
rbac_in_force() {
    wait_for 60 "RBAC: $1 $2 allowed" \
        k auth can-i "$1" "$2" --as=system:serviceaccount:kopc-system:kopc-ctf-operator "${@:3}"
}

# ctf_rbac_in_force: config/rbac's ClusterRole (one object: one of its
# rules allowed means all are) and leader-election Role are in force.
ctf_rbac_in_force() {
    rbac_in_force watch pods
    rbac_in_force update leases.coordination.k8s.io -n kopc-system
}

# ctf_rbac_and_samples: the operator's RBAC (which makes kopc-system), the
# CRDs and the samples' definitions (without the samples' own Challenge:
# scenarios make their own).
ctf_rbac_and_samples() {
    k apply -k "$SRC/config/rbac" >/dev/null
    ctf_rbac_in_force
    ctf_crds
    k apply -k "$SRC/config/samples" >/dev/null
    kc delete chal --all >/dev/null
}

# ctf_token_secrets TEAM...: the API's token Secrets in kopc-system, one
# admin token and one per TEAM: $ADMIN_TOKEN, ${TOKENS[team]} and
# $TEAM_TOKENS (the same as a JSON object).
declare -A TOKENS
ctf_token_secrets() {
    local t args=()
    ADMIN_TOKEN=$(openssl rand -hex 24)
    for t in "$@"; do
        TOKENS[$t]=$(openssl rand -hex 24)
        args+=("--from-literal=$t=${TOKENS[$t]}")
    done
    k -n kopc-system create secret generic ctf-api-admin --from-literal=token="$ADMIN_TOKEN" >/dev/null
    k -n kopc-system create secret generic ctf-team-tokens "${args[@]}" >/dev/null
    TEAM_TOKENS=$(for t in "${!TOKENS[@]}"; do printf '%s\n%s\n' "$t" "${TOKENS[$t]}"; done |
        python3 -c 'import json,sys; l=sys.stdin.read().split(); print(json.dumps(dict(zip(l[::2], l[1::2]))))')
}

# sa_kubeconfig PATH [SERVER [CA]]: a kubeconfig for the operator's service
# account (config/rbac), for the cluster's apiserver unless SERVER (a proxy
# in front of it) is given. The token is made once, in $SA_TOKEN.
sa_kubeconfig() {
    local server=${2:-} ca=${3:-$DIR/ca.crt}
    [ -n "$server" ] || server=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
    [ -n "${SA_TOKEN:-}" ] || SA_TOKEN=$(k -n kopc-system create token kopc-ctf-operator --duration=6h)
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: dev, cluster: {server: "$server", certificate-authority: "$ca"}}]
users: [{name: operator, user: {token: "$SA_TOKEN"}}]
contexts: [{name: operator, context: {cluster: dev, user: operator, namespace: kopc-system}}]
current-context: operator
EOF
}
