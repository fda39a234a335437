#!/usr/bin/env bash
# demo_check.sh - a newcomer's walk through the demo of `make run`, checked:
# against the running demo (build/run), headless Chromium signs in to the
# page at http://127.0.0.1:8080 with TEAM's token (build/run/tokens.txt),
# presses "Create server" on "Echo Chamber" (nc) and on "Robots Know" (web)
# and reads what the cards offer (test/e2e/page/demo_page.mjs); then, from
# this host, exactly as copied:
#   - the ncat and openssl lines must print "Your flag: F" with F the team's
#     own flag (the sample key's HMAC of "nc:TEAM", computed here from the
#     Secret ctf/ctf-flag-key), and with the gateway also with the
#     certificate checked against the demo's CA;
#   - the web card's link: its robots.txt names a path whose page holds
#     flag{...} (curl, the CA trusted in the gateway mode).
#   - with the gateway, the pwntools line, run with pwntools (pinned, in the
#     venv tools/pwntools-venv.sh makes) as copied and with the certificate
#     checked against the demo's CA (test/e2e/pwntools_line.py).
# Stops the team's two instances at the end. Not part of ctest: it needs the
# demo's fixed ports and state; run it after make run (docs/getting-started.md).
#
# Env: TEAM (default team-b), CHROMIUM, NODE.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN=build/run
DIR=$RUN/devcluster
TEAM=${TEAM:-team-b}
NODE=${NODE:-node}
K="build/bin/kubectl --kubeconfig $DIR/kubeconfig"
CA=$DIR/gateway/ca.crt
pass=0

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { pass=$((pass + 1)); echo "ok $pass - $*"; }

[ -f "$RUN/tokens.txt" ] || fail "no $RUN/tokens.txt: run make run first"
token=$(awk -v t="$TEAM" '$1 == t { print $2 }' "$RUN/tokens.txt")
admin=$(awk '$1 == "admin" { print $2 }' "$RUN/tokens.txt")
[ -n "$token" ] || fail "no token of $TEAM in $RUN/tokens.txt"
[ -d test/e2e/page/node_modules/playwright-core ] || fail "no test/e2e/page/node_modules (make page-deps)"

key=$($K -n ctf get secret ctf-flag-key -o jsonpath='{.data.key}')
want=$(python3 -c 'import base64,hashlib,hmac,sys
print("flag{" + hmac.new(base64.b64decode(sys.argv[1]), sys.argv[2].encode(), hashlib.sha256).hexdigest()[:32] + "}")' \
    "$key" "nc:$TEAM")

# page CHALLENGE: what the card of CHALLENGE offers once Running (JSON).
page() { PAGE_TOKEN=$token PAGE_CHALLENGE=$1 "$NODE" test/e2e/page/demo_page.mjs; }
# field JSON EXPR: a Python expression of j, the JSON.
field() { python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2"; }
# run_line CMD: the command as a participant runs it, its output (it is given
# 3 s to greet, then its input ends).
run_line() { (sleep 3) | timeout 15 bash -c "$1" 2>&1 || true; }

nc_card=$(page nc) || fail "the page did not show Echo Chamber Running"
echo "  the card of nc offers: $nc_card"
ncat_line=$(field "$nc_card" '[c for c in j["copy"] if c.startswith("ncat ") or c.startswith("nc ")][0]')
out=$(run_line "$ncat_line")
grep -qF "Your flag: $want" <<<"$out" || fail "\`$ncat_line\` printed: $out (want $want)"
ok "the page's \`$ncat_line\`, run here, greets $TEAM with its flag $want"

if [[ $ncat_line == ncat* ]]; then
    openssl_line=$(field "$nc_card" '[c for c in j["copy"] if c.startswith("openssl ")][0]')
    out=$(run_line "$openssl_line")
    grep -qF "Your flag: $want" <<<"$out" || fail "\`$openssl_line\` printed: $out"
    ok "the page's \`$openssl_line\`, run here, gives the same flag"
    out=$(run_line "${ncat_line/ncat --ssl/ncat --ssl --ssl-verify --ssl-trustfile $CA}")
    grep -qF "Your flag: $want" <<<"$out" || fail "ncat with --ssl-verify --ssl-trustfile $CA printed: $out"
    ok "and with the certificate checked against the demo's CA ($CA)"
    out=$(run_line "${openssl_line/s_client/s_client -CAfile $CA -verify_return_error}")
    grep -qF "Your flag: $want" <<<"$out" || fail "openssl with -CAfile $CA -verify_return_error printed: $out"
    ok "openssl -CAfile $CA -verify_return_error too"
    pwn_line=$(field "$nc_card" '[c for c in j["copy"] if c.startswith("remote(")][0]')
    pwn_python=$(tools/pwntools-venv.sh)/bin/python || fail "tools/pwntools-venv.sh: no pwntools"
    out=$("$pwn_python" test/e2e/pwntools_line.py "$pwn_line" --ca "$CA" 2>&1) || fail "pwntools ran $pwn_line: $out"
    [ "$(grep -cF "Your flag: $want" <<<"$out")" = 2 ] || fail "pwntools ran $pwn_line: $out"
    ok "the page's \`$pwn_line\`, run with pwntools, gives the same flag, and with ssl_context=ssl.create_default_context(cafile=$CA)"
fi

web_card=$(page web) || fail "the page did not show Robots Know Running"
echo "  the card of web offers: $web_card"
link=$(field "$web_card" 'j["links"][0]')
curl_ca=()
[[ $link != https://* ]] || curl_ca=(--cacert "$CA")
# Running promises an answer; a refused first connection is retried (and said).
path=
for i in $(seq 1 30); do
    path=$(curl -fsS "${curl_ca[@]}" "${link%/}/robots.txt" | awk '/^Disallow:/ { print $2 }') && [ -n "$path" ] && break
    echo "  try $i: no answer from $link/robots.txt yet" >&2
    sleep 1
done
[ -n "$path" ] || fail "$link/robots.txt names no path"
flag=$(curl -fsS "${curl_ca[@]}" "${link%/}$path" | grep -o 'flag{[^}]*}' | head -1)
[ -n "$flag" ] || fail "$link$path holds no flag"
ok "curl ${curl_ca[*]} $link: robots.txt names $path, which holds $flag"

for c in nc web; do
    curl -fsS -o /dev/null -X DELETE -H "Authorization: Bearer $admin" \
        "http://127.0.0.1:8080/api/v1/teams/$TEAM/instances/$c" || true
done
echo "PASS: $pass checks (the instances of $TEAM are being stopped)"
