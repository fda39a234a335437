"""admin.py - the organizer's console on the API: the admin routes
(/api/v1/admin/...: every instance, its event stream, bulk stops, an admin's
stop and extend, each an Event naming the action), flag attribution (a wrong
flag that is another team's dynamic flag names that team, counts in
ctf_flag_shared_total and writes an Event; a random flag or a static flag
never does) and stop on solve (spec.stopOnSolve: a correct flag stops the
team's instance and frees its quota slot). A team token gets 403 on every
admin route, and nothing a team's token reads names another team. Last, the
budgets docs/api.md says the bulk stops spend: a team's bulk stop one of the
team's writes, a challenge's bulk stop one of the admin's own (429 once spent).

The definitions are ctf_api_test.sh's: "web" (static flag), "dyn" (dynamic
flag, key in the Secret flag-key, $FLAG_KEY), "solve" (dynamic, prefix
"CTF{", stopOnSolve), "short" (lifetime 2m, max 5m). Teams share-* are used
here alone, so every count below is exact.
"""
import hashlib
import hmac
import json
import os
import re
import secrets
import time
import urllib.request

from .common import (ADMIN, METRICS, NS, SEEN, TEAMS, Stream, call, challenges_in_cluster, check,
                     expect, first_snapshot, get_instance, kubectl, log, ok, running, secs,
                     team_path, wait_for)

KEY = os.environ["FLAG_KEY"].encode()


def flag_of(challenge, team, prefix="flag{"):
    """A team's dynamic flag as the operator derives it (docs/ctf-resources.md)."""
    return prefix + hmac.new(KEY, f"{challenge}:{team}".encode(), hashlib.sha256).hexdigest()[:32] + "}"


def check_flag(team, challenge, flag):
    return expect(call("POST", team_path(team, challenge, "flag"), ADMIN, {"flag": flag}), 200,
                  what=f"flag check of {team}/{challenge}").body


def shared_metric(challenge):
    with urllib.request.urlopen(METRICS + "/metrics", timeout=30) as r:
        page = r.read().decode()
    m = re.search(r'^ctf_flag_shared_total\{challenge="' + re.escape(challenge) + r'"\} (\S+)$', page, re.M)
    return float(m.group(1)) if m else 0.0


def events(reason):
    """The Events of the challenge namespace with this reason: (object name, message) pairs."""
    items = json.loads(kubectl("-n", NS, "get", "events", "--field-selector", f"reason={reason}",
                               "-o", "json").stdout)["items"]
    return [(e["involvedObject"]["name"], e["message"]) for e in items]


def put(team, challenge, status=201):
    expect(call("PUT", team_path(team, challenge), ADMIN), status, what=f"PUT {team}/{challenge}")
    # The flag check and the bulk stops read the cache: wait until it holds the instance.
    wait_for(30, f"{team}/{challenge} in the cache", lambda: get_instance(team, challenge))


def live(team=None, definition=None):
    """The Challenges in the cluster not being deleted."""
    return [c for c in challenges_in_cluster(team=team, definition=definition)
            if not c["metadata"].get("deletionTimestamp")]


def admin_stream():
    got = []

    def attempt():
        s = Stream("(admin)", ADMIN, path="/api/v1/admin/events")
        if s.status == 200:
            got.append(s)
            return True
        check(s.status == 429, f"admin events: {s.status} {s.body}")
        return False
    wait_for(30, "the admin stream", attempt)
    return got[0]


def admin_snapshot(s):
    while True:
        item = s.next(30, "the admin snapshot")
        check(item[0] != "eof", "the admin stream ended before its snapshot")
        if item[0] == "event":
            break
    _, name, data = item
    check(name == "snapshot", f"the admin stream's first event is {name}")
    return json.loads(data)


def wait_admin_event(s, team, challenge, state=None, timeout=120):
    """Reads the admin stream until an instance event of team/challenge (in state, if given)."""
    while True:
        name, ev = s.next_event(timeout, f"{team}/{challenge} {state or ''} on the admin stream")
        if name == "instance" and ev["team"] == team and ev["challenge"] == challenge \
                and (state is None or ev["state"] == state):
            return ev


