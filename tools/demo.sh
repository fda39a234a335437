#!/usr/bin/env bash
# demo.sh start|stop - the demo behind `make run`: a devcluster with one real
# node (containers run there: it needs root), the sample challenges' images
# built here and pushed to its registry, the CRDs, RBAC and sample
# challenges, the API's token Secrets, and the CTF operator running as its
# own service account, serving the participant page on http://127.0.0.1:8080.
# State lives in build/run/.
#
# By default (GATEWAY=1) every instance is reached through the devcluster's
# gateway (Traefik, TLS on 127.0.0.1:P, one self-signed wildcard certificate
# for *.$GATEWAY_DOMAIN) and the operator runs its gateway mode; GATEWAY=0
# (make run GATEWAY=0) exposes instances by NodePort on the node's address.
# The instances' hosts, <id>.ctf.localhost, resolve to 127.0.0.1 in browsers
# and curl but not through glibc (ncat, openssl, Python), so the operator
# gets --gateway-connect-address 127.0.0.1: the page's TCP commands dial
# 127.0.0.1:P with the host as SNI, and work from this machine as shown.
# The operator's probe trusts the devcluster's gateway CA (--gateway-probe-ca
# build/run/devcluster/gateway/ca.crt): an instance is Running only once the
# gateway serves it with a certificate that CA vouches for.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=build/run
DIR=$RUN/devcluster
BIN=build/bin
K="$BIN/kubectl --kubeconfig $DIR/kubeconfig"
GATEWAY=${GATEWAY:-1}
GATEWAY_DOMAIN=${GATEWAY_DOMAIN:-ctf.localhost}

stop() {
    if [ -f "$RUN/ctf-operator.pid" ]; then
        kill -TERM "$(cat "$RUN/ctf-operator.pid")" 2>/dev/null || true
        rm -f "$RUN/ctf-operator.pid" "$RUN/ctf-operator.mode"
        echo "demo: ctf-operator stopped"
    fi
    [ ! -x "$BIN/devcluster" ] || "$BIN/devcluster" stop --dir "$DIR"
}

start() {
    mkdir -p "$RUN"
    if [ "$(id -u)" != 0 ]; then
        echo "demo: the demo runs its challenges on a real node, which needs root (network namespaces," >&2
        echo "      a bridge, mounts, cgroups): run make run as root (docs/devcluster.md)" >&2
        exit 1
    fi
    local gw=(--gateway=false) gw_port="" op_gw=()
    [ "$GATEWAY" = 0 ] || gw=(--gateway-domain "$GATEWAY_DOMAIN")
    "$BIN/devcluster" status --dir "$DIR" >/dev/null 2>&1 ||
        "$BIN/devcluster" start --dir "$DIR" --nodes 0 --real-nodes 1 "${gw[@]}"
    node_ip=$($K get node real-node-0 -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
    if [ "$GATEWAY" != 0 ]; then
        gw_port=$(gateway_port)
        if [ -z "$gw_port" ] || [ "$(gateway_domain)" != "$GATEWAY_DOMAIN" ]; then
            echo "demo: the running devcluster has no gateway for *.$GATEWAY_DOMAIN (started with GATEWAY=0?):" >&2
            echo "      make stop, then make run again" >&2
            exit 1
        fi
        op_gw=(--gateway-domain "$GATEWAY_DOMAIN" --gateway-port "$gw_port"
            --gateway-probe-address "127.0.0.1:$gw_port" --gateway-probe-ca "$PWD/$DIR/gateway/ca.crt"
            --gateway-connect-address 127.0.0.1)
        echo "demo: the gateway (Traefik) serves *.$GATEWAY_DOMAIN on 127.0.0.1:$gw_port"
    fi
    tools/images.sh "$DIR" greeter webflag >/dev/null
    echo "demo: sample challenge images built and pushed to the cluster's registry"
    $K apply -k config/crd >/dev/null
    $K wait --for=condition=Established crd/challenges.ctf.kopc.io crd/challengedefinitions.ctf.kopc.io --timeout=60s >/dev/null
    $K apply -k config/rbac >/dev/null
    $K apply -k config/samples >/dev/null
    echo "demo: CRDs, RBAC and sample ChallengeDefinitions (web, nc, twopod) installed"
    tokens
    if [ -f "$RUN/ctf-operator.pid" ] && kill -0 "$(cat "$RUN/ctf-operator.pid")" 2>/dev/null; then
        echo "demo: ctf-operator already running (pid $(cat "$RUN/ctf-operator.pid"))"
        [ "$(cat "$RUN/ctf-operator.mode" 2>/dev/null)" = "${op_gw[*]}" ] ||
            echo "demo: it runs with other gateway settings than GATEWAY=$GATEWAY asks: make stop, then make run" >&2
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
        nohup "$BIN/ctf-operator" --kubeconfig "$RUN/operator.kubeconfig" --api-bind 127.0.0.1:8080 \
            --node-address "$node_ip" "${op_gw[@]}" >"$RUN/ctf-operator.log" 2>&1 &
        echo $! >"$RUN/ctf-operator.pid"
        echo "${op_gw[*]}" >"$RUN/ctf-operator.mode"
        echo "demo: ctf-operator started as service account kopc-system/kopc-ctf-operator (log: $RUN/ctf-operator.log)"
    fi
    for _ in $(seq 1 60); do
        curl -fs -o /dev/null http://127.0.0.1:8080/api/openapi.json && break
        sleep 0.5
    done
    cat <<TXT

The CTF demo is running. Open the participant page:
  http://127.0.0.1:8080
and sign in with team-b's token (team-a's is in $RUN/tokens.txt, with the admin token):
  $(secret_value ctf-team-tokens team-b)
Press "Create server" on a challenge: it goes Starting -> Running with its
endpoint; reload the page and it is still there; Extend it, Stop it.
TXT
    if [ "$GATEWAY" != 0 ]; then
        cat <<TXT
The challenges run for real on the node at $node_ip, reached through the gateway
on 127.0.0.1:$gw_port (TLS; each instance has its own host <id>.$GATEWAY_DOMAIN,
the SNI). "Echo Chamber" shows commands with Copy; run one here, e.g.
  ncat --ssl --ssl-servername <id>.$GATEWAY_DOMAIN 127.0.0.1 $gw_port
and it greets your team with its flag. "Robots Know" links to
https://<id>.$GATEWAY_DOMAIN:$gw_port (browsers and curl take *.localhost to this
machine), whose robots.txt gives the flag's path away.
The certificate is self-signed by a CA that may vouch for *.$GATEWAY_DOMAIN only:
  $PWD/$DIR/gateway/ca.crt
