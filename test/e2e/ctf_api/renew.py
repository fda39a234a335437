"""renew.py - how long an instance lives: POST .../renew until the limit
(409 RenewLimitReached), each move seen in the event stream, and PUT with an
expiresAt under concurrent renewals.
"""
import datetime
import threading
import time

from .common import (ADMIN, Fail, Resp, TEAMS, call, challenge_object, check, expect,
                     first_snapshot, get_instance, log, ok, open_stream, running, secs, team_path,
                     ts, wait_for)


def next_instance_event(s, challenge, pred, timeout, what):
    """The next instance event of challenge on s for which pred holds."""
    end = time.monotonic() + timeout
    while True:
        name, ev = s.next_event(max(0.1, end - time.monotonic()), what)
        if name == "instance" and ev["challenge"] == challenge and pred(ev):
            return ev


def test_renew():
    log("renew until the limit (team-e's token, lifetime 2m, renewBy 2m, max 5m)")
    te, team = TEAMS["team-e"], "team-e"
    s = open_stream(team, te)
    first_snapshot(s)
    expect(call("PUT", team_path(team, "short"), te), 201, what="PUT short")
    inst = wait_for(120, "short Running with an expiry", lambda: (lambda i: i if i and i["expiresAt"] else None)(
        running(team, "short", te)))
    created, mx = inst["createdAt"], inst["maxExpiresAt"]
    check(secs(created, inst["expiresAt"]) == 120 and secs(created, mx) == 300, f"short instance {inst}")
    check(inst["renewable"] is True, "not renewable")
    r = call("POST", team_path(team, "short", "renew"), te, '{"foo": 1}')
    expect(r, 400, "BadRequest", "renew with an unknown field")
    check(get_instance(team, "short", te)["expiresAt"] == inst["expiresAt"], "a 400 renew moved the expiry")
    # Back to back, as a client clicking twice would: each renewal counts.
    prev, moves = inst["expiresAt"], []
    for _ in range(5):
        if ts(prev) >= ts(mx):
            break
        r = expect(call("POST", team_path(team, "short", "renew"), te, "{}" if moves else None), 200, what="renew")
        e = r.body["expiresAt"]
        want = min(ts(prev) + datetime.timedelta(seconds=120), ts(mx))
        check(ts(e) > ts(prev) and ts(e) <= ts(mx), f"renew moved expiresAt {prev} -> {e} (max {mx})")
        check(ts(e) == want, f"renew: expiresAt {e}, want min(expiresAt + renewBy, max) = {want}")
        check(r.body["maxExpiresAt"] == mx and r.body["name"] == inst["name"], f"renew answered {r.body}")
        moves.append(e)
        prev = e
    check(ts(prev) == ts(mx) and len(moves) == 2, f"renewals {moves}, max {mx}")
    # The stream may fold changes that come close together into one event, but
    # never reorders them: the expiries it shows only grow, up to the last.
    shown = []
    while not shown or shown[-1] != moves[-1]:
        ev = next_instance_event(s, "short", lambda ev: True, 30, f"an event with expiresAt {moves[-1]}")
        if ev["expiresAt"] != (shown[-1] if shown else None):
            shown.append(ev["expiresAt"])
    renewed = [e for e in shown if ts(e) > ts(inst["expiresAt"])]
    check(renewed and all(ts(a) < ts(b) for a, b in zip(renewed, renewed[1:])) and set(renewed) <= set(moves),
          f"expiries in events {shown}, renewals {moves}")
    s.close()
    inst = wait_for(30, "GET shows the last expiry", lambda: (lambda i: i if i["expiresAt"] == mx else None)(
        get_instance(team, "short", te)))
    check(inst["renewable"] is False, f"renewable at max: {inst}")
    expect(call("POST", team_path(team, "short", "renew"), te), 409, "RenewLimitReached", "renew at max")
    check(get_instance(team, "short", te)["expiresAt"] == mx, "the refused renew moved the expiry")
    spec = challenge_object(inst["name"])["spec"]
    check(ts(spec["expiresAt"]) == ts(mx), f"spec.expiresAt {spec.get('expiresAt')}, max {mx}")
    ok(f"renew moves expiresAt by renewBy, clamped at max ({' -> '.join(moves)}), events show it in order; "
       "renewable false; then 409 RenewLimitReached, unchanged")


def test_put_expiry():
    log("PUT with an expiresAt, concurrent renewals (team-g)")
    team = "team-g"
    r = expect(call("PUT", team_path(team, "short"), ADMIN, {"expiresAt": "2099-01-01T00:00:00Z"}), 201,
               what="PUT with a far expiry")
    inst = wait_for(60, "the far expiry clamped at max", lambda: (
        lambda i: i if i and i["expiresAt"] and i["expiresAt"] == i["maxExpiresAt"] else None)(
        get_instance(team, "short")))
    check(secs(inst["createdAt"], inst["expiresAt"]) == 300 and inst["renewable"] is False, f"{inst}")
    expect(call("POST", team_path(team, "short", "renew"), ADMIN), 409, "RenewLimitReached", "renew at max")
    soon = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=10)).replace(microsecond=0)
    want = soon.strftime("%Y-%m-%dT%H:%M:%SZ")
    expect(call("PUT", team_path(team, "web"), ADMIN, {"expiresAt": want}), 201, what="PUT with an earlier expiry")
    inst = wait_for(60, "the earlier expiry", lambda: (lambda i: i if i and i["expiresAt"] == want else None)(
        get_instance(team, "web")))
    ok("PUT {expiresAt}: a far one is clamped to max (then renew is 409), an earlier one is kept")

    # Three renewals at once (30m each, 2h max): none is lost. A renewal that loses
    # every optimistic retry may answer 503 (documented); the ones that answer
    # 200 each moved the expiry by renewBy, to distinct times.
    results = [None] * 3
    barrier = threading.Barrier(3)

    def one(i):
        barrier.wait()
        try:
            results[i] = call("POST", team_path(team, "web", "renew"), ADMIN)
        except Fail as e:
            results[i] = e
    threads = [threading.Thread(target=one, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        check(isinstance(r, Resp) and r.status in (200, 503), f"a concurrent renew answered {r}")
    got = sorted(ts(r.body["expiresAt"]) for r in results if r.status == 200)
    n = len(got)
    check(n >= 1, "no concurrent renew succeeded")
    step = datetime.timedelta(seconds=1800)
    check(got == [ts(want) + step * k for k in range(1, n + 1)],
          f"{n} concurrent renewals from {want} gave {[str(g) for g in got]}")
    final = (ts(want) + step * n).strftime("%Y-%m-%dT%H:%M:%SZ")
    wait_for(30, "GET shows the renewed expiry", lambda: get_instance(team, "web")["expiresAt"] == final)
    ok(f"3 concurrent renewals: {n} answered 200, each moved the expiry by renewBy, none lost")