def test_participant_refused():
    log("the admin routes refuse team tokens; a team's answers name no other team")
    ta = TEAMS["team-a"]
    put("share-b", "dyn")
    before = len(challenges_in_cluster())
    routes = [("GET", "/api/v1/admin/instances"), ("GET", "/api/v1/admin/events"),
              ("GET", "/api/v1/admin/summary"),
              ("DELETE", "/api/v1/admin/teams/share-b/instances"),
              ("DELETE", "/api/v1/admin/teams/team-a/instances"),
              ("DELETE", "/api/v1/admin/challenges/dyn/instances"),
              ("DELETE", "/api/v1/admin/teams/team-a/instances/web"),
              ("DELETE", "/api/v1/admin/teams/share-b/instances/dyn"),
              ("POST", "/api/v1/admin/teams/team-a/instances/web/renew"),
              ("POST", "/api/v1/admin/teams/share-b/instances/dyn/renew")]
    for method, path in routes:
        expect(call(method, path, ta), 403, "Forbidden", f"{method} {path} with team-a's token")
        expect(call(method, path), 401, "Unauthorized", f"{method} {path} without a token")
    s = Stream("team-a", ta, path="/api/v1/admin/events")
    check(s.status == 403, f"the admin stream with team-a's token: {s.status}")
    check(len(challenges_in_cluster()) == before, "a refused admin request changed the Challenges")
    check(live(team="share-b", definition="dyn"), "a refused bulk stop stopped share-b's instance")
    expect(call("POST", team_path("team-a", "dyn", "flag"), ta, {"flag": flag_of("dyn", "share-b")}), 403,
           "Forbidden", "team-a's own token asking the flag check")
    ok("403 Forbidden for a team token (its own team's paths too) and 401 without one on every admin route "
       "and the admin stream; nothing stopped")

    mark = len(SEEN)
    call("GET", "/api/v1/whoami", ta)
    call("GET", team_path("team-a"), ta)
    call("GET", "/api/v1/challenges", ta)
    st = Stream("team-a", ta)
    check(st.status == 200, f"team-a's stream: {st.status}")
    first_snapshot(st)
    st.close()
    blob = b"\n".join(SEEN[mark:])
    for other in ("share-b", "team-b", "team-c"):
        check(other.encode() not in blob, f"a team-a answer names {other}")
    ok("whoami, the team's list, the challenges and the team's stream snapshot name no other team")


def test_flag_attribution():
    log("flag attribution: another team's dynamic flag names it, to the admin only")
    put("share-c", "dyn")
    put("share-b", "web")
    before = shared_metric("dyn")
    r = check_flag("share-a", "dyn", flag_of("dyn", "share-b"))
    check(r == {"correct": False, "sharedFrom": "share-b"}, f"share-b's flag submitted by share-a: {r}")
    r = check_flag("share-c", "dyn", flag_of("dyn", "share-b"))
    check(r == {"correct": False, "sharedFrom": "share-b"}, f"share-b's flag submitted by share-c: {r}")
    r = check_flag("share-a", "dyn", flag_of("dyn", "share-c"))
    check(r == {"correct": False, "sharedFrom": "share-c"}, f"share-c's flag submitted by share-a: {r}")
    wait_for(30, "ctf_flag_shared_total{challenge=dyn} to count 3", lambda: shared_metric("dyn") == before + 3)
    wait_for(30, "the FlagShared Events", lambda: any(
        n == "dyn" and "share-a" in m and "share-b" in m for n, m in events("FlagShared")))
    ev = [(n, m) for n, m in events("FlagShared")]
    check(all(n == "dyn" for n, _ in ev), f"a FlagShared Event not on the definition: {ev}")
    check(any("share-c" in m and "share-b" in m for _, m in ev), f"no Event for share-c submitting share-b's: {ev}")
    for _, m in ev:
        check(KEY.decode() not in m and "flag{" not in m, f"an Event carries a flag or the key: {m}")
    ok("share-a submits share-b's flag: {correct: false, sharedFrom: share-b}; counted in "
       "ctf_flag_shared_total{challenge=\"dyn\"}; a Warning Event FlagShared on the definition names both teams")

    for wrong in ("flag{" + secrets.token_hex(16) + "}", flag_of("dyn", "share-b")[:-1],
                  flag_of("dyn", "share-b").upper(), flag_of("dyn", "share-z"),
                  flag_of("web", "share-b"), flag_of("dyn", "share-b", prefix="CTF{")):
        r = check_flag("share-a", "dyn", wrong)
        check(r == {"correct": False}, f"a wrong flag {wrong[:12]}... was attributed: {r}")
    r = check_flag("share-b", "dyn", flag_of("dyn", "share-b"))
    check(r == {"correct": True}, f"share-b's own flag: {r}")
    check(live(team="share-b", definition="dyn"), "a correct flag stopped an instance without stopOnSolve")
    check(shared_metric("dyn") == before + 3, "a wrong flag that is nobody's was counted")
    ok("a random flag, one cut or upper-cased, the flag of a team without an instance (share-z), of another "
       "challenge or with another prefix: {correct: false}, no sharedFrom, not counted; without stopOnSolve "
       "a correct flag stops nothing")

    # A static flag is the same for every team: never attributed, whatever is submitted.
    for wrong in (flag_of("web", "share-b"), "flag{" + secrets.token_hex(16) + "}"):
        r = check_flag("share-a", "web", wrong)
        check(r == {"correct": False}, f"a wrong flag of the static challenge was attributed: {r}")
    check(shared_metric("web") == 0, "ctf_flag_shared_total counted the static-flag challenge")
    check(not [m for n, m in events("FlagShared") if n == "web"], "a FlagShared Event for the static flag")
    ok("static flag (web, share-b holds an instance): never attributed, not counted, no Event")