To check it: ncat --ssl-verify --ssl-trustfile <that file>, openssl s_client
-CAfile <that file> -verify_return_error, curl --cacert <that file>, pwntools
remote(..., ssl_context=ssl.create_default_context(cafile=<that file>)), or
import it in the browser as an authority. NodePorts instead: make stop; make run GATEWAY=0
TXT
    else
        cat <<TXT
The challenges run for real on the node at $node_ip: "Echo Chamber" shows an
nc line (nc $node_ip PORT, or: busybox nc $node_ip PORT) that greets your team
with its flag; "Robots Know" links to its page, whose robots.txt gives the
flag's path away.
TXT
    fi
    cat <<TXT

Or from the shell:
  export KUBECONFIG=$PWD/$DIR/kubeconfig
  $BIN/kubectl -n ctf get chaldef                  # the sample definitions
  $BIN/kubectl -n ctf get chal -w                  # web-team-a goes Pending -> Running
  printf 'apiVersion: ctf.kopc.io/v1alpha1\\nkind: Challenge\\nmetadata: {name: nc-team-b, namespace: ctf}\\nspec: {definition: nc, team: team-b}\\n' | $BIN/kubectl apply -f -
  $BIN/kubectl -n ctf get chal nc-team-b -o yaml  # endpoint, expiry, conditions
  curl -s -H "Authorization: Bearer \$(grep ^admin $RUN/tokens.txt | cut -d' ' -f2)" 127.0.0.1:8080/api/v1/teams/team-b/instances
  curl -s 127.0.0.1:9090/metrics | grep -E 'ctf_instances|ctf_api_requests_total'
Stop everything with: make stop
TXT
}

# gateway_port, gateway_domain: what the devcluster's state says of its
# gateway (empty without one).
gateway_port() {
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("gatewayPort") or "")' "$DIR/devcluster.json"
}
gateway_domain() {
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("gatewayDomain") or "")' "$DIR/devcluster.json"
}

# secret_value SECRET KEY: one value of a Secret in kopc-system, decoded.
secret_value() {
    $K -n kopc-system get secret "$1" -o "jsonpath={.data.$2}" | base64 -d
}

# tokens makes the API's Secrets once (random tokens for the admin and two
# teams) and writes them, readable only by you, to build/run/tokens.txt.
tokens() {
    if ! $K -n kopc-system get secret ctf-api-admin >/dev/null 2>&1; then
        $K -n kopc-system create secret generic ctf-api-admin \
            --from-literal=token="$(openssl rand -hex 24)" >/dev/null
    fi
    if ! $K -n kopc-system get secret ctf-team-tokens >/dev/null 2>&1; then
        $K -n kopc-system create secret generic ctf-team-tokens \
            --from-literal=team-a="$(openssl rand -hex 24)" \
            --from-literal=team-b="$(openssl rand -hex 24)" >/dev/null
    fi
    (
        umask 077
        printf 'admin %s\nteam-a %s\nteam-b %s\n' "$(secret_value ctf-api-admin token)" \
            "$(secret_value ctf-team-tokens team-a)" "$(secret_value ctf-team-tokens team-b)" \
            >"$RUN/tokens.txt"
    )
    echo "demo: API tokens for the admin, team-a and team-b in $RUN/tokens.txt"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
