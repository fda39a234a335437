#!/usr/bin/env bash
# soak.sh - `make soak`: the CTF operator under create/renew/delete/expire
# churn for SOAK_SECONDS (default 3600) on a devcluster, as its service
# account, with its resident memory (VmRSS), open file descriptors and
# threads sampled every SOAK_INTERVAL seconds (default 10) into a CSV.
#
# The churn goes through the instance API with the admin token, as a CTF
# platform would: SOAK_TEAMS teams (default 40) each cycle through the
# definition "soak" (a copy of the web sample living 60 s, at most 120 s,
# renewable by 30 s): create, then renew, delete or let expire, at random;
# an event stream is held open and reopened every minute; /metrics is read
# at each sample.
#
# With SOAK_REAL=1 (the default when run as root, which real nodes need) the
# devcluster has one real node and no fake ones: the instances are real
# containers (the web sample's image, pushed by tools/images.sh), pulled,
# started, probed and torn down all hour long. SOAK_REAL=0 uses two fake
# (KWOK) nodes.
#
# At the end it compares the last fifth of the samples with the second
# fifth (the first is warm-up): RSS, descriptors and threads must be flat,
# i.e. the last fifth's mean RSS within 10% + 2 MiB of the second fifth's,
# the descriptors' mean within 8, the threads' within 4. It prints a summary and exits 1 when not
# flat, or when the operator does not exit 0 on SIGTERM at the end.
# Results go to SOAK_OUT (default build/soak/<time>): samples.csv,
# summary.txt, operator.log. Not part of `make test`.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (default build/bin/*), SOAK_SECONDS,
#      SOAK_INTERVAL, SOAK_TEAMS, SOAK_OUT, SOAK_REAL.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEVCLUSTER=${DEVCLUSTER:-$ROOT/build/bin/devcluster}
KUBECTL=${KUBECTL:-$ROOT/build/bin/kubectl}
OPERATOR=${OPERATOR:-$ROOT/build/bin/ctf-operator}
SOAK_SECONDS=${SOAK_SECONDS:-3600}
SOAK_INTERVAL=${SOAK_INTERVAL:-10}
SOAK_REAL=${SOAK_REAL:-$([ "$(id -u)" = 0 ] && echo 1 || echo 0)}
SOAK_TEAMS=${SOAK_TEAMS:-$([ "$SOAK_REAL" = 1 ] && echo 20 || echo 40)}
OUT=${SOAK_OUT:-$ROOT/build/soak/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kopc-soak.XXXXXX")
DIR=$TMP/cluster
op_pid= stream_pid=

say() { printf '[soak %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() {
    say "FAIL: $*" >&2
    exit 1
}
k() { "$KUBECTL" --kubeconfig "$DIR/kubeconfig" --request-timeout=30s "$@"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cleanup() {
    [ -n "$stream_pid" ] && kill "$stream_pid" 2>/dev/null || true
    [ -n "$op_pid" ] && kill -9 "$op_pid" 2>/dev/null || true
    "$DEVCLUSTER" stop --dir "$DIR" >/dev/null 2>&1 || true
    rm -rf "$TMP"
}
trap cleanup EXIT
for b in "$DEVCLUSTER" "$KUBECTL" "$OPERATOR"; do [ -x "$b" ] || die "$b not built (make build devcluster)"; done

say "devcluster (real node: $SOAK_REAL), RBAC, CRDs, the 'soak' definition; results in $OUT"
node_args=()
if [ "$SOAK_REAL" = 1 ]; then
    "$DEVCLUSTER" start --dir "$DIR" --nodes 0 --real-nodes 1 >/dev/null || die "devcluster start --real-nodes 1"
    "$ROOT/tools/images.sh" "$DIR" webflag >/dev/null || die "tools/images.sh webflag"
    node_ip=$(k get node real-node-0 -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
    node_args=(--node-address "$node_ip")
else
    "$DEVCLUSTER" start --dir "$DIR" --nodes 2 >/dev/null || die "devcluster start"
fi
k apply -k "$ROOT/config/rbac" >/dev/null
k apply -k "$ROOT/config/crd" >/dev/null
k wait --for=condition=Established crd/challenges.ctf.kopc.io crd/challengedefinitions.ctf.kopc.io --timeout=60s >/dev/null
sleep 2
k apply -k "$ROOT/config/samples" >/dev/null
k -n ctf delete chal --all >/dev/null
k -n ctf get chaldef web -o json | python3 -c "
import json, sys
o = json.load(sys.stdin)
o['metadata'] = {'name': 'soak', 'namespace': 'ctf'}
o.pop('status', None)
o['spec']['lifetime'] = {'default': '60s', 'max': '120s', 'renewBy': '30s'}
print(json.dumps(o))" | k apply -f - >/dev/null
TOKEN=$(openssl rand -hex 24)
k -n kopc-system create secret generic ctf-api-admin --from-literal=token="$TOKEN" >/dev/null
sa_token=$(k -n kopc-system create token kopc-ctf-operator --duration=48h)
server=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
cat >"$TMP/operator.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: dev, cluster: {server: "$server", certificate-authority: "$DIR/ca.crt"}}]
users: [{name: operator, user: {token: "$sa_token"}}]
contexts: [{name: operator, context: {cluster: dev, user: operator, namespace: kopc-system}}]
current-context: operator
EOF
METRICS=$(free_port)
API=$(free_port)
"$OPERATOR" --kubeconfig "$TMP/operator.kubeconfig" --metrics-bind "127.0.0.1:$METRICS" \
    --api-bind "127.0.0.1:$API" --max-instances-per-team 1 "${node_args[@]}" >"$OUT/operator.log" 2>&1 &
op_pid=$!
for _ in $(seq 120); do curl -sf "http://127.0.0.1:$METRICS/readyz" >/dev/null && break; sleep 0.5; done
curl -sf "http://127.0.0.1:$METRICS/readyz" >/dev/null || die "operator not ready"

say "churn for $SOAK_SECONDS s, $SOAK_TEAMS teams, a sample every $SOAK_INTERVAL s"
python3 - "$SOAK_SECONDS" "$SOAK_INTERVAL" "$SOAK_TEAMS" "$op_pid" "$API" "$METRICS" "$TOKEN" "$OUT" <<'PY' || die "churn failed"
import csv, json, os, random, subprocess, sys, threading, time, urllib.request, urllib.error

secs, interval, teams, pid = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
api, metrics, token, out = sys.argv[5], sys.argv[6], sys.argv[7], sys.argv[8]
base = f"http://127.0.0.1:{api}/api/v1"
stop = time.time() + secs
counts = {"create": 0, "renew": 0, "delete": 0, "errors": 0}

def call(method, path):
    req = urllib.request.Request(base + path, method=method, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, None
    except OSError:
        return 0, None

def churn():
    rng = random.Random(1)
    while time.time() < stop:
        team = f"soak-{rng.randrange(teams):02d}"
        code, body = call("GET", f"/teams/{team}/instances/soak")
        if code == 404 or (body and body.get("state") == "Stopped"):
            code, _ = call("PUT", f"/teams/{team}/instances/soak")
            counts["create"] += 1
        elif code == 200 and body.get("state") == "Running":
            r = rng.random()
            if r < 0.3:
                code, _ = call("POST", f"/teams/{team}/instances/soak/renew")
                counts["renew"] += 1
            elif r < 0.6:
                code, _ = call("DELETE", f"/teams/{team}/instances/soak")
                counts["delete"] += 1
        if code not in (200, 201, 202, 404, 409, 429):
            counts["errors"] += 1
        time.sleep(0.25)

def stream():
    while time.time() < stop:
        req = urllib.request.Request(f"{base}/teams/soak-00/events",
                                     headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(req, timeout=70) as r:
                end = time.time() + 60
                while time.time() < end and time.time() < stop:
                    if not r.readline():
                        break
        except OSError:
            time.sleep(1)

def proc(field):
    with open(f"/proc/{pid}/status") as f:
        for ln in f:
            if ln.startswith(field + ":"):
                return int(ln.split()[1])
    return -1

threading.Thread(target=churn, daemon=True).start()
threading.Thread(target=stream, daemon=True).start()
t0 = time.time()
with open(f"{out}/samples.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["seconds", "rss_kib", "fds", "threads", "challenges", "creates", "renews", "deletes", "api_errors"])
    while time.time() < stop:
        time.sleep(interval)
        if not os.path.exists(f"/proc/{pid}"):
            sys.exit("the operator exited")
        try:
            page = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=30).read().decode()
            live = sum(float(l.split()[-1]) for l in page.splitlines() if l.startswith("ctf_instances{"))
        except OSError:
            live = -1
        w.writerow([round(time.time() - t0), proc("VmRSS"), len(os.listdir(f"/proc/{pid}/fd")),
                    proc("Threads"), int(live), counts["create"], counts["renew"], counts["delete"],
                    counts["errors"]])
        f.flush()
PY

say "summary"
kill -0 "$op_pid" 2>/dev/null || die "the operator exited during the soak"
kill -TERM "$op_pid"
rc=0
wait "$op_pid" || rc=$?
op_pid=
[ "$rc" = 0 ] || die "the operator exited with $rc after SIGTERM"
python3 - "$OUT" "$SOAK_SECONDS" <<'PY' | tee "$OUT/summary.txt"
import csv, sys
out, secs = sys.argv[1], int(sys.argv[2])
rows = [{k: int(v) for k, v in r.items()} for r in csv.DictReader(open(f"{out}/samples.csv"))]
n = len(rows)
if n < 10:
    sys.exit("too few samples")
fifth = n // 5
def mean(rs, k): return sum(r[k] for r in rs) / len(rs)
early, late = rows[fifth:2 * fifth], rows[-fifth:]
last = rows[-1]
print(f"duration {secs} s, {n} samples; churn: {last['creates']} creates, {last['renews']} renewals, "
      f"{last['deletes']} deletes (the rest expired), {last['api_errors']} API errors")
print(f"challenges alive: mean {mean(rows, 'challenges'):.1f}, max {max(r['challenges'] for r in rows)}")
for k, unit in (("rss_kib", "KiB"), ("fds", ""), ("threads", "")):
    print(f"{k:8} first sample {rows[0][k]}, min {min(r[k] for r in rows)}, max {max(r[k] for r in rows)}, "
          f"mean of 2nd fifth {mean(early, k):.0f}, mean of last fifth {mean(late, k):.0f} {unit}")
rss_ok = mean(late, "rss_kib") <= mean(early, "rss_kib") * 1.10 + 2048
fds_ok = mean(late, "fds") <= mean(early, "fds") + 8
thr_ok = mean(late, "threads") <= mean(early, "threads") + 4
print("over time (each tenth of the run: its last sample):")
print("| minute | RSS (KiB) | fds | threads | instances alive |")
print("|---|---|---|---|---|")
for i in range(1, 11):
    r = rows[min(n - 1, i * n // 10 - 1)]
    print(f"| {r['seconds'] // 60} | {r['rss_kib']:,} | {r['fds']} | {r['threads']} | {r['challenges']} |")
print("verdict:", "flat" if rss_ok and fds_ok and thr_ok else
      f"GROWING (rss ok={rss_ok}, fds ok={fds_ok}, threads ok={thr_ok})")
sys.exit(0 if rss_ok and fds_ok and thr_ok else 1)
PY
say "done: $OUT"
