"""kopc_ctfd - kopc instances inside CTFd (docs/ctfd.md).

A challenge type "kopc instance" names a kopc ChallengeDefinition. Players
start, extend and stop their team's instance from the challenge's modal; the
plugin's routes (below) call the kopc instance API from CTFd's backend with
the admin token, which never leaves the server. Submissions of a kopc
challenge are checked by kopc (POST .../flag: kopc derives the team's flag
and answers yes or no), so neither CTFd nor the plugin ever holds a flag;
a challenge may instead keep CTFd's own flags (flag mode "ctfd"). A wrong
submission that kopc says is another team's flag (sharedFrom) is recorded
(KopcSharedFlag) and listed on the admin page: when, who submitted it, whose
flag it was, which challenge. A correct one that stopped the instance
(spec.stopOnSolve) says so to the player.

A player may use a challenge's instance as CTFd's own challenge API lets
them see and attempt it: logged in, the CTF's challenge visibility, a
verified email when the CTF requires one (CTFd's decorators), the
challenge neither hidden (404) nor locked (403), released and in a module
the player may open (CTFd's can_access_challenge), its prerequisites solved
(403). Admins pass. Starts and renewals also need the CTF running.

Teams map to kopc teams by id (mapping.py). A team that is deleted or
banned (a user, in user mode) has its instances stopped once the change is
committed.

Configuration: KOPC_API_URL and KOPC_ADMIN_TOKEN in CTFd's environment, or
the admin page /admin/kopc (the environment wins; the token is never shown).
"""

import datetime
import logging
import os

from flask import Blueprint, abort, g, has_request_context, jsonify, render_template, request
from sqlalchemy import event, inspect
from sqlalchemy.exc import SQLAlchemyError

from CTFd.exceptions.challenges import ChallengeCreateException, ChallengeUpdateException
from CTFd.models import Challenges, Solves, Teams, Users, db
from CTFd.plugins import register_admin_plugin_menu_bar, register_plugin_assets_directory
from CTFd.plugins.challenges import CHALLENGE_CLASSES, BaseChallenge, ChallengeResponse
from CTFd.plugins.migrations import upgrade
from CTFd.utils import get_config, set_config
from CTFd.utils.config import is_teams_mode
from CTFd.utils.dates import ctf_ended, ctf_paused, ctftime
from CTFd.utils.decorators import admins_only, authed_only, require_verified_emails
from CTFd.utils.decorators.visibility import check_challenge_visibility
from CTFd.utils.modules import can_access_challenge
from CTFd.utils.user import get_current_team, get_current_user, is_admin

from .client import KopcClient, KopcError
from .mapping import (
    NOT_CONFIGURED,
    challenge_refusal,
    flag_verdict,
    instance_error,
    kopc_account,
    kopc_team,
    player_view,
    shared_record,
    valid_definition,
)

PLUGIN = "kopc_ctfd"
SHARED_SHOWN = 500  # the newest shared-flag submissions the admin page lists
ASSETS = f"/plugins/{PLUGIN}/assets/"
FLAG_MODES = ("kopc", "ctfd")
log = logging.getLogger(PLUGIN)


# ---- configuration ----------------------------------------------------------------


def settings():
    """(url, token) of the kopc API: the environment first, then the admin page's."""
    url = os.environ.get("KOPC_API_URL") or get_config("kopc_api_url") or ""
    token = os.environ.get("KOPC_ADMIN_TOKEN") or get_config("kopc_admin_token") or ""
    return url, token


def client():
    url, token = settings()
    if not url or not token:
        raise KopcError(NOT_CONFIGURED, 503, "NotConfigured")
    return KopcClient(url, token)


# ---- the challenge type -----------------------------------------------------------


class KopcChallengeModel(Challenges):
    __tablename__ = "kopc_challenge"
    __mapper_args__ = {"polymorphic_identity": "kopc"}
    id = db.Column(db.Integer, db.ForeignKey("challenges.id", ondelete="CASCADE"), primary_key=True)
    kopc_definition = db.Column(db.String(253), nullable=False, default="")
    kopc_flag = db.Column(db.String(16), nullable=False, default="kopc")


class KopcSharedFlag(db.Model):
    """A wrong submission that was another team's flag, as kopc attributed it.
    Names are copied when recorded (mapping.shared_record), so the row still
    reads after a rename; no foreign keys, so deleting an account or a
    challenge does not delete the evidence."""

    __tablename__ = "kopc_shared_flag"
    id = db.Column(db.Integer, primary_key=True)
    date = db.Column(db.DateTime, default=datetime.datetime.utcnow, index=True)
    submitter = db.Column(db.String(63), nullable=False)  # the submitting account's kopc team
    owner = db.Column(db.String(63), nullable=False)  # the kopc team whose flag it was
    owner_name = db.Column(db.String(128), nullable=False, default="")
    user_id = db.Column(db.Integer)
    user_name = db.Column(db.String(128), nullable=False, default="")
    account_name = db.Column(db.String(128), nullable=False, default="")
    challenge_id = db.Column(db.Integer, nullable=False)
    challenge_name = db.Column(db.String(128), nullable=False, default="")


