#!/usr/bin/env bash
# ctf_hostile_cr_test.sh - custom resources the schema accepts but that try
# to hurt (what the schema refuses is ctf_schema_test.sh's): the operator
# must report them in status, or defuse them, and never crash.
#   - definitions whose pod template asks for the host's network, PID and
#     IPC namespaces; a privileged, escalating container with SYS_ADMIN;
#     root; a hostPath of /; the default service account's token: no
#     Deployment or pod of them ever carries any of that (the operator
#     refuses the definition, or strips and overrides, and the namespace's
#     restricted Pod Security level refuses the rest), and each Challenge
#     ends Running or Error with a reason;
#   - a pod template with containerPort 70000 (the operator or, failing
#     that, the apiserver refuses it): Error InvalidDefinition saying why;
#   - a definition of 200 KB (a huge env value, a 10000-character
#     description in multi-byte UTF-8): Running;
#   - spec.expiresAt in 1970: deleted at once; in 9999: clamped to max;
#   - a team name of 63 characters: Running, its namespace a valid name;
#     a definition name of 253 characters that does not exist: Error
#     DefinitionNotFound;
#   - afterwards the operator is alive, healthy, and met no Forbidden.
#
# Env: DEVCLUSTER, KUBECTL, OPERATOR (binaries), SRC (repo root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=fault_lib.sh
source "$(dirname "$0")/fault_lib.sh"
fault_init ctf-hostile

field() { kc get chal "$1" -o jsonpath="{$2}" 2>/dev/null; }
status_is() { [ "$(field "$1" .status.currentStatus)" = "$2" ]; }
settled() { # Running, or Error with a reason
    local s
    s=$(field "$1" .status.currentStatus)
    [ "$s" = Running ] || { [ "$s" = Error ] && [ -n "$(field "$1" .status.reason)" ]; }
}
gone() { ! kc get chal "$1" >/dev/null 2>&1; }
challenge() {
    printf 'apiVersion: ctf.kopc.io/v1alpha1\nkind: Challenge\nmetadata: {name: %s, namespace: ctf}\nspec: {definition: %s, team: %s%s}\n' \
        "$1" "$2" "$3" "${4:+, expiresAt: \"$4\"}" | k apply -f - >/dev/null
}
# definition NAME PYTHON: a copy of the web sample, its spec (d) edited.
definition() {
    kc get chaldef web -o json | python3 -c "
import json, sys
o = json.load(sys.stdin)
o['metadata'] = {'name': '$1', 'namespace': 'ctf'}
o.pop('status', None)
d = o['spec']
$2
print(json.dumps(o))" | k apply -f - >/dev/null || fail "definition $1 refused by the schema"
}

log "cluster, the operator"
cluster_up
start_op hostile

log "pod templates that ask for the host"
variants=(
    "hostns|t.update(hostNetwork=True, hostPID=True, hostIPC=True)"
    "privileged|c['securityContext'] = {'privileged': True, 'allowPrivilegeEscalation': True, 'capabilities': {'add': ['SYS_ADMIN', 'NET_ADMIN']}}"
    "root|t['securityContext'] = {'runAsUser': 0, 'runAsNonRoot': False}; c['securityContext'] = {'runAsUser': 0}"
    "hostpath|t['volumes'] = [{'name': 'root', 'hostPath': {'path': '/'}}]; c['volumeMounts'] = [{'name': 'root', 'mountPath': '/host'}]"
    "token|t.update(serviceAccountName='default', automountServiceAccountToken=True)"
)
for v in "${variants[@]}"; do
    name=${v%%|*}
    definition "esc-$name" "
