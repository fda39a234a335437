#!/usr/bin/env python3
"""ctf_api_test.py - the CTF operator's instance API (docs/api.md) against a
running operator on a devcluster; ctf_api_test.sh sets it all up.

Every answer is checked against the operator's own OpenAPI document: the
status must be one the document lists for that route and method, the body
must match its schema, and the headers it marks required (Location,
Retry-After, Allow, WWW-Authenticate) must be there. On top of that each
scenario asserts what docs/api.md promises, and the cluster (through
kubectl) that a refused request changed nothing.

The scenarios are in test/e2e/ctf_api/, one module per route group, run here
in this order on the one cluster and operator the shell started (later parts
use what earlier ones left: tokens rotated, writes spent, every answer seen):
  common.py      the handles, check/ok, the OpenAPI checker, HTTP, kubectl, streams
  openapi.py     the document, 405 with Allow, the page's files (no token)
  auth.py        401, whoami, 403, the token Secret watched
  challenges.py  GET /api/v1/challenges
  instances.py   PUT, GET, DELETE of instances: refusals, a life, concurrency, quota
  renew.py       POST .../renew and PUT with expiresAt
  streams.py     the event streams per team and as tokens change
  flag_check.py  POST .../flag, the admin's flag check
  admin.py       the admin routes (stream, bulk stops, stop, extend, the
                 console's summary and last Events; 403 for
                 team tokens), flag attribution and stop on solve, and
                 last the budgets the bulk stops spend (the admin's own left spent)
and, below, what the whole run answered: no flag or token in it, and the
request metric counting every status it provoked.

Standard library only. Env: API (base URL), METRICS (base URL), ADMIN_TOKEN,
TEAM_TOKENS (JSON: team -> token), ROTATE_TOKENS (two spare tokens), FLAG,
FLAG_KEY (the dynamic flags' HMAC key),
KUBECTL, KUBECONFIG, SRC, PASSED (checks the shell passed before),
PASSED_FILE (where to write the total).
"""
import os
import sys
import urllib.request

from ctf_api import admin, auth, challenges, common, flag_check, instances, openapi, renew, streams
from ctf_api.common import (ADMIN, CODES_SEEN, FLAG, METRICS, ROTATE, SEEN, TEAMS, Fail, check, log,
                            ok)


def test_no_leaks():
    log("no flag and no token in any answer")
    blob = b"\n".join(SEEN)
    check(FLAG.encode() not in blob, "the flag appears in an API answer")
    for t in [ADMIN, *TEAMS.values(), *ROTATE]:
        check(t.encode() not in blob, "a token appears in an API answer")
    ok(f"the flag and every token are absent from all {len(SEEN)} bodies, headers and stream lines")


def test_metrics():
    log("metrics")
    with urllib.request.urlopen(METRICS + "/metrics", timeout=30) as r:
        page = r.read().decode()
    lines = [l for l in page.splitlines() if l.startswith("ctf_api_requests_total{")]
    check(lines, "no ctf_api_requests_total series")
    for code in sorted({200, 201, 202, 400, 401, 403, 404, 405, 409, 413, 429} & CODES_SEEN):
        check(any(f'="{code}"' in l for l in lines), f"ctf_api_requests_total has no series for code {code}")
    ok("ctf_api_requests_total counts every status the test provoked (200, 201, 202, 4xx)")


# The order matters: later scenarios count on what earlier ones did (rotated
# tokens, spent writes), and the last two look back at the whole run.
SCENARIOS = [
    openapi.test_openapi,
    auth.test_auth,
    challenges.test_challenges,
    instances.test_refusals,
    instances.test_lifecycle_and_events,
    instances.test_concurrent_put_and_rate_limit,
    instances.test_quota_and_delete,
    renew.test_renew,
    renew.test_put_expiry,
    instances.test_error_state,
    instances.test_made_with_kubectl,
    streams.test_stream_limit,
    streams.test_stream_authorization,
    streams.test_stream_revoked_while_opening,
    flag_check.test_flag_check,
    admin.test_participant_refused,
    admin.test_flag_attribution,
    admin.test_admin_stream_and_bulk_stops,
    admin.test_stop_on_solve,
    admin.test_summary_and_last_events,
    admin.test_bulk_stop_budgets,
    test_no_leaks,
    test_metrics,
]


def main():
    try:
        for scenario in SCENARIOS:
            scenario()
    except Fail as e:
        print(f"FAIL: {e}", file=sys.stderr, flush=True)
        return 1
    finally:
        pf = os.environ.get("PASSED_FILE")
        if pf:
            with open(pf, "w") as f:
                f.write(str(common.passed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