def account_name(team):
    """The CTFd name of the account a kopc team stands for, or None."""
    acct = kopc_account(team)
    if acct is None:
        return None
    model = Teams if acct[0] == "team" else Users
    row = model.query.filter_by(id=acct[1]).first()
    return row.name if row is not None else None


def record_shared(user, team, owner, challenge):
    """Records that user (of kopc team team) submitted owner's flag of challenge.
    A failure to record is logged, never the player's problem."""
    try:
        own = get_current_team() if is_teams_mode() else user
        row = shared_record(team, owner, account_name(owner), user.id, user.name, own.name if own else "",
                            challenge.id, challenge.name)
        db.session.add(KopcSharedFlag(**row))
        db.session.commit()
        log.warning("kopc: %s (%s) submitted the flag of %s for challenge %s", user.name, team, owner, challenge.name)
    except SQLAlchemyError as e:
        db.session.rollback()
        log.error("kopc: a shared flag (%s submitted %s's) could not be recorded: %s", team, owner, e)


def check_fields(data, exc):
    """Refuses a definition name kopc could not have and an unknown flag mode."""
    if "kopc_definition" in data:
        name = data["kopc_definition"]
        if not valid_definition(name):
            raise exc("kopc_definition must be a ChallengeDefinition's name (a DNS name)")
        try:
            offered = client().definitions()
        except KopcError as e:
            raise exc(f"cannot ask kopc for its definitions: {e}")
        if name not in offered:
            raise exc(f"kopc has no ChallengeDefinition named {name} in its challenge namespace")
    if "kopc_flag" in data and data["kopc_flag"] not in FLAG_MODES:
        raise exc("kopc_flag must be kopc (kopc checks the team's flag) or ctfd (CTFd's flags)")


class KopcInstanceChallenge(BaseChallenge):
    id = "kopc"
    name = "kopc instance"
    templates = {
        "create": ASSETS + "create.html",
        "update": ASSETS + "update.html",
        "view": ASSETS + "view.html",
    }
    scripts = {
        "create": ASSETS + "create.js",
        "update": ASSETS + "update.js",
        "view": ASSETS + "view.js",
    }
    route = ASSETS
    challenge_model = KopcChallengeModel

    @classmethod
    def create(cls, request):
        data = request.form or request.get_json() or {}
        if "kopc_definition" not in data:
            raise ChallengeCreateException("kopc_definition is required: the kopc ChallengeDefinition")
        check_fields(data, ChallengeCreateException)
        return super().create(request)

    @classmethod
    def read(cls, challenge):
        challenge = KopcChallengeModel.query.filter_by(id=challenge.id).first()
        data = super().read(challenge)
        data.update({"kopc_definition": challenge.kopc_definition, "kopc_flag": challenge.kopc_flag})
        return data

    @classmethod
    def update(cls, challenge, request):
        check_fields(request.form or request.get_json() or {}, ChallengeUpdateException)
        return super().update(challenge, request)

    @classmethod
    def attempt(cls, challenge, request):
        if challenge.kopc_flag != "kopc":
            return super().attempt(challenge, request)
        data = request.form or request.get_json()
        submission = str(data.get("submission", "")).strip()
        team = account_team(get_current_user())
        if not submission or team is None:
            return ChallengeResponse(status="incorrect", message="Incorrect")
        try:
            answer = client().check_flag(team, challenge.kopc_definition, submission)
        except KopcError as e:
            # A refusal is not a wrong flag, but CTFd knows no third answer:
            # say why, so the player retries rather than doubts the flag.
            return ChallengeResponse(status="incorrect", message=f"The flag could not be checked: {e}")
        correct, shared_from, stopped = flag_verdict(answer, team)
        if shared_from:
            # The player is told "Incorrect" as for any wrong flag: the record is for the organizers.
            record_shared(get_current_user(), team, shared_from, challenge)
        if stopped:
            return ChallengeResponse(status="correct", message="Correct. Your instance has been stopped: it is no longer needed.")
        return ChallengeResponse(
            status="correct" if correct else "incorrect", message="Correct" if correct else "Incorrect"
        )


# ---- players' routes -----------------------------------------------------------------


def account_team(user):
    """The kopc team of user's account (its team in team mode), or None."""
    if user is None:
        return None
    if is_teams_mode():
        return kopc_team(team_id=user.team_id) if user.team_id else None
    return kopc_team(user_id=user.id)


def player_challenge(challenge_id):
    """The kopc challenge the current player may use, or an abort (404 or 403)."""
    chal = KopcChallengeModel.query.filter_by(id=challenge_id).first()
    if chal is None:
        abort(404)
    if is_admin():
        return chal
    user = get_current_user()
    if not can_access_challenge(chal, user):  # not released yet, or in a module closed to them
        abort(404)
    solved, existing = (), ()
    if (chal.requirements or {}).get("prerequisites"):
        solved = {s.challenge_id for s in Solves.query.filter_by(account_id=user.account_id).all()}
        existing = {c.id for c in Challenges.query.with_entities(Challenges.id).all()}
    code = challenge_refusal(chal.state, chal.requirements, solved, existing)
    if code:
        abort(code)
    return chal


