"""mapping.py - the plugin's pure part: which kopc team a CTFd account is
(and back), whether a player may use a challenge, what a kopc answer means
in plain words (a flag check's included: correct, another team's flag,
stopped on solve), what of an Instance a player sees (in kopc's gateway
mode, each endpoint's host and port too), what is recorded of a shared
flag, and the admin page's instance overview (its rows, filters and pages,
and what a stop said). No Flask, no CTFd, no network: unit-tested by
tests/test_mapping.py.

The team mapping is by id, never by name: CTFd lets teams rename themselves
and allows names kopc could not use (spaces, capitals, emoji), while ids are
stable, unique and always make a DNS label. In team mode the kopc team is
``team-<team id>``; in user mode ``user-<user id>``.
"""

import calendar
import re
import time

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

# What of kopc's Instance a player's browser gets (docs/api.md); nothing else.
PLAYER_FIELDS = (
    "challenge",
    "state",
    "reason",
    "message",
    "endpoints",
    "createdAt",
    "startedAt",
    "expiresAt",
    "maxExpiresAt",
    "secondsLeft",
    "renewable",
)


def kopc_team(team_id=None, user_id=None):
    """The kopc team of a CTFd team (team mode) or user (user mode)."""
    if team_id is not None:
        return f"team-{int(team_id)}"
    if user_id is not None:
        return f"user-{int(user_id)}"
    raise ValueError("a kopc team needs a CTFd team or user id")


def kopc_account(team):
    """The CTFd account a kopc team stands for: ("team", id) or ("user", id); None
    for a name this plugin never makes (another platform's team, say)."""
    if not isinstance(team, str) or not DNS_LABEL.match(team) or len(team) > 63:
        return None
    kind, _, num = team.partition("-")
    if kind not in ("team", "user") or not num.isdigit() or num != str(int(num)):
        return None
    return kind, int(num)


def valid_definition(name):
    """Whether name can be a ChallengeDefinition's name (a DNS subdomain)."""
    return isinstance(name, str) and 0 < len(name) <= 253 and DNS_SUBDOMAIN.match(name) is not None


def challenge_refusal(state, requirements, solved_ids, existing_ids):
    """The status refusing a player a challenge, or None when it may be used.

    As CTFd's own challenge API decides (CTFd 3.8.7, api/v1/challenges.py,
    the attempt route): a hidden challenge is 404, a locked one 403, and one
    whose prerequisites the player's account has not all solved 403, where
    a prerequisite naming a challenge that no longer exists does not count.
    Admins are not refused; the caller does not ask for them.
    """
    if state == "hidden":
        return 404
    if state == "locked":
        return 403
    prereqs = set((requirements or {}).get("prerequisites") or [])
    if (prereqs & set(existing_ids)) - set(solved_ids):
        return 403
    return None


def player_view(instance, challenge):
    """The Instance as a player sees it; a missing one is Stopped."""
    if not instance:
        return {"challenge": challenge, "state": "Stopped", "endpoints": [], "renewable": False}
    view = {k: instance.get(k) for k in PLAYER_FIELDS}
    view["endpoints"] = [player_endpoint(e) for e in instance.get("endpoints") or [] if isinstance(e, dict)]
    return view


def player_endpoint(e):
    """One endpoint as a player sees it. In kopc's gateway mode it also has the
    instance's own host and port (docs/api.md), passed on only when the host is
    a DNS name and the port a port: the player's view builds commands of them."""
    out = {"name": e.get("name"), "type": e.get("type"), "address": e.get("address")}
    host, port = e.get("host"), e.get("port")
    good_host = isinstance(host, str) and len(host) <= 253 and DNS_SUBDOMAIN.match(host) is not None
    good_port = isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536
    if good_host and good_port:
        out["host"], out["port"] = host, port
    return out


# kopc's error codes (docs/api.md), said to a player. {message} is kopc's own
# sentence, {retry} the seconds of a Retry-After.
PLAIN = {
    "QuotaExceeded": "Your team already runs as many instances as it may ({message}). "
    "Stop one of them first.",
    "InstanceStopping": "Your previous instance of this challenge is still stopping. "
    "Try again in a few seconds.",
    "RenewLimitReached": "This instance cannot be extended any further.",
    "TooManyRequests": "Too many requests for your team; try again in {retry} s.",
    "Unavailable": "The instance manager is starting or busy; try again in a moment.",
    "NotFound": "This challenge is not available from the instance manager "
    "(the organizers may have removed it).",
    "NoFlag": "This challenge has no flag the instance manager knows; tell the organizers.",
    "InvalidDefinition": "This challenge is misconfigured ({message}); tell the organizers.",
}
UNREACHABLE = "The instance manager cannot be reached right now; try again, or tell the organizers."
NOT_CONFIGURED = "The kopc plugin is not configured yet; tell the organizers."


