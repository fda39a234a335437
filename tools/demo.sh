#!/usr/bin/env bash
# demo.sh start|stop - the demo behind `make run`: a devcluster, the CRDs,
# RBAC and sample challenges, and the CTF operator running as its own
# service account. State lives in build/run/.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=build/run
DIR=$RUN/devcluster
BIN=build/bin
K="$BIN/kubectl --kubeconfig $DIR/kubeconfig"

stop() {
    if [ -f "$RUN/ctf-operator.pid" ]; then
        kill -TERM "$(cat "$RUN/ctf-operator.pid")" 2>/dev/null || true
        rm -f "$RUN/ctf-operator.pid"
        echo "demo: ctf-operator stopped"
    fi
    [ ! -x "$BIN/devcluster" ] || "$BIN/devcluster" stop --dir "$DIR"
}

start() {
    mkdir -p "$RUN"
    "$BIN/devcluster" status --dir "$DIR" >/dev/null 2>&1 || "$BIN/devcluster" start --dir "$DIR" --nodes 3
    $K apply -k config/crd >/dev/null
    $K wait --for=condition=Established crd/challenges.ctf.kopc.io crd/challengedefinitions.ctf.kopc.io --timeout=60s >/dev/null
    $K apply -k config/rbac >/dev/null
    $K apply -k config/samples >/dev/null
    echo "demo: CRDs, RBAC and sample ChallengeDefinitions (web, nc, twopod) installed"
    if [ -f "$RUN/ctf-operator.pid" ] && kill -0 "$(cat "$RUN/ctf-operator.pid")" 2>/dev/null; then
        echo "demo: ctf-operator already running (pid $(cat "$RUN/ctf-operator.pid"))"
    else
        token=$($K -n kopc-system create token kopc-ctf-operator --duration=24h)
        server=$($K config view --minify -o jsonpath='{.clusters[0].cluster.server}')
        cat >"$RUN/operator.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: dev, cluster: {server: "$server", certificate-authority: "$PWD/$DIR/ca.crt"}}]
users: [{name: kopc-ctf-operator, user: {token: "$token"}}]
contexts: [{name: operator, context: {cluster: dev, user: kopc-ctf-operator, namespace: kopc-system}}]
current-context: operator
KC
        chmod 600 "$RUN/operator.kubeconfig"
        nohup "$BIN/ctf-operator" --kubeconfig "$RUN/operator.kubeconfig" >"$RUN/ctf-operator.log" 2>&1 &
        echo $! >"$RUN/ctf-operator.pid"
        echo "demo: ctf-operator started as service account kopc-system/kopc-ctf-operator (log: $RUN/ctf-operator.log)"
    fi
    cat <<TXT

The CTF demo is running. Try:
  export KUBECONFIG=$PWD/$DIR/kubeconfig
  $BIN/kubectl -n ctf get chaldef                  # the sample definitions
  $BIN/kubectl -n ctf get chal -w                  # web-team-a goes Pending -> Running
  printf 'apiVersion: ctf.kopc.io/v1alpha1\\nkind: Challenge\\nmetadata: {name: nc-team-b, namespace: ctf}\\nspec: {definition: nc, team: team-b}\\n' | $BIN/kubectl apply -f -
  $BIN/kubectl -n ctf get chal nc-team-b -o yaml  # endpoint, expiry, conditions
  curl -s 127.0.0.1:9090/metrics | grep ctf_instances
Pods are simulated (KWOK): they run, but nothing listens on the endpoints.
Stop everything with: make stop
TXT
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
