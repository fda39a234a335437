"""challenges.py - GET /api/v1/challenges: every definition in the cluster,
sorted, with its public fields only.
"""
import json

from .common import (FLAG, NS, TEAMS, call, check, expect, kubectl, log, ok)


def test_challenges():
    log("GET /api/v1/challenges")
    r = expect(call("GET", "/api/v1/challenges", TEAMS["team-a"]), 200, what="challenges")
    ch = r.body["challenges"]
    names = [c["name"] for c in ch]
    defs = sorted(d["metadata"]["name"] for d in json.loads(
        kubectl("-n", NS, "get", "challengedefinitions", "-o", "json").stdout)["items"])
    check(names == defs, f"challenges {names}, definitions in the cluster {defs} (sorted by name)")
    by = {c["name"]: c for c in ch}
    web = by["web"]
    check(web["title"] == "Cookie Monster" and web["category"] == "web" and web["points"] == 100
          and web["description"] == "The admin panel trusts its cookies a little too much.", f"web: {web}")
    check(web["expose"] == [{"name": "http", "type": "HTTP"}], f"web expose: {web['expose']}")
    check(web["lifetimeSeconds"] == {"default": 1800, "max": 7200, "renewBy": 1800}, f"web lifetime: {web}")
    check(by["tcp"]["expose"] == [{"name": "nc", "type": "TCP"}], f"tcp expose: {by['tcp']}")
    check(by["short"]["lifetimeSeconds"] == {"default": 120, "max": 300, "renewBy": 120}, f"short: {by['short']}")
    check(by["plain"]["category"] is None and by["plain"]["description"] is None and by["plain"]["points"] == 0,
          f"plain (no category, description, points): {by['plain']}")
    for leak in (FLAG, "registry.example", "containerPort", "8080", "pods", "flag", "image"):
        check(leak.encode() not in r.raw, f"GET /challenges shows {leak!r}")
    ok("GET /challenges: sorted, public fields only (title, category, description, points, expose name/type, "
       "lifetimeSeconds), no pods, images, ports or flag")