d['startTimeout'] = '20s'
t = d['pods'][0]['template']
c = t['containers'][0]
${v#*|}"
    challenge "esc-$name" "esc-$name" "team-$name"
done
for v in "${variants[@]}"; do
    name=${v%%|*}
    wait_for 120 "esc-$name settled" settled "esc-$name"
    echo "    esc-$name: $(field "esc-$name" .status.currentStatus) $(field "esc-$name" .status.reason) $(field "esc-$name" .status.message | cut -c1-100)"
done
k get deployments,pods -A -l app.kubernetes.io/managed-by=kopc-ctf -o json | python3 -c "
import json, sys
bad, n = [], 0
for o in json.load(sys.stdin)['items']:
    n += 1
    spec = o['spec']['template']['spec'] if o['kind'] == 'Deployment' else o['spec']
    where = o['kind'] + ' ' + o['metadata']['namespace'] + '/' + o['metadata']['name']
    for f in ('hostNetwork', 'hostPID', 'hostIPC'):
        if spec.get(f):
            bad.append(f'{where}: {f}')
    if spec.get('automountServiceAccountToken') is not False:
        bad.append(f'{where}: service-account token')
    if spec.get('securityContext', {}).get('runAsNonRoot') is not True:
        bad.append(f'{where}: may run as root')
    for c in spec.get('containers', []) + spec.get('initContainers', []):
        sc = c.get('securityContext', {})
        if sc.get('privileged') or sc.get('allowPrivilegeEscalation') is not False:
            bad.append(f'{where}: {c[\"name\"]} privileged or escalating')
        if set(sc.get('capabilities', {}).get('add', [])) - {'NET_BIND_SERVICE'}:
            bad.append(f'{where}: {c[\"name\"]} adds capabilities')
        if o['kind'] == 'Pod' and (sc.get('runAsUser') == 0 or spec.get('securityContext', {}).get('runAsUser') == 0):
            bad.append(f'{where}: a pod runs as root')
    if o['kind'] == 'Pod' and any('hostPath' in v for v in spec.get('volumes', [])):
        bad.append(f'{where}: a pod mounts a hostPath')
print(f'    {n} Deployments and Pods checked', file=sys.stderr)
print('\n'.join(bad))
sys.exit(1 if bad else 0)" || fail "something dangerous got through (above)"
ok "host namespaces, privileges, root, hostPath and the token: refused or stripped; each Challenge reports its state"

log "an invalid pod template"
definition badport "d['pods'][0]['template']['containers'][0]['ports'].append({'containerPort': 70000, 'name': 'bad'})"
challenge badport-x badport team-x
wait_for 60 "badport-x Error" bash -c "[ \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' -n ctf get chal badport-x -o jsonpath='{.status.currentStatus}/{.status.reason}')\" = Error/InvalidDefinition ]"
msg=$(field badport-x .status.message)
echo "    badport-x: $msg" | cut -c1-160
[[ $msg == *Deployment* || $msg == *70000* ]] || fail "badport-x's message does not say what is wrong: $msg"
ok "an invalid pod template is reported as InvalidDefinition, saying what is wrong"

log "a definition of 200 KB in multi-byte UTF-8"
definition huge "
d['description'] = ('Ω≈ç√∫˜µ≤≥÷ 🏴 ' * 1000)[:10000]
d['title'] = '🚩' * 100
d['pods'][0]['template']['containers'][0]['env'] = [{'name': 'BIG', 'value': 'x' * 200000}]"
challenge huge-y huge team-y
wait_for 120 "huge-y Running" status_is huge-y Running
ok "a 200 KB definition runs"

log "expiry at the edges, names at their limits"
challenge past-z web team-z 1970-01-01T00:00:00Z
challenge future-z web team-future 9999-12-31T23:59:59Z
long_team=$(printf 't%.0s' $(seq 63))
long_def=$(python3 -c "print('.'.join(['d' * 63] * 4)[:253])")
challenge long-team web "$long_team"
challenge long-def "$long_def" team-w
wait_for 60 "past-z deleted" gone past-z
wait_for 90 "future-z Running" status_is future-z Running
created=$(field future-z .metadata.creationTimestamp)
want=$(python3 -c "import datetime as d; t=d.datetime.strptime('$created','%Y-%m-%dT%H:%M:%SZ'); print((t+d.timedelta(hours=2)).strftime('%Y-%m-%dT%H:%M:%SZ'))")
[ "$(field future-z .status.expiresAt)" = "$want" ] || fail "future-z expires at $(field future-z .status.expiresAt), want $want (creation + max)"
wait_for 90 "long-team Running" status_is long-team Running
[[ $(field long-team .status.namespace) =~ ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$ ]] || fail "long-team's namespace is not a DNS label"
wait_for 60 "long-def DefinitionNotFound" bash -c "[ \"\$('$KUBECTL' --kubeconfig '$DIR/kubeconfig' -n ctf get chal long-def -o jsonpath='{.status.reason}')\" = DefinitionNotFound ]"
ok "1970 expires at once, 9999 is clamped to max; 63-character team runs; 253-character definition reported"

log "the operator is unharmed"
op_alive hostile || fail "the operator died"
curl -sf "http://127.0.0.1:${OP_METRICS[hostile]}/healthz" >/dev/null || fail "unhealthy"
no_forbidden hostile
stop_op_clean hostile
ok "alive, healthy, no Forbidden, clean exit"

echo "$passed passed, 0 failed ($(elapsed) s)"
