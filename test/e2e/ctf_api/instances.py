"""instances.py - a team's instances: PUT, GET, DELETE on
/api/v1/teams/{team}/challenges/{challenge} and the team's list. Refusals
(400, 404, 413) that change nothing; one instance's life through the API and
its event stream; 20 concurrent PUTs making one instance and the write
burst (429); the quota (409 QuotaExceeded) and DELETE; an instance that
cannot start (Error); a Challenge made with kubectl.
"""
import json
import queue
import re
import subprocess
import threading
import time

from .common import (ADMIN, Fail, KUBECONFIG, KUBECTL, NS, Resp, TEAMS, call, challenge_object,
                     challenges_in_cluster, check, expect, first_snapshot, get_instance, kubectl,
                     log, namespace_exists, ok, open_stream, running, secs, team_path, ts,
                     wait_for, watch_states)


CTF_FINALIZER = "ctf.kopc.io/instance"


def watch_added(ns):
    """watch_added starts a watch of ns's Challenges from now (a list's
    resourceVersion) and returns a queue that gets the first ADDED object."""
    lst = json.loads(kubectl("get", "--raw", f"/apis/ctf.kopc.io/v1alpha1/namespaces/{ns}/challenges").stdout)
    rv = lst["metadata"]["resourceVersion"]
    p = subprocess.Popen([KUBECTL, "--kubeconfig", KUBECONFIG, "get", "--raw",
                          f"/apis/ctf.kopc.io/v1alpha1/namespaces/{ns}/challenges"
                          f"?watch=1&resourceVersion={rv}&timeoutSeconds=60"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    q = queue.Queue()

    def read():
        for line in p.stdout:
            ev = json.loads(line)
            if ev.get("type") == "ADDED":
                q.put(ev["object"])
                break
        p.kill()
    threading.Thread(target=read, daemon=True).start()
    return q


def test_refusals():
    log("refusals change nothing")
    before = len(challenges_in_cluster())
    cases = [  # body, what
        ("{", "malformed JSON"), ('{"expiresAt": "2030-01-01T00:00:00Z"', "truncated JSON"),
        ("[]", "an array"), ('"x"', "a string"), ("null", "null"), ('{"foo": 1}', "an unknown field"),
        ('{"expiresAt": 5}', "expiresAt a number"), ('{"expiresAt": true}', "expiresAt a boolean"),
        ('{"expiresAt": "tomorrow"}', "expiresAt not a time"),
        ('{"expiresAt": "2030-01-01T00:00:00Z", "x": 1}', "a good and an unknown field"),
    ]
    for i, (body, what) in enumerate(cases):
        team = f"bad-body-{i}"  # each its own write budget: only the refusal is tested here
        expect(call("PUT", team_path(team, "web"), ADMIN, body), 400, "BadRequest", f"PUT with {what}")
    expect(call("POST", team_path("bad-body-x", "web", "renew"), ADMIN, '{"foo": 1}'), 400, "BadRequest",
           "renew with an unknown field")
    ok(f"400 BadRequest for PUT bodies: {', '.join(w for _, w in cases)}")

    bad_teams = ["Team_A", "TEAM-A", "..", "%2e%2e", "a%2Fb", "a%2fb", "-team", "team-", "team.a",
                 "a" * 64, "team%20a", "t%00", "%F0%9F%9A%A9"]
    for t in bad_teams:
        for method, path in [("GET", team_path(t)), ("PUT", team_path(t, "web")),
                             ("GET", f"/api/v1/teams/{t}/events"), ("DELETE", team_path(t, "web")),
                             ("POST", team_path(t, "web", "renew"))]:
            expect(call(method, path, ADMIN), 400, "BadRequest", f"{method} {path}")
    bad_chals = ["Web", "web_1", "..", "%2e%2e", "a%2Fb", "-web", "web-", "web..x", ".web",
                 "a" * 254, "web%00"]
    for c in bad_chals:
        for method in ("GET", "PUT", "DELETE"):
            expect(call(method, team_path("bad-name", c), ADMIN), 400, "BadRequest", f"{method} challenge {c!r}")
        expect(call("POST", team_path("bad-name", c, "renew"), ADMIN), 400, "BadRequest", f"renew challenge {c!r}")
    ok("400 BadRequest for invalid team names (case, '_', '..', %2e%2e, %2F, edges, 64 bytes, NUL, UTF-8) "
       "and challenge names (also 254 bytes) on every route")

    expect(call("PUT", team_path("nf", "no-such-challenge"), ADMIN), 404, "NotFound", "PUT an unknown challenge")
    expect(call("GET", team_path("nf", "web"), ADMIN), 404, "NotFound", "GET a missing instance")
    expect(call("DELETE", team_path("nf", "web"), ADMIN), 404, "NotFound", "DELETE a missing instance")
    expect(call("POST", team_path("nf", "web", "renew"), ADMIN), 404, "NotFound", "renew a missing instance")
    expect(call("GET", team_path("nf", "no-such-challenge"), ADMIN), 404, "NotFound", "GET an unknown challenge")
    for p in ["/api/v1/nope", "/api/v1", "/api/v1/", "/api/v1/teams", "/api/v1/teams/nf",
              "/api/v1/teams/nf/instances/web/renew/x", "/api/v1/teams/nf/instances/web/", "/api/v1/teams/nf/things",
              "/api/v1/challenges/web", "/api/v2/challenges", "/api/nope"]:
        expect(call("GET", p, ADMIN), 404, "NotFound" if p.startswith("/api/v1/") else None, f"GET {p}")
    ok("404 NotFound for an unknown challenge, a missing instance (GET, DELETE, renew) and unknown routes")

    r = call("GET", team_path("nf"), ADMIN)
    expect(r, 200, what="instances of a team with none")
    check(r.body == {"team": "nf", "instances": []}, f"instances of nf: {r.body}")
    ok("a team without instances lists {team, instances: []}")

    big = '{"expiresAt": "' + "x" * (70 * 1024) + '"}'
    expect(call("PUT", team_path("big", "web"), ADMIN, big), 413, "PayloadTooLarge", "PUT with a 70 KiB body")
    expect(call("PUT", team_path("big", "web"), ADMIN, " " * (64 * 1024 + 1)), 413, "PayloadTooLarge",
           "PUT with a 64 KiB + 1 body")
    expect(call("POST", team_path("big", "web", "renew"), ADMIN, "{}" + " " * (70 * 1024)), 413,
           "PayloadTooLarge", "renew with a 70 KiB body")
    ok("413 PayloadTooLarge for bodies over 64 KiB")

    after = len(challenges_in_cluster())
    check(after == before, f"refused requests changed the Challenges: {before} before, {after} after")
    ok("no refused request (400, 401, 403, 404, 405, 413) created anything")


def test_lifecycle_and_events():
    log("one instance's life, through the API and its event stream (team-a's token)")
    ta = TEAMS["team-a"]
    s1 = open_stream("team-a", ta)
    snap = first_snapshot(s1)
    check(snap["instances"] == [], f"team-a starts with {snap['instances']}")
    wait_for(30, "a heartbeat comment", lambda: _heartbeat(s1))
    ok("events: retry 2000, a snapshot first (empty), then ': heartbeat' comments")

    first_added = watch_added(NS)
    r = expect(call("PUT", team_path("team-a", "web"), ta), 201, what="first PUT")
    inst = r.body
    name = inst["name"]
    check(r.headers["location"].endswith(team_path("team-a", "web")), f"Location {r.headers['location']}")
    check(inst["team"] == "team-a" and inst["challenge"] == "web" and name, f"PUT answered {inst}")
    check(inst["state"] in ("Starting", "Running"), f"new instance state {inst['state']}")
    r2 = expect(call("PUT", team_path("team-a", "web"), ta), 200, what="second PUT")
    check(r2.body["name"] == name, f"second PUT names {r2.body['name']}, first {name}")
    r3 = expect(call("PUT", team_path("team-a", "web"), ta, "{}"), 200, what="PUT {}")
    check(r3.body["name"] == name, "PUT {} names another instance")
    objs = challenges_in_cluster("team-a", "web")
    check(len(objs) == 1 and objs[0]["metadata"]["name"] == name, f"Challenges for team-a/web: {objs}")
    # The API's create carries the operator's finalizer (no patch in the first pass):
    # the watch's ADDED event, the object as the create stored it, has it.
    added = first_added.get(timeout=30) if first_added else None
    check(added and CTF_FINALIZER in added["metadata"].get("finalizers", []),
          f"the Challenge was created without the finalizer: {added and added['metadata']}")
    ok("PUT: 201 with Location, then 200 with the same name (also with {}); one Challenge in the "
       "cluster, created with the operator's finalizer")

    inst = wait_for(120, "team-a/web Running", lambda: running("team-a", "web", ta))
    check(inst["status"] == "Running" and inst["reason"] is None, f"running instance {inst}")
    check(all(e["type"] == "HTTP" and re.match(r"^http://[^/\s:]+(:\d+)?$", e["address"]) for e in inst["endpoints"])
          and inst["endpoints"][0]["name"] == "http", f"endpoints {inst['endpoints']}")
    check(secs(inst["createdAt"], inst["expiresAt"]) == 1800, f"expiresAt not createdAt + 30m: {inst}")
    check(secs(inst["createdAt"], inst["maxExpiresAt"]) == 7200, f"maxExpiresAt not createdAt + 2h: {inst}")
    check(ts(inst["createdAt"]) <= ts(inst["startedAt"]), f"startedAt before createdAt: {inst}")
    check(0 < inst["secondsLeft"] <= 1800 and inst["renewable"] is True, f"secondsLeft/renewable: {inst}")
    lst = expect(call("GET", team_path("team-a"), ta), 200, what="list").body
    check([i["name"] for i in lst["instances"]] == [name] and lst["team"] == "team-a", f"list: {lst}")
    obj = challenge_object(name)
    check(obj["spec"] == {**obj["spec"], "team": "team-a", "definition": "web"}, f"Challenge spec {obj['spec']}")
    ok("the instance goes Running: HTTP endpoint, expiry = created + 30m, max = created + 2h, listed")

    seq = []
    watch_states(s1, "web", "Running", 60, seq)
    ok(f"events: the instance's states in order ({' -> '.join(seq)})")

    # Hold the Challenge with a finalizer of ours, so Stopping lasts until we let go.
    ns = obj["status"]["namespace"]
    kubectl("-n", NS, "patch", "challenge", name, "--type", "json",
            "-p", '[{"op":"add","path":"/metadata/finalizers/-","value":"kopc.test/hold"}]')
    r = expect(call("DELETE", team_path("team-a", "web"), ta), 202, what="DELETE")
    check(r.body["state"] == "Stopping" and r.body["name"] == name, f"DELETE answered {r.body}")
    wait_for(30, "GET shows Stopping", lambda: get_instance("team-a", "web", ta)["state"] == "Stopping")
    r = expect(call("DELETE", team_path("team-a", "web"), ta), 202, what="DELETE again")
    check(r.body["state"] == "Stopping", f"second DELETE answered {r.body}")
    expect(call("PUT", team_path("team-a", "web"), ta), 409, "InstanceStopping", "PUT while stopping")
    expect(call("POST", team_path("team-a", "web", "renew"), ta), 409, "InstanceStopping", "renew while stopping")
    check(len(challenges_in_cluster("team-a", "web")) == 1, "PUT while stopping created a Challenge")
    ok("DELETE: 202 Stopping (again 202); PUT and renew while stopping are 409 InstanceStopping, nothing created")

    wait_for(120, f"instance namespace {ns} gone", lambda: not namespace_exists(ns))
    check(get_instance("team-a", "web", ta)["state"] == "Stopping", "held instance is not Stopping")

    def release():
        p = kubectl("-n", NS, "patch", "challenge", name, "--type", "json", "-p",
                    '[{"op":"test","path":"/metadata/finalizers","value":["kopc.test/hold"]},'
                    '{"op":"remove","path":"/metadata/finalizers"}]', check_rc=False)
        return p.returncode == 0
    wait_for(120, "the operator to release its finalizer (ours left)", release)
    wait_for(60, "GET -> 404 after the instance went away", lambda: get_instance("team-a", "web", ta) is None)
    check(not challenges_in_cluster("team-a", "web"), "the Challenge is still there")
    stopped = watch_states(s1, "web", "Stopped", 60, seq)
    check(seq[-2] == "Stopping" and "Running" in seq, f"states {seq}")
    check(stopped["team"] == "team-a" and stopped["challenge"] == "web", f"Stopped event {stopped}")
    ok(f"the instance goes away: namespace removed, GET 404, events {' -> '.join(seq)}")

    s2 = open_stream("team-a", ta)
    snap = first_snapshot(s2)
    check(snap["instances"] == [], f"reconnect snapshot after the instance stopped: {snap}")
    s2.close()

    r = expect(call("PUT", team_path("team-a", "web"), ta), 201, what="PUT after the old one went")
    check(r.headers.get("location"), "no Location")
    seq2 = []
    watch_states(s1, "web", "Running", 120, seq2)
    inst = wait_for(60, "team-a/web Running again", lambda: running("team-a", "web", ta))
    s3 = open_stream("team-a", ta)
    snap = first_snapshot(s3)
    check([(i["name"], i["state"]) for i in snap["instances"]] == [(inst["name"], "Running")],
          f"reconnect snapshot {snap}, GET says {inst['name']} Running")
    s3.close()
    s1.close()
    ok(f"a new PUT after it went is 201 and runs ({' -> '.join(seq2)}); a reconnect's snapshot shows the "
       "current state first")


def _heartbeat(s):
    while True:
        try:
            item = s.q.get_nowait()
        except queue.Empty:
            return False
        if item[0] == "comment" and item[1] == "heartbeat":
            return True
        check(item[0] != "eof", "stream ended")
        check(item[0] != "event", f"unexpected event before any change: {item}")


def test_concurrent_put_and_rate_limit():
    log("20 concurrent PUTs make one instance; the 21st write is over the burst")
    team = "team-c"
    barrier = threading.Barrier(20)
    results = [None] * 20

    def one(i):
        barrier.wait()
        try:
            results[i] = call("PUT", team_path(team, "web"), ADMIN)
        except Fail as e:
            results[i] = e
    start = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - start
    for r in results:
        check(isinstance(r, Resp), f"a concurrent PUT failed: {r}")
    statuses = sorted(r.status for r in results)
    check(set(statuses) <= {200, 201} and statuses.count(201) == 1,
          f"20 concurrent PUTs answered {statuses} (want one 201, nineteen 200)")
    names = {r.body["name"] for r in results}
    check(len(names) == 1, f"concurrent PUTs name several instances: {names}")
    creator = [r for r in results if r.status == 201][0]
    check(creator.headers.get("location", "").endswith(team_path(team, "web")), "the 201 has no Location")
    objs = challenges_in_cluster(team, "web")
    check(len(objs) == 1 and objs[0]["metadata"]["name"] in names, f"Challenges of {team}/web: {objs}")
    ok(f"20 concurrent PUTs: one 201 with Location, nineteen 200, one name, one Challenge ({took:.1f}s)")

    # The burst (20) is spent and one write per minute comes back: unless the PUTs
    # took most of a minute, the next writes are refused and change nothing.
    check(took < 45, f"the 20 PUTs took {took:.0f}s: too slow to test the burst (a write came back)")
    before = challenges_in_cluster(team, "web")[0]
    for method, path, what in [("PUT", team_path(team, "tcp"), "PUT of another challenge"),
                               ("DELETE", team_path(team, "web"), "DELETE"),
                               ("POST", team_path(team, "web", "renew"), "renew"),
                               ("PUT", team_path(team, "web"), "PUT of the same")]:
        r = expect(call(method, path, ADMIN), 429, "TooManyRequests", f"{what} over the burst")
        check(int(r.headers["retry-after"]) >= 1, f"Retry-After {r.headers['retry-after']}")
    r = expect(call("PUT", team_path(team, "tcp"), TEAMS[team]), 429, "TooManyRequests",
               "the team's own token shares its budget")
    check(not challenges_in_cluster(team, "tcp"), "a 429 PUT created a Challenge")
    obj = challenges_in_cluster(team, "web")
    check(len(obj) == 1 and not obj[0]["metadata"].get("deletionTimestamp"), "a 429 DELETE deleted")
    check(obj[0]["spec"] == before["spec"], f"a 429 write changed the spec: {before['spec']} -> {obj[0]['spec']}")
    expect(call("GET", team_path(team, "web"), ADMIN), 200, what="reads are not limited")
    expect(call("PUT", team_path("team-d", "web"), ADMIN), 201, what="another team's budget is its own")
    ok("429 TooManyRequests with Retry-After >= 1 on the 21st write (admin or team token), nothing changed; "
       "reads and other teams unaffected")

    inst = wait_for(120, f"{team}/web Running", lambda: running(team, "web"))
    check(inst["name"] in names, "a different instance runs")
    ok("the concurrently created instance goes Running with endpoints")


def test_quota_and_delete():
    log("quota: a team's fourth instance (team-d, admin token)")
    team = "team-d"  # web was created by the previous scenario
    for c in ("tcp", "plain"):
        expect(call("PUT", team_path(team, c), ADMIN), 201, what=f"PUT {team}/{c}")
    for c in ("web", "tcp", "plain"):
        wait_for(120, f"{team}/{c} Running", lambda c=c: running(team, c))
    inst = get_instance(team, "tcp")
    check(re.match(r"^[^/\s:]+:\d+$", inst["endpoints"][0]["address"]) and inst["endpoints"][0]["type"] == "TCP",
          f"TCP endpoint {inst['endpoints']}")
    r = expect(call("PUT", team_path(team, "short"), ADMIN), 409, "QuotaExceeded", "a fourth instance")
    check(not challenges_in_cluster(team, "short"), "the refused fourth instance was created")
    check(len(challenges_in_cluster(team)) == 3, "team-d does not have 3 Challenges")
    lst = expect(call("GET", team_path(team), ADMIN), 200, what="list").body
    check([i["challenge"] for i in lst["instances"]] == ["plain", "tcp", "web"], f"list not sorted: {lst}")
    ok("three instances run (TCP endpoint host:port); the fourth PUT is 409 QuotaExceeded and creates nothing; "
       "the list is sorted by challenge")

    ns = challenge_object(inst["name"])["status"]["namespace"]
    r = expect(call("DELETE", team_path(team, "tcp"), ADMIN), 202, what="DELETE tcp")
    check(r.body["state"] == "Stopping", f"DELETE answered {r.body}")
    wait_for(120, "GET -> 404 after DELETE", lambda: get_instance(team, "tcp") is None)
    wait_for(120, f"namespace {ns} gone", lambda: not namespace_exists(ns))
    expect(call("GET", team_path(team, "tcp"), ADMIN), 404, "NotFound", "GET after it went")
    expect(call("DELETE", team_path(team, "tcp"), ADMIN), 404, "NotFound", "DELETE after it went")
    ok("DELETE: 202 Stopping, then GET 404 and the instance namespace removed; DELETE again is 404")
    r = expect(call("PUT", team_path(team, "short"), ADMIN), 201, what="PUT once a slot is free")
    ok("with a slot free the fourth challenge's PUT is 201")


def test_error_state():
    log("an instance that cannot start (team-x)")
    team = "team-x"
    expect(call("PUT", team_path(team, "broken"), ADMIN), 201, what="PUT broken")
    inst = wait_for(90, "state Error", lambda: (lambda i: i if i and i["state"] == "Error" else None)(
        get_instance(team, "broken")))
    check(inst["status"] == "Error" and inst["reason"] == "ImagePullFailed" and inst["message"]
          and inst["endpoints"] == [], f"broken instance {inst}")
    r = expect(call("PUT", team_path(team, "broken"), ADMIN), 200, what="PUT of an instance in Error")
    check(r.body["name"] == inst["name"], "PUT of an Error instance made another")
    expect(call("DELETE", team_path(team, "broken"), ADMIN), 202, what="DELETE an Error instance")
    wait_for(120, "the Error instance gone", lambda: get_instance(team, "broken") is None)
    ok("an instance whose image cannot be pulled shows state Error, reason ImagePullFailed and a message; "
       "PUT returns it (200), DELETE removes it")


def test_made_with_kubectl():
    log("a Challenge made with kubectl is the team's instance too (team-h)")
    team = "team-h"
    p = subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, "--request-timeout=30s", "create", "-f", "-"],
                       input=json.dumps({"apiVersion": "ctf.kopc.io/v1alpha1", "kind": "Challenge",
                                         "metadata": {"name": "by-hand", "namespace": NS},
                                         "spec": {"definition": "tcp", "team": team}}),
                       capture_output=True, text=True)
    check(p.returncode == 0, f"kubectl create: {p.stderr}")
    inst = wait_for(60, "GET shows it", lambda: get_instance(team, "tcp"))
    check(inst["name"] == "by-hand", f"GET {team}/tcp: {inst}")
    r = expect(call("PUT", team_path(team, "tcp"), ADMIN), 200, what="PUT over a kubectl-made Challenge")
    check(r.body["name"] == "by-hand", f"PUT answered {r.body}")
    check(len(challenges_in_cluster(team, "tcp")) == 1, "PUT made a second Challenge beside the kubectl-made one")
    ok("a Challenge made with kubectl shows in GET, and PUT returns it (200) rather than making another")