def test_admin_stream_and_bulk_stops():
    log("the admin stream, bulk stops, the admin's stop and extend")
    s = admin_stream()
    snap = admin_snapshot(s)
    have = {(i["team"], i["challenge"]) for i in snap["instances"]}
    check({("share-b", "dyn"), ("share-b", "web"), ("share-c", "dyn")} <= have,
          f"the admin snapshot misses share-b's or share-c's instances: {sorted(have)}")
    check(snap["instances"] == sorted(snap["instances"], key=lambda i: (i["team"], i["challenge"])),
          "the admin snapshot is not sorted by team, challenge")
    got = {}

    def same_as_cluster():
        got["r"] = expect(call("GET", "/api/v1/admin/instances", ADMIN), 200, what="GET /api/v1/admin/instances")
        listed = [(i["team"], i["challenge"]) for i in got["r"].body["instances"]]
        return len(listed) == len(set(listed)) and set(listed) == {
            (c["spec"]["team"], c["spec"]["definition"]) for c in challenges_in_cluster()}
    wait_for(60, "GET /api/v1/admin/instances to list every Challenge of the cluster once", same_as_cluster)
    r = got["r"]
    check({("share-b", "dyn"), ("share-b", "web"), ("share-c", "dyn")} <= {
        (i["team"], i["challenge"]) for i in r.body["instances"]}, "GET /api/v1/admin/instances misses share-*")
    check(r.body["limits"] == {"maxInstances": 1000, "maxInstancesPerTeam": 3}, f"limits: {r.body['limits']}")
    ok("the admin stream's snapshot and GET /api/v1/admin/instances list every team's instances, sorted, with the limits")

    put("share-c", "web")
    wait_admin_event(s, "share-c", "web", None, 60)
    ok("a new instance of another team comes on the admin stream")

    put("share-d", "dyn")
    r = expect(call("DELETE", "/api/v1/admin/teams/share-b/instances", ADMIN), 202, what="stop all of share-b's")
    check(r.body["stopped"] == 2 and r.body["failed"] == 0, f"stop all of share-b's: {r.body}")
    check(sorted(i["challenge"] for i in r.body["instances"]) == ["dyn", "web"]
          and all(i["team"] == "share-b" and i["state"] == "Stopping" for i in r.body["instances"]),
          f"stop all of share-b's answered {r.body}")
    wait_admin_event(s, "share-b", "dyn", "Stopped")
    check(not live(team="share-b"), "share-b still has an instance not being deleted")
    check(len(live(team="share-c")) == 2 and live(team="share-d"), "the bulk stop of share-b stopped another team's")
    wait_for(30, "the AdminStop Events of share-b's", lambda: len(
        [m for _, m in events("AdminStop") if "stop all of team share-b's" in m]) == 2)
    ok("DELETE /api/v1/admin/teams/share-b/instances: 202, exactly share-b's two stopped (Stopped on the admin "
       "stream), share-c's and share-d's untouched, an Event AdminStop per instance naming the bulk action")

    r = expect(call("DELETE", "/api/v1/admin/challenges/dyn/instances", ADMIN), 202, what="stop all of dyn")
    check(r.body["stopped"] == 2 and r.body["failed"] == 0, f"stop all of dyn: {r.body}")
    check(sorted(i["team"] for i in r.body["instances"]) == ["share-c", "share-d"]
          and all(i["challenge"] == "dyn" for i in r.body["instances"]), f"stop all of dyn answered {r.body}")
    check(not live(definition="dyn"), "an instance of dyn is not being deleted")
    check(live(team="share-c", definition="web"), "the bulk stop of dyn stopped share-c's web")
    wait_for(30, "the AdminStop Events of dyn's", lambda: len(
        [m for _, m in events("AdminStop") if "stop all of challenge dyn's" in m]) == 2)
    r = expect(call("DELETE", "/api/v1/admin/challenges/nope/instances", ADMIN), 202, what="stop all of nope")
    check(r.body == {"stopped": 0, "failed": 0, "instances": []}, f"stop all of a challenge without instances: {r.body}")
    ok("DELETE /api/v1/admin/challenges/dyn/instances: 202, exactly dyn's two (share-c, share-d) stopped, "
       "share-c's web untouched, an Event AdminStop each; none to stop: 202 with 0")

    put("share-e", "short")
    was = get_instance("share-e", "short")
    r = expect(call("POST", "/api/v1/admin/teams/share-e/instances/short/renew", ADMIN), 200, what="admin extend")
    check(secs(was["expiresAt"], r.body["expiresAt"]) == 120, f"admin extend moved {was['expiresAt']} to {r.body['expiresAt']}")
    wait_for(30, "the AdminExtend Event", lambda: any("share-e" in m and "extend instance" in m
                                                      for _, m in events("AdminExtend")))
    r = expect(call("DELETE", "/api/v1/admin/teams/share-e/instances/short", ADMIN), 202, what="admin stop")
    check(r.body["state"] == "Stopping", f"admin stop: {r.body}")
    wait_for(30, "the AdminStop Event of share-e", lambda: any("share-e" in m and "(stop instance)" in m
                                                               for _, m in events("AdminStop")))
    expect(call("DELETE", "/api/v1/admin/teams/share-e/instances/web", ADMIN), 404, "NotFound",
           "admin stop of an instance share-e does not have")
    wait_admin_event(s, "share-e", "short", "Stopped")
    s.close()
    ok("admin extend (+renewBy) and admin stop of one instance: Events AdminExtend and AdminStop, 404 when none")