def plain_error(status, body, retry_after=None):
    """A refusal from kopc (HTTP status, parsed JSON body or None) in plain words."""
    err = body.get("error") if isinstance(body, dict) else None
    code = err.get("code") if isinstance(err, dict) else None
    message = err.get("message") if isinstance(err, dict) else None
    text = PLAIN.get(code)
    if text:
        return text.format(message=message or code, retry=retry_after or "a few")
    if status in (401, 403):
        # The admin token is wrong: the player can do nothing about it.
        return "The instance manager refused the platform's credentials; tell the organizers."
    if status is not None and status >= 500:
        return UNREACHABLE
    if message:
        return f"The instance manager refused: {message}"
    return f"The instance manager answered {status}."


def instance_error(view):
    """A player's sentence for an Instance in state Error (None otherwise)."""
    if not view or view.get("state") != "Error":
        return None
    reason = view.get("reason") or "Error"
    message = view.get("message") or "no details"
    return f"The instance failed to start ({reason}: {message}). Stop it and start it again, or tell the organizers."


# ---- the flag check ------------------------------------------------------------------


def flag_verdict(answer, team):
    """kopc's answer to a flag check (POST .../flag, docs/api.md) read for team:
    (correct, shared_from, stopped). shared_from is the kopc team whose flag a
    wrong submission was (kopc's sharedFrom), None when kopc names none, names
    the submitter's own team, or names something that is no team; stopped is
    true when a correct flag stopped the instance (spec.stopOnSolve)."""
    if not isinstance(answer, dict):
        return False, None, False
    correct = answer.get("correct") is True
    shared = answer.get("sharedFrom")
    if correct or not isinstance(shared, str) or len(shared) > 63 or not DNS_LABEL.match(shared) or shared == team:
        shared = None
    return correct, shared, correct and answer.get("stopped") is True


def shared_record(submitter, owner, owner_name, user_id, user_name, account_name, challenge_id, challenge_name):
    """The row recorded of a wrong submission that was another team's flag: who
    submitted it (the user, their account's name and kopc team), whose flag it
    was (kopc team, and the CTFd name it stood for when it was recorded, or the
    kopc team when it stands for no account), and which challenge. Names are
    copied, so the list still reads after a rename or a deletion; each is cut
    to the column's size."""

    def cut(s, n=128):
        return str(s if s is not None else "")[:n]

    return {
        "submitter": cut(submitter, 63),
        "owner": cut(owner, 63),
        "owner_name": cut(owner_name or owner),
        "user_id": int(user_id) if user_id is not None else None,
        "user_name": cut(user_name),
        "account_name": cut(account_name),
        "challenge_id": int(challenge_id),
        "challenge_name": cut(challenge_name),
    }


# ---- the admin page's instance overview ----------------------------------------------
#
# kopc's admin list (GET /api/v1/admin/instances) has every team's instances
# and no paging of its own, so the plugin reads it whole on each view of the
# admin page and pages it here: a page shows at most OVERVIEW_PAGE rows,
# whatever the CTF's size (2,000 instances are 20 pages; the filters narrow
# them first).

OVERVIEW_PAGE = 100
STATES = ("Starting", "Running", "Error", "Stopping")


def parse_time(text):
    """An RFC 3339 time as kopc writes it (2026-11-22T10:00:00Z), as seconds
    since the epoch; None for anything else."""
    if not isinstance(text, str):
        return None
    try:
        return calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def clock(seconds):
    """A duration as the kopc page writes one: h:mm:ss, or m:ss under an hour;
    '' for no duration."""
    if seconds is None:
        return ""
    total = max(0, int(seconds))
    h, m, s = total // 3600, total % 3600 // 60, total % 60
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def team_order(team):
    """Sorts ours by kind and id (team-2 before team-10), then anything else by name."""
    acct = kopc_account(team)
    return (0, acct[0], acct[1], "") if acct else (1, "", 0, str(team))


def overview_row(instance, now, names):
    """One row of the overview: what the organizer sees of an Instance. names
    maps kopc teams to their CTFd names; now is seconds since the epoch. None
    for what is not an Instance with a team and a challenge."""
    if not isinstance(instance, dict):
        return None
    team, challenge = instance.get("team"), instance.get("challenge")
    if not isinstance(team, str) or not DNS_LABEL.match(team) or len(team) > 63 or not valid_definition(challenge):
        return None
    created, expires = parse_time(instance.get("createdAt")), parse_time(instance.get("expiresAt"))
    left = expires - now if expires is not None else None
    if left is None and isinstance(instance.get("secondsLeft"), int):
        left = instance["secondsLeft"]
    endpoints = [e.get("address") for e in instance.get("endpoints") or []
                 if isinstance(e, dict) and isinstance(e.get("address"), str)]
    state = instance.get("state") if instance.get("state") in STATES else "Starting"
    return {
        "team": team,
        "team_name": names.get(team) or "",
        "challenge": challenge,
        "state": state,
        "reason": str(instance.get("reason") or ""),
        "message": str(instance.get("message") or ""),
        "age": clock(now - created) if created is not None else "",
        "left": clock(left) if left is not None else "",
        "endpoints": endpoints,
    }


