# lib.sh - what every e2e scenario shares; sourced, not run. Each scenario
# defines fail() (which knows what logs to show), k() and cleanup() itself.

passed=0

# log WORDS: a section heading.
log() { printf '=== %s\n' "$*"; }

# ok WORDS: one more check passed.
ok() { passed=$((passed + 1)); printf 'ok %d - %s\n' "$passed" "$*"; }

# wait_for SECONDS DESCRIPTION COMMAND...: retry COMMAND until it succeeds,
# fail after SECONDS (a generous bound, never a timing assertion).
wait_for() {
    local secs=$1 what=$2
    shift 2
    local end=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || fail "timed out after ${secs}s waiting for: $what"
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