def test_stop_on_solve():
    log("stop on solve: a correct flag stops the instance and frees its quota slot")
    for ch in ("solve", "web", "tcp"):
        put("share-f", ch)
    for ch in ("solve", "web", "tcp"):  # admitted (the quota counts what the cache shows admitted)
        wait_for(120, f"share-f/{ch} Running", lambda ch=ch: running("share-f", ch))
    expect(call("PUT", team_path("share-f", "plain"), ADMIN), 409, "QuotaExceeded", "a 4th instance of share-f")
    r = check_flag("share-f", "solve", flag_of("solve", "share-g", prefix="CTF{"))
    check(r == {"correct": False}, f"another team's flag of solve (no instance): {r}")
    check(live(team="share-f", definition="solve"), "a wrong flag stopped the instance")
    r = check_flag("share-f", "solve", flag_of("solve", "share-f", prefix="CTF{"))
    check(r == {"correct": True, "stopped": True}, f"share-f's flag of solve: {r}")
    wait_for(120, "share-f's solve instance to be gone",
             lambda: not challenges_in_cluster(team="share-f", definition="solve"))
    check(len(live(team="share-f")) == 2, "stop on solve stopped another of share-f's instances")
    wait_for(30, "the StoppedOnSolve Event", lambda: any("share-f" in m for _, m in events("StoppedOnSolve")))
    put("share-f", "plain")
    r = check_flag("share-f", "solve", flag_of("solve", "share-f", prefix="CTF{"))
    check(r == {"correct": True}, f"share-f's flag of solve once more, no instance left: {r}")
    ok("stopOnSolve: a wrong flag stops nothing; the correct one answers {correct: true, stopped: true}, the "
       "instance goes (Event StoppedOnSolve) and the team's freed quota slot takes another instance")


