"""flag_check.py - POST /api/v1/teams/{team}/challenges/{challenge}/flag: the
admin's flag check, yes or no, with no instance made and no write spent.
"""
from .common import (ADMIN, FLAG, TEAMS, call, check, expect, get_instance, log, ok, team_path)


def test_flag_check():
    log("the flag check: admin only, yes or no, no instance needed, no write spent")
    team, path = "flag-team", team_path("flag-team", "web", "flag")
    ta = TEAMS["team-a"]
    expect(call("POST", team_path("team-a", "web", "flag"), ta, {"flag": FLAG}), 403, "Forbidden",
           "a team token asks for its own flag check")
    expect(call("POST", path, None, {"flag": FLAG}), 401, "Unauthorized", "a flag check without a token")
    for bad in (None, "{}", {"flag": ""}, {"flag": 5}, {"flag": FLAG, "team": "x"}, {"flag": "x" * 1025}, "[1]"):
        expect(call("POST", path, ADMIN, bad), 400, "BadRequest", f"a flag check with body {str(bad)[:40]}")
    r = expect(call("POST", path, ADMIN, {"flag": FLAG}), 200, what="the right flag")
    check(r.body == {"correct": True}, f"the right flag: {r.body}")
    for wrong in (FLAG[:-1], FLAG + "x", FLAG.upper(), " " + FLAG, "flag{}"):
        r = expect(call("POST", path, ADMIN, {"flag": wrong}), 200, what=f"a wrong flag {wrong!r}")
        check(r.body == {"correct": False}, f"a wrong flag {wrong!r}: {r.body}")
    check(get_instance(team, "web") is None, "a flag check made an instance")
    expect(call("POST", team_path(team, "tcp", "flag"), ADMIN, {"flag": FLAG}), 409, "NoFlag",
           "a flag check of a definition without a flag")
    expect(call("POST", team_path(team, "nope", "flag"), ADMIN, {"flag": FLAG}), 404, "NotFound",
           "a flag check of an unknown challenge")
    # Checks spend none of the team's writes: far more than its burst all answer 200.
    for _ in range(30):
        expect(call("POST", path, ADMIN, {"flag": "flag{guess}"}), 200, what="a repeated flag check")
    expect(call("PUT", team_path(team, "web"), ADMIN), 201, what="a PUT after 30 flag checks")
    expect(call("DELETE", team_path(team, "web"), ADMIN), 202, what="DELETE")
    ok("POST .../flag: 403 for a team token, 400 for a bad body, true only for the exact flag, "
       "409 NoFlag, 404; no instance made, no write spent")
