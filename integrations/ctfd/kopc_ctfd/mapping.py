"""mapping.py - the plugin's pure part: which kopc team a CTFd account is
(and back), whether a player may use a challenge, what a kopc answer means
in plain words (a flag check's included: correct, another team's flag,
stopped on solve), what of an Instance a player sees (in kopc's gateway
mode, each endpoint's host and port too), and what is recorded
of a shared flag. No Flask, no CTFd, no network: unit-tested by
tests/test_mapping.py.

The team mapping is by id, never by name: CTFd lets teams rename themselves
and allows names kopc could not use (spaces, capitals, emoji), while ids are
stable, unique and always make a DNS label. In team mode the kopc team is
``team-<team id>``; in user mode ``user-<user id>``.
"""

import re

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