def page_state(c):
    """A Challenge's page state, as the API derives it (views.c)."""
    phase = (c.get("status") or {}).get("currentStatus")
    if c["metadata"].get("deletionTimestamp") or phase in ("Terminating", "Deleted"):
        return "stopping"
    return {"Error": "failed", "Running": "running"}.get(phase, "starting")


def summary_truth():
    """The summary's per-definition counts and totals, from the cluster's Challenges."""
    per, totals = {}, {"running": 0, "starting": 0, "failed": 0, "stopping": 0}
    for c in challenges_in_cluster():
        s = page_state(c)
        row = per.setdefault(c["spec"]["definition"], {"running": 0, "starting": 0, "failed": 0, "stopping": 0})
        row[s] += 1
        totals[s] += 1
    return per, totals


def test_summary_and_last_events():
    log("the console's summary and each instance's last Events (admin only)")
    got = {}

    def same_as_cluster():
        r = expect(call("GET", "/api/v1/admin/summary", ADMIN), 200, what="GET /api/v1/admin/summary")
        per, totals = summary_truth()
        rows = {d["name"]: {k: d[k] for k in ("running", "starting", "failed", "stopping")}
                for d in r.body["definitions"]}
        got["r"], got["truth"] = r.body, (per, totals)
        return all(rows.get(d) == counts for d, counts in per.items()) and all(
            sum(v.values()) == 0 for d, v in rows.items() if d not in per) and all(
            r.body["totals"][k] == v for k, v in totals.items())
    wait_for(60, "the summary's counts to be the cluster's", same_as_cluster)
    body = got["r"]
    names = [d["name"] for d in body["definitions"]]
    check(names == sorted(names) and {"web", "dyn", "solve", "short"} <= set(names),
          f"the summary's definitions: {names}")
    check(body["totals"]["maxInstances"] == 1000 and body["quota"]["maxInstancesPerTeam"] == 3,
          f"the summary's limits: {body['totals']} {body['quota']}")
    check(body["totals"]["room"] == 1000 - body["totals"]["instances"] - body["totals"]["warm"],
          f"room is not --max-instances less what is counted: {body['totals']}")
    ok(f"GET /api/v1/admin/summary counts every definition's Challenges by state as the cluster holds them "
       f"({got['truth'][1]}), sorted, with --max-instances and the room left")

    # share-f holds three instances (web, tcp, plain) after test_stop_on_solve: at its quota.
    def quota_listed():
        q = expect(call("GET", "/api/v1/admin/summary", ADMIN), 200, what="summary").body["quota"]
        got["q"] = q
        return "share-f" in q["teams"]
    wait_for(60, "share-f among the teams at their quota", quota_listed)
    q = got["q"]
    check(q["teamsAtQuota"] == len(q["teams"]) and q["teams"] == sorted(q["teams"]), f"quota: {q}")
    for team in q["teams"]:
        check(len(live(team=team)) >= 3 or len(challenges_in_cluster(team=team)) >= 3,
              f"{team} is listed at its quota with fewer than 3 Challenges")
    ok(f"the teams at their quota (3) are listed, share-f among them: {q['teams']}")

    web = [c for c in live(team="share-f", definition="web")][0]
    uid = web["metadata"]["uid"]

    def listed_events():
        r = expect(call("GET", "/api/v1/admin/instances", ADMIN), 200, what="GET /api/v1/admin/instances")
        mine = [i for i in r.body["instances"] if i["team"] == "share-f" and i["challenge"] == "web"]
        got["ev"] = mine[0].get("events") if mine else None
        return got["ev"] and any(e["reason"] == "Running" for e in got["ev"])
    wait_for(60, "share-f/web's last Events in the admin list", listed_events)
    items = json.loads(kubectl("-n", NS, "get", "events", "--field-selector",
                               f"involvedObject.uid={uid}", "-o", "json").stdout)["items"]
    truth = {(e["reason"], e["message"]) for e in items}
    for e in got["ev"]:
        check((e["reason"], e["message"]) in truth, f"an Event the cluster does not hold for share-f/web: {e}")
    check(len(got["ev"]) <= 3, f"more than 3 Events: {got['ev']}")
    mine = get_instance("share-f", "web", TEAMS.get("share-f", ADMIN))
    check(mine is not None and "events" not in mine, f"a team's own view carries Events: {mine}")
    s = admin_stream()
    admin_snapshot(s)
    name, ev = s.next_event(30, "the admin stream's summary")
    check(name == "summary" and ev["definitions"], f"after the snapshot the admin stream sent {name}")
    s.close()
    ok("the admin list carries each instance's last Events (share-f/web's Running among them, each one the "
       "cluster holds, at most 3), a team's own view none; the admin stream sends the summary after its snapshot")


