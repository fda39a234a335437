# shellcheck shell=bash
# certmanager_lib.sh - real cert-manager beside a devcluster; sourced, not
# run. Its controller and cainjector (build/bin/cert-manager-controller and
# -cainjector, from the release pinned in tools/cert-manager/go.mod: make
# cert-manager) run as processes on the host with the cluster's admin
# kubeconfig, out of the cluster, one replica each and no leader election;
# its CRDs (build/bin/cert-manager-crds.yaml, rendered from the same
# module's chart) are applied first. cert-manager's own admission webhook
# does not run: it only validates and defaults cert-manager's objects, which
# the CRDs' schemas check too, and takes no part in issuing or injecting.
#
# Needs $DIR (the cluster), $WORK, k() and fail() (lib.sh and the scenario;
# its fail() should show cert_manager_logs).
# Env: CERT_MANAGER_BIN, the directory with the three files (default: the
# one beside $KUBECTL).

CM_PIDS=()
CM_VERSION=

# cert_manager_start: the release in CM_VERSION, the CRDs Established, then the controller and the
# cainjector started (logs in $WORK/cert-manager-*.log). Fails, never
# skips, when a part is missing or a process exits at once.
cert_manager_start() {
    local bin=${CERT_MANAGER_BIN:-$(dirname "$KUBECTL")} part
    for part in cert-manager-controller cert-manager-cainjector cert-manager-crds.yaml; do
        [ -e "$bin/$part" ] || fail "no $bin/$part: run make cert-manager"
    done
    # shellcheck disable=SC2034 # the scenario reports it
    CM_VERSION=$("$bin/cert-manager-controller" --version) || fail "$bin/cert-manager-controller --version"
    # Server-side: the CRDs are too large for the last-applied annotation.
    k apply --server-side -f "$bin/cert-manager-crds.yaml" >"$WORK/cert-manager-crds.log" 2>&1 ||
        { cat "$WORK/cert-manager-crds.log"; fail "cert-manager's CRDs were not applied"; }
    k wait --for=condition=Established crd/certificates.cert-manager.io crd/issuers.cert-manager.io \
        crd/clusterissuers.cert-manager.io crd/certificaterequests.cert-manager.io --timeout=60s >/dev/null ||
        fail "cert-manager's CRDs not Established"
    "$bin/cert-manager-controller" --kubeconfig "$DIR/kubeconfig" --cluster-resource-namespace kube-system \
        >"$WORK/cert-manager-controller.log" 2>&1 &
    CM_PIDS+=($!)
    "$bin/cert-manager-cainjector" --kubeconfig "$DIR/kubeconfig" >"$WORK/cert-manager-cainjector.log" 2>&1 &
    CM_PIDS+=($!)
    cm_started() { grep -q 'starting controllers' "$WORK/cert-manager-controller.log" &&
        grep -q 'Starting Controller' "$WORK/cert-manager-cainjector.log"; }
    local end=$((SECONDS + 60))
    until cm_started; do
        cert_manager_alive
        [ $SECONDS -lt $end ] || fail "cert-manager did not start in 60s"
        sleep 0.5
    done
}

# cert_manager_alive: both processes still run.
cert_manager_alive() {
    local pid
    for pid in "${CM_PIDS[@]}"; do
        kill -0 "$pid" 2>/dev/null || fail "a cert-manager process ($pid) exited"
    done
}

# cert_manager_logs: the last lines each process logged, for a failure.
cert_manager_logs() {
    local f
    for f in "$WORK/cert-manager-controller.log" "$WORK/cert-manager-cainjector.log"; do
        [ -s "$f" ] || continue
        echo "--- tail of $f" >&2
        tail -25 "$f" >&2
    done
}

# cert_manager_stop: end both processes (the scenario's cleanup calls it).
cert_manager_stop() {
    local pid
    for pid in "${CM_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${CM_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    CM_PIDS=()
}
