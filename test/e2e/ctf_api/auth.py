"""auth.py - who may call what: 401 with WWW-Authenticate on every /api/v1
route for every kind of bad token, GET /api/v1/whoami, 403 on another team's
paths, and the token Secret watched (a new token works, a rotated one stops).
"""
import json

from .common import (ADMIN, ROTATE, TEAMS, call, challenges_in_cluster, check, expect, kubectl,
                     log, ok, team_path, wait_for)


def test_auth():
    log("authentication and authorization")
    ta = TEAMS["team-a"]
    routes = [("GET", "/api/v1/whoami"), ("GET", "/api/v1/challenges"),
              ("GET", team_path("team-a")), ("GET", team_path("team-a", "web")),
              ("PUT", team_path("team-a", "web")), ("DELETE", team_path("team-a", "web")),
              ("POST", team_path("team-a", "web", "renew")), ("GET", "/api/v1/teams/team-a/events"),
              ("GET", team_path("team-a", "no-such-challenge")), ("GET", team_path("Team_A")),
              ("PATCH", team_path("team-a", "web"))]
    bad = [None, "Basic " + ADMIN, "Bearer", "Bearer ", "Bearer not-a-token-" + ADMIN[:8],
           "Bearer " + "x" * 600, "Bearer " + ADMIN + "x", "Bearer " + ADMIN[:-1]]
    before = len(challenges_in_cluster())
    for method, path in routes:
        for auth in bad:
            r = call(method, path, auth=auth)
            expect(r, 401, "Unauthorized", f"{method} {path} with Authorization {auth and auth[:20]!r}")
            check(r.headers.get("www-authenticate", "").startswith("Bearer"),
                  f"{method} {path}: 401 without WWW-Authenticate: Bearer")
    check(len(challenges_in_cluster()) == before, "a 401 request created a Challenge")
    ok("401 Unauthorized with WWW-Authenticate: Bearer on every /api/v1 route (before 400, 404 and 405) for no header, "
       "another scheme, an empty, unknown, too long, extended or truncated token")

    r = expect(call("GET", "/api/v1/whoami", ta), 200, what="whoami team-a")
    check(r.body == {"team": "team-a", "admin": False}, f"whoami team-a: {r.body}")
    r = expect(call("GET", "/api/v1/whoami", ADMIN), 200, what="whoami admin")
    check(r.body == {"team": None, "admin": True}, f"whoami admin: {r.body}")
    ok("whoami: {team: team-a, admin: false} for a team token, {team: null, admin: true} for the admin")

    for method, path in [("GET", team_path("team-b")), ("GET", team_path("team-b", "web")),
                         ("PUT", team_path("team-b", "web")), ("DELETE", team_path("team-b", "web")),
                         ("POST", team_path("team-b", "web", "renew")),
                         ("GET", team_path("team-b", "no-such-challenge")),
                         ("PUT", team_path("team-b", "no-such-challenge")),
                         ("GET", "/api/v1/teams/team-b/events")]:
        expect(call(method, path, ta), 403, "Forbidden", f"{method} {path} with team-a's token")
    check(not challenges_in_cluster(team="team-b"), "a 403 PUT created a Challenge for team-b")
    ok("403 Forbidden for team-a's token on team-b's paths (before 404), nothing created")

    # The token Secret is watched: a new team's token starts working, a rotated one stops.
    t1, t2 = ROTATE
    kubectl("-n", "kopc-system", "patch", "secret", "ctf-team-tokens", "--type", "merge",
            "-p", json.dumps({"stringData": {"team-r": t1}}))
    wait_for(30, "a new team token to work",
             lambda: call("GET", "/api/v1/whoami", t1).status == 200)
    check(call("GET", "/api/v1/whoami", t1).body == {"team": "team-r", "admin": False}, "whoami team-r")
    kubectl("-n", "kopc-system", "patch", "secret", "ctf-team-tokens", "--type", "merge",
            "-p", json.dumps({"stringData": {"team-r": t2}}))
    wait_for(30, "the rotated token to work", lambda: call("GET", "/api/v1/whoami", t2).status == 200)
    wait_for(30, "the old token to stop working", lambda: call("GET", "/api/v1/whoami", t1).status == 401)
    expect(call("GET", "/api/v1/whoami", ta), 200, what="team-a after another team's rotation")
    ok("the token Secret is watched: a new team token works, a rotated one stops working, without a restart")