def test_bulk_stop_budgets():
    """docs/api.md: a team's bulk stop spends one of the team's writes, a
    challenge's bulk stop one of the admin's own budget (the same burst and
    rate: ctf_api_test.sh runs --api-team-burst 20 --api-team-rate 1). Run
    last: it leaves share-h's budget and the admin's own spent."""
    log("a bulk stop spends the budget docs/api.md names: the team's for a team's, the admin's own for a challenge's")
    burst = 20
    # share-h has written nothing yet: its whole burst. Two PUTs spend two of it,
    # then its bulk stops spend one each (the first stops two instances) until 429.
    start = time.monotonic()
    put("share-h", "web")
    put("share-h", "tcp")
    stops, r = 0, None
    for _ in range(burst + 2):
        r = call("DELETE", "/api/v1/admin/teams/share-h/instances", ADMIN)
        if r.status != 202:
            break
        if stops == 0:
            check(r.body["stopped"] == 2, f"the first bulk stop of share-h's: {r.body}")
        stops += 1
    took = time.monotonic() - start
    expect(r, 429, "TooManyRequests", f"share-h's bulk stop after {stops} (a team's bulk stop spends its writes)")
    check(int(r.headers["retry-after"]) >= 1, f"Retry-After {r.headers['retry-after']}")
    back = int(took // 60)  # one write a minute comes back
    check(burst - 2 <= stops <= burst - 2 + back,
          f"share-h's bulk stops answered 202 {stops} times after its 2 PUTs in {took:.0f}s: "
          f"want {burst - 2} (one team write each, whatever they stop)")
    expect(call("PUT", team_path("share-h", "web"), ADMIN), 429, "TooManyRequests",
           "share-h's PUT after its bulk stops spent its writes")
    check(not live(team="share-h"), "share-h holds an instance after its bulk stops")
    ok(f"a team's bulk stop spends one of the team's writes: after 2 PUTs, {stops} bulk stops of share-h's "
       f"(the first stopping two), then 429 for its bulk stop and its PUT alike ({took:.0f}s)")

    # The admin's own budget: the two challenge bulk stops of test_admin_stream_and_bulk_stops
    # spent two of it, and none of the teams' writes above touched it.
    start = time.monotonic()
    stops, r = 0, None
    for _ in range(burst + 2):
        r = call("DELETE", "/api/v1/admin/challenges/nope/instances", ADMIN)
        if r.status != 202:
            break
        stops += 1
    took = time.monotonic() - start
    expect(r, 429, "TooManyRequests", f"a challenge's bulk stop after {stops} (it spends the admin's own budget)")
    check(int(r.headers["retry-after"]) >= 1, f"Retry-After {r.headers['retry-after']}")
    check(burst - 2 <= stops <= burst + int(took // 60),
          f"challenge bulk stops answered 202 {stops} times: want {burst - 2} to {burst} "
          "(the admin's own burst less the 2 spent before, some of which came back)")
    web = {c["metadata"]["uid"] for c in live(definition="web")}
    check(web, "no instance of web is left to test a refused bulk stop on")
    expect(call("DELETE", "/api/v1/admin/challenges/web/instances", ADMIN), 429, "TooManyRequests",
           "stop all of web's with the admin's budget spent")
    check({c["metadata"]["uid"] for c in live(definition="web")} == web, "a refused bulk stop of web's stopped some")
    expect(call("PUT", team_path("share-i", "web"), ADMIN), 201,
           what="a team's write with the admin token (the team's budget, not the admin's own)")
    ok(f"a challenge's bulk stop spends the admin's own budget: {stops} more, then 429 with Retry-After and "
       f"nothing stopped ({len(web)} web instances stand); a team's write with the admin token still goes")