def answer(view, status=200):
    return jsonify({"success": True, "data": view, "error": instance_error(view)}), status


def refusal(e):
    return jsonify({"success": False, "error": str(e), "code": e.code}), e.status


bp = Blueprint(PLUGIN, __name__, template_folder="templates")


@bp.route("/plugins/kopc_ctfd/api/instances/<int:challenge_id>", methods=["GET", "PUT", "DELETE"])
@bp.route("/plugins/kopc_ctfd/api/instances/<int:challenge_id>/renew", methods=["POST"])
@authed_only
@check_challenge_visibility
@require_verified_emails
def instance_route(challenge_id):
    chal = player_challenge(challenge_id)
    user = get_current_user()
    team = account_team(user)
    if team is None:
        return jsonify({"success": False, "error": "Join or create a team first."}), 403
    writes = request.method != "GET" and request.method != "DELETE"
    if writes and not is_admin() and (not ctftime() or ctf_paused() or ctf_ended()):
        return jsonify({"success": False, "error": "The CTF is not running, so instances cannot start."}), 403
    definition = chal.kopc_definition
    try:
        kopc = client()
        if request.method == "GET":
            return answer(player_view(kopc.instance(team, definition), definition))
        if request.method == "PUT":
            return answer(player_view(kopc.start(team, definition), definition))
        if request.method == "DELETE":
            return answer(player_view(kopc.stop(team, definition), definition))
        return answer(player_view(kopc.renew(team, definition), definition))
    except KopcError as e:
        return refusal(e)


# ---- the admin page ---------------------------------------------------------------------


@bp.route("/admin/kopc", methods=["GET", "POST"])
@admins_only
def admin_page():
    message = None
    if request.method == "POST":
        set_config("kopc_api_url", request.form.get("api_url", "").strip())
        token = request.form.get("admin_token", "")
        if token:
            set_config("kopc_admin_token", token.strip())
        message = "Saved."
    url, token = settings()
    reachable = None
    if url and token:
        try:
            reachable = f"kopc offers {len(client().definitions())} challenge definition(s)."
        except KopcError as e:
            reachable = str(e)
    shared = KopcSharedFlag.query.order_by(KopcSharedFlag.id.desc()).limit(SHARED_SHOWN).all()
    return render_template(
        "kopc_admin.html",
        shared=shared,
        shared_total=KopcSharedFlag.query.count(),
        shared_shown=SHARED_SHOWN,
        api_url=get_config("kopc_api_url") or "",
        env_url=bool(os.environ.get("KOPC_API_URL")),
        env_token=bool(os.environ.get("KOPC_ADMIN_TOKEN")),
        token_set=bool(token),
        reachable=reachable,
        message=message,
    )


# ---- stopping the instances of deleted and banned teams ----------------------------------

# A change to an account is noted during the flush (no SQL may run there),
# moved to the request once the transaction commits (a rollback forgets it),
# and acted on after the request, where the mode and the settings can be read.
PENDING = "kopc_ctfd_stop"


def account_hook(kind, deleted):
    def hook(mapper, connection, target):
        if deleted or (target.banned and inspect(target).attrs.banned.history.has_changes()):
            db.session().info.setdefault(PENDING, set()).add((kind, target.id))

    return hook


def after_commit(session):
    done = session.info.pop(PENDING, None)
    if done and has_request_context():
        g.setdefault(PENDING, set()).update(done)


def after_rollback(session, previous_transaction):
    session.info.pop(PENDING, None)


def stop_all(team):
    """Stops every instance of a kopc team (a deleted or banned CTFd account)."""
    try:
        kopc = client()
        for inst in kopc.instances(team):
            kopc.stop(team, inst.get("challenge"))
            log.info("kopc: stopped %s of %s (account deleted or banned)", inst.get("challenge"), team)
    except KopcError as e:
        log.warning("kopc: cannot stop the instances of %s: %s", team, e)


def stop_after_request(response):
    pending = g.pop(PENDING, None)
    if pending:
        teams_mode = is_teams_mode()
        for kind, account_id in sorted(pending):
            if (kind == "team") == teams_mode:
                stop_all(kopc_team(team_id=account_id) if kind == "team" else kopc_team(user_id=account_id))
    return response


def listen_accounts(app):
    for model, kind in ((Teams, "team"), (Users, "user")):
        event.listen(model, "after_update", account_hook(kind, False))
        event.listen(model, "after_delete", account_hook(kind, True))
    event.listen(db.session, "after_commit", after_commit)
    event.listen(db.session, "after_soft_rollback", after_rollback)
    app.after_request(stop_after_request)


# ---- load ------------------------------------------------------------------------------


def load(app):
    upgrade(plugin_name=PLUGIN)
    CHALLENGE_CLASSES["kopc"] = KopcInstanceChallenge
    register_plugin_assets_directory(app, base_path=ASSETS)
    register_admin_plugin_menu_bar("kopc", "/admin/kopc")
    app.register_blueprint(bp)
    listen_accounts(app)