def overview(instances, now, names, team="", challenge="", state="", page=1, per_page=OVERVIEW_PAGE):
    """The admin page's overview of kopc's instances: the rows of one page after
    the filters, and what the page says around them.

    team matches a part of the kopc team or of its CTFd name (any case);
    challenge and state match exactly. exact_team is the kopc team the team
    filter names whole (its kopc name, or its CTFd name), with team_count its
    instances, for "stop all of this team's"; challenge_count counts the
    filtered challenge's instances, for "stop all of this challenge's"."""
    rows = [r for r in (overview_row(i, now, names) for i in (instances if isinstance(instances, list) else []))
            if r]
    rows.sort(key=lambda r: (team_order(r["team"]), r["challenge"]))
    team = (team or "").strip()
    challenge = (challenge or "").strip()
    state = state if state in STATES else ""
    want = team.lower()
    shown = [r for r in rows
             if (not want or want in r["team"] or want in r["team_name"].lower())
             and (not challenge or r["challenge"] == challenge)
             and (not state or r["state"] == state)]
    pages = max(1, -(-len(shown) // per_page))
    try:
        page = min(max(1, int(page)), pages)
    except (TypeError, ValueError):
        page = 1
    start = (page - 1) * per_page
    exact = {r["team"] for r in rows if team and (r["team"] == team or r["team_name"] == team)}
    exact_team = exact.pop() if len(exact) == 1 else None
    counts = {s: sum(1 for r in rows if r["state"] == s) for s in STATES}
    return {
        "rows": shown[start:start + per_page],
        "total": len(rows),
        "matched": len(shown),
        "page": page,
        "pages": pages,
        "first": start + 1 if shown else 0,
        "last": min(start + per_page, len(shown)),
        "counts": counts,
        "teams": len({r["team"] for r in rows}),
        "challenges": sorted({r["challenge"] for r in rows}),
        "filters": {"team": team, "challenge": challenge, "state": state},
        "exact_team": exact_team,
        "exact_team_name": (names.get(exact_team) or "") if exact_team else "",
        "team_count": sum(1 for r in rows if r["team"] == exact_team) if exact_team else 0,
        "challenge_count": sum(1 for r in rows if r["challenge"] == challenge) if challenge else 0,
    }


STOP_KINDS = ("one", "team", "challenge")


def stop_request(kind, team, challenge):
    """The stop an admin asked for, checked: (kind, team, challenge), or a
    ValueError saying what is wrong. A team stop needs a team, a challenge stop
    a challenge, a single stop both."""
    if kind not in STOP_KINDS:
        raise ValueError("unknown stop: one, team or challenge")
    team = (team or "").strip() or None
    challenge = (challenge or "").strip() or None
    if kind in ("one", "team") and (team is None or not DNS_LABEL.match(team) or len(team) > 63):
        raise ValueError("the stop names no kopc team")
    if kind in ("one", "challenge") and not valid_definition(challenge):
        raise ValueError("the stop names no challenge definition")
    return kind, team if kind != "challenge" else None, challenge if kind != "team" else None


def who(team, name):
    """A kopc team as the admin page names it: its CTFd name and kopc team."""
    return f"{name} ({team})" if name and name != team else team


def stop_notice(kind, answer, team=None, challenge=None, team_name=None):
    """What the admin page says after a stop: (level, sentence), level a
    Bootstrap alert's (success, warning). answer is kopc's: the Instance of a
    single stop (None when there was none), or a bulk stop's counts."""
    if kind == "one":
        if not answer:
            return "warning", f"{who(team, team_name)} had no instance of {challenge} (already gone)."
        return "success", f"Stopped {challenge} of {who(team, team_name)}."
    answer = answer if isinstance(answer, dict) else {}
    stopped = answer.get("stopped") if isinstance(answer.get("stopped"), int) else 0
    failed = answer.get("failed") if isinstance(answer.get("failed"), int) else 0
    of = f"team {who(team, team_name)}" if kind == "team" else f"challenge {challenge}"
    text = f"Stopped {stopped} instance(s) of {of}."
    if failed:
        return "warning", text + f" The cluster refused {failed} (stop them again, or see kopc's log)."
    return "success", text
