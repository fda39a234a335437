#!/usr/bin/env python3
"""ctfd_test.py - kopc inside the real CTFd 3.8.7, driven through CTFd's own
setup, its REST API and the plugin's routes, as CTFd's pages do (session
cookie and CSRF nonce), against the CTF operator on a real node.

Run by ctfd_test.sh, which starts the devcluster, the operator and CTFd and
passes, in the environment: CTFD (CTFd's URL), API and ADMIN_TOKEN (kopc's),
KUBECTL and KUBECONFIG (to add a definition), PASSED_FILE, and STATE_FILE
(where this writes what the browser test needs: a player's name and password
and the challenge's id).

Besides the players' path, it checks what organizers see: a player who
submits another team's flag is told "Incorrect" and the plugin's admin page
lists it (when, who, whose flag, which challenge), a made-up flag is not
listed; and with spec.stopOnSolve a correct flag submitted through CTFd
stops the team's instance in kopc.

Checks print "ok N - what" or raise; waits poll a condition with a generous
bound and never assert a duration.
"""
import html
import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request

import requests

from e2e_check import Fail, check, greeting, log, not_error, ok, wait

CTFD = os.environ["CTFD"].rstrip("/")
API = os.environ["API"]
ADMIN = os.environ["ADMIN_TOKEN"]
STATE_FILE = os.environ["STATE_FILE"]
KUBECTL = os.environ["KUBECTL"]
KUBECONFIG = os.environ["KUBECONFIG"]
PLUGIN = CTFD + "/plugins/kopc_ctfd/api/instances/"

# ---- kopc, asked directly with its admin token (the truth the plugin must show) ----


def kopc(method, path):
    req = urllib.request.Request(API + path, method=method, headers={"Authorization": "Bearer " + ADMIN})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def kopc_instances(team):
    status, body = kopc("GET", f"/api/v1/teams/{team}/instances")
    check(status == 200, f"kopc GET instances of {team}: {status} {body}")
    return body["instances"]


# ---- CTFd, as a browser talks to it ------------------------------------------------


def nonce_of(html):
    m = re.search(r"'csrfNonce': \"([0-9a-f]+)\"", html) or re.search(r'name="nonce"[^>]*value="([0-9a-f]+)"', html)
    check(m, "no CSRF nonce in CTFd's page")
    return m.group(1)


class Browser:
    """A requests session with CTFd's cookie and CSRF nonce, as its pages use them."""

    def __init__(self):
        self.s = requests.Session()
        self.nonce = None

    def page(self, path):
        r = self.s.get(CTFD + path, timeout=30)
        check(r.status_code == 200, f"GET {path}: {r.status_code}")
        self.nonce = nonce_of(r.text)
        return r

    def form(self, path, data):
        self.page(path)
        r = self.s.post(CTFD + path, data={**data, "nonce": self.nonce}, timeout=30, allow_redirects=False)
        check(r.status_code in (200, 302, 303), f"POST {path}: {r.status_code} {r.text[:300]}")
        return r

    def login(self, name, password):
        r = self.form("/login", {"name": name, "password": password})
        check(r.status_code in (302, 303), f"login {name}: {r.status_code} (wrong password?)")
        self.page("/challenges")

    def call(self, method, url, body=None):
        headers = {"CSRF-Token": self.nonce, "Accept": "application/json"}
        r = self.s.request(method, url, json=body if body is not None else ({} if method != "GET" else None),
                           headers=headers, timeout=60)
        try:
            parsed = r.json()
        except ValueError:
            parsed = None
        return r.status_code, parsed

    def instance(self, cid, method="GET", tail=""):
        return self.call(method, PLUGIN + str(cid) + tail)

    def attempt(self, cid, submission):
        status, body = self.call("POST", CTFD + "/api/v1/challenges/attempt",
                                 {"challenge_id": cid, "submission": submission})
        check(status == 200 and body and body.get("success"), f"attempt: {status} {body}")
        return body["data"]


class Admin:
    """CTFd's REST API with an admin access token (Authorization: Token)."""

    def __init__(self, token):
        self.s = requests.Session()
        self.s.headers.update({"Authorization": "Token " + token, "Content-Type": "application/json"})

    def call(self, method, path, body=None):
        r = self.s.request(method, CTFD + "/api/v1" + path, json=body, timeout=60)
        try:
            parsed = r.json()
        except ValueError:
            parsed = None
        return r.status_code, parsed

    def create(self, path, body):
        status, parsed = self.call("POST", path, body)
        check(status == 200 and parsed and parsed.get("success"), f"POST {path}: {status} {parsed}")
        return parsed["data"]


# ---- set-up through CTFd's own pages and API ---------------------------------------


def setup():
    log("CTFd set up through /setup, an admin token, two teams of one player, two kopc challenges")
    admin_pw = secrets.token_hex(12)
    b = Browser()
    r = b.form("/setup", {"ctf_name": "kopc e2e", "ctf_description": "", "user_mode": "teams",
                          "name": "admin", "email": "admin@example.com", "password": admin_pw,
                          "ctf_theme": "core", "start": "", "end": ""})
    check(r.status_code in (302, 303), f"/setup answered {r.status_code}")
    b.page("/admin/challenges")
    status, body = b.call("POST", CTFD + "/api/v1/tokens", {"description": "e2e"})
    check(status == 200 and body["data"]["value"].startswith("ctfd_"), f"admin token: {status} {body}")
    adm = Admin(body["data"]["value"])
    page = b.s.get(CTFD + "/admin/kopc", timeout=30)
    check(page.status_code == 200 and re.search(r"kopc offers \d+ challenge definition", page.text),
          f"the plugin's admin page: {page.status_code} {page.text[:300]}")
    check(ADMIN not in page.text, "the plugin's admin page shows kopc's admin token")
    ok("CTFd set up in team mode through its setup page; an admin access token made; the plugin's "
       "admin page sees kopc and never shows its token")

    players = {}
    for team_name, player in (("Red Team", "alice"), ("Blue Team!", "bob"), ("Green", "carol")):
        pw = secrets.token_hex(10)
        user = adm.create("/users", {"name": player, "email": f"{player}@example.com", "password": pw})
        team = adm.create("/teams", {"name": team_name, "email": f"{player}-team@example.com",
                                     "password": secrets.token_hex(10)})
        adm.create(f"/teams/{team['id']}/members", {"user_id": user["id"]})
        players[player] = {"password": pw, "team_id": team["id"], "kopc_team": f"team-{team['id']}",
                           "team_name": team_name, "user_id": user["id"]}
    ok("three teams with one player each, made through CTFd's API (names kopc could not use, too)")

    # A definition kopc does not have is refused when the challenge is made.
    status, body = adm.call("POST", "/challenges", {"name": "Nope", "category": "x", "description": "x",
                                                    "value": 1, "state": "visible", "type": "kopc",
                                                    "kopc_definition": "no-such-definition"})
    check(status >= 400 and "no ChallengeDefinition named no-such-definition" in json.dumps(body),
          f"a challenge naming a missing definition: {status} {body}")
    status, body = adm.call("POST", "/challenges", {"name": "Bad", "category": "x", "description": "x",
                                                    "value": 1, "state": "visible", "type": "kopc",
                                                    "kopc_definition": "Not A Name"})
    check(status >= 400 and "DNS name" in json.dumps(body), f"a challenge with a bad name: {status} {body}")
    nc = adm.create("/challenges", {"name": "Greeter", "category": "pwn", "value": 100, "state": "visible",
                                    "description": "Connect and it greets you.", "type": "kopc",
                                    "kopc_definition": "nc", "kopc_flag": "kopc"})
    web = adm.create("/challenges", {"name": "Robots", "category": "web", "value": 50, "state": "visible",
                                     "description": "Read robots.txt.", "type": "kopc",
                                     "kopc_definition": "web", "kopc_flag": "ctfd"})
    adm.create("/flags", {"challenge": web["id"], "content": "flag{r0b0ts_txt_t3lls_4ll}", "type": "static"})
    check(nc["type"] == "kopc" and nc["kopc_definition"] == "nc", f"the challenge as CTFd reads it: {nc}")
    ok("kopc challenges made through CTFd's admin API (a missing definition and a bad name refused)")
    return b, adm, players, nc["id"], web["id"]


# ---- who may use a challenge's instance ----------------------------------------------


def raw(b, method, url):
    """One request as b, redirects not followed: (status, Location)."""
    headers = {"CSRF-Token": b.nonce, "Accept": "application/json"}
    r = b.s.request(method, url, json={} if method != "GET" else None, headers=headers, timeout=60,
                    allow_redirects=False)
    return r.status_code, r.headers.get("Location", "")


def refused(b, cid, codes, team, what):
    """Every route of challenge cid answers one of codes to b, and kopc has no instance of team."""
    for method, tail in (("PUT", ""), ("POST", "/renew"), ("GET", ""), ("DELETE", "")):
        status, where = raw(b, method, PLUGIN + str(cid) + tail)
        check(status in codes, f"{what}: {method} {tail or '/'} answered {status} {where} (want {codes})")
    check(kopc_instances(team) == [], f"{what}: kopc has an instance of {team}: {kopc_instances(team)}")


def access(adm, players, nc, web):
    log("the plugin's routes refuse whom CTFd's challenge API refuses")
    alice = Browser()
    alice.login("alice", players["alice"]["password"])
    team = players["alice"]["kopc_team"]

    def kopc_challenge(name, **extra):
        return adm.create("/challenges", {"name": name, "category": "x", "value": 10, "state": "visible",
                                          "description": name, "type": "kopc", "kopc_definition": "nc",
                                          **extra})["id"]

    hidden = kopc_challenge("Hidden", state="hidden")
    refused(alice, hidden, (404,), team, "a hidden challenge")
    locked = kopc_challenge("Locked", state="locked")
    refused(alice, locked, (403,), team, "a locked challenge")
    ok("a hidden challenge's instance routes answer 404 and a locked one's 403 to a player; nothing started")

    gated = kopc_challenge("Gated", requirements={"prerequisites": [web]})
    refused(alice, gated, (403,), team, "a challenge whose prerequisite is unsolved")
    gone = kopc_challenge("Was gated", requirements={"prerequisites": [987654]})
    status, body = alice.instance(gone)
    check(status == 200 and body["data"]["state"] == "Stopped",
          f"a challenge whose only prerequisite does not exist (CTFd ignores it): {status} {body}")
    ok("a challenge whose prerequisites are unsolved answers 403 and starts nothing; a prerequisite "
       "naming no challenge does not count, as in CTFd")

    status, body = adm.call("PATCH", "/configs", {"challenge_visibility": "admins"})
    check(status == 200, f"challenge visibility admins: {status} {body}")
    refused(alice, nc, (403,), team, "challenges visible to admins only")
    status, body = adm.call("PATCH", "/configs", {"challenge_visibility": "private"})
    check(status == 200, f"challenge visibility private: {status} {body}")
    ok("with challenges visible to admins only, a player's instance routes answer 403")

    # Players made through the admin API are unverified; with verify_emails on,
    # CTFd's decorator answers a JSON request 403 and sends a page to /confirm.
    status, body = adm.call("PATCH", "/configs", {"verify_emails": True})
    check(status == 200, f"verify_emails on: {status} {body}")
    for method, tail in (("PUT", ""), ("POST", "/renew"), ("GET", "")):
        st, where = raw(alice, method, PLUGIN + str(nc) + tail)
        check(st == 403 or (st in (302, 303) and "/confirm" in where),
              f"an unverified player's {method} {tail or '/'}: {st} {where}")
    check(kopc_instances(team) == [], f"an unverified player started an instance: {kopc_instances(team)}")
    status, body = adm.call("PATCH", f"/users/{players['alice']['user_id']}", {"verified": True})
    check(status == 200, f"verify alice: {status} {body}")
    status, body = alice.instance(nc)
    check(status == 200 and body["data"]["state"] == "Stopped", f"a verified player's GET: {status} {body}")
    status, body = adm.call("PATCH", "/configs", {"verify_emails": False})
    check(status == 200, f"verify_emails off: {status} {body}")
    ok("with verify_emails on, an unverified player cannot start (403, or /confirm for a page); once "
       "verified, the routes answer")

    for cid in (hidden, locked, gated, gone):
        status, body = adm.call("DELETE", f"/challenges/{cid}")
        check(status == 200, f"delete challenge {cid}: {status} {body}")


# ---- the scenario --------------------------------------------------------------------


def flag_from(addr):
    def once():
        try:
            line = greeting(addr, timeout=2)
        except OSError:
            return None
        return line.split("Your flag: ", 1)[1].strip() if "Your flag: " in line else None
    return wait(30, f"the greeting with a flag from {addr}", once)


def running(b, cid):
    status, body = b.instance(cid)
    check(status == 200, f"GET instance: {status} {body}")
    not_error(body["data"], f"challenge {cid}'s instance")
    return body["data"] if body["data"]["state"] == "Running" else None


def start_and_play(b, cid, player):
    status, body = b.instance(cid)
    check(status == 200 and body["data"]["state"] == "Stopped", f"before Start: {status} {body}")
    status, body = b.instance(cid, "PUT")
    check(status == 200 and body["data"]["state"] in ("Starting", "Running"), f"Start: {status} {body}")
    view = wait(180, f"{player['kopc_team']}'s instance Running", lambda: running(b, cid), every=0.5)
    eps = view["endpoints"]
    check(len(eps) == 1 and eps[0]["type"] == "TCP" and ":" in eps[0]["address"], f"endpoints: {eps}")
    check("flag" not in json.dumps(view).lower(), f"the plugin's view mentions a flag: {view}")
    mine = kopc_instances(player["kopc_team"])
    check([i["challenge"] for i in mine] == ["nc"] and mine[0]["state"] == "Running",
          f"kopc's view of {player['kopc_team']}: {mine}")
    return view, flag_from(eps[0]["address"])


def scenario(adm, players, nc, web):
    log("players start instances through CTFd, read their flags, submit them")
    alice, bob, carol = Browser(), Browser(), Browser()
    alice.login("alice", players["alice"]["password"])
    bob.login("bob", players["bob"]["password"])
    carol.login("carol", players["carol"]["password"])
    status = requests.get(PLUGIN + str(nc), timeout=30, allow_redirects=False).status_code
    check(status in (302, 401, 403), f"the plugin's route without a login: {status}")
    status = requests.put(PLUGIN + str(nc), timeout=30, allow_redirects=False, json={}).status_code
    check(status in (302, 401, 403), f"a Start without a login: {status}")
    ok("players log in through CTFd's login form; the plugin's routes need a login")

    va, flag_a = start_and_play(alice, nc, players["alice"])
    vb, flag_b = start_and_play(bob, nc, players["bob"])
    check(flag_a != flag_b and flag_a.startswith("flag{"), f"flags {flag_a} {flag_b}")
    check(va["endpoints"] != vb["endpoints"], "two teams got the same endpoint")
    ok(f"each team's instance runs on the real node under its kopc team (team-<CTFd id>), "
       f"answers at its own endpoint, and greets with its own flag")

    status, body = alice.instance(nc)
    check(body["data"]["state"] == "Running" and body["data"]["endpoints"] == va["endpoints"],
          f"a second look: {body}")
    ok("asked again (a page reload), the plugin shows the same Running instance")

    r = bob.attempt(nc, flag_a)
    check(r["status"] == "incorrect", f"bob submits alice's flag: {r}")
    r = alice.attempt(nc, flag_a)
    check(r["status"] == "correct", f"alice submits her flag: {r}")
    r = bob.attempt(nc, "flag{" + "0" * 32 + "}")
    check(r["status"] == "incorrect", f"a made-up flag: {r}")
    r = bob.attempt(nc, flag_b)
    check(r["status"] == "correct", f"bob submits his own flag: {r}")
    ok("CTFd asks kopc: a team's own flag is correct, another team's and a made-up one incorrect")

    log("extend, quota, stop")
    before = va["expiresAt"]
    status, body = alice.instance(nc, "POST", "/renew")
    check(status == 200 and body["data"]["expiresAt"] > before, f"extend: {status} {body} (was {before})")
    ok(f"Extend moves the expiry ({before} -> {body['data']['expiresAt']})")

    status, body = alice.instance(web, "PUT")
    check(status == 409 and body["success"] is False and "as many instances as it may" in body["error"],
          f"a second instance over the team's quota: {status} {body}")
    check(kopc_instances(players["alice"]["kopc_team"])[0]["challenge"] == "nc", "the refused start made something")
    ok(f"kopc's quota refusal reaches the player in plain words: {body['error']!r}")

    status, body = alice.instance(nc, "DELETE")
    check(status == 200 and body["data"]["state"] in ("Stopping", "Stopped"), f"Stop: {status} {body}")
    wait(120, "alice's instance gone", lambda: alice.instance(nc)[1]["data"]["state"] == "Stopped")
    check(kopc_instances(players["alice"]["kopc_team"]) == [], "kopc still has alice's instance")
    r = alice.attempt(web, "flag{r0b0ts_txt_t3lls_4ll}")
    check(r["status"] == "correct", f"a CTFd flag of a kopc challenge in ctfd mode: {r}")
    ok("Stop ends the instance in kopc; a challenge in flag mode ctfd keeps CTFd's own flags")

    log("a banned team and a deleted team lose their instances")
    status, body = carol.instance(nc, "PUT")
    check(status == 200, f"carol starts: {status} {body}")
    # kopc lists instances from its cache, which sees a new Challenge one watch event after
    # the create: wait for it as a page polling the list would.
    wait(30, "carol's instance listed by kopc", lambda: kopc_instances(players["carol"]["kopc_team"]))
    status, body = adm.call("PATCH", f"/teams/{players['bob']['team_id']}", {"banned": True})
    check(status == 200, f"ban bob's team: {status} {body}")
    wait(60, "the banned team's instances stopped",
         lambda: all(i["state"] == "Stopping" for i in kopc_instances(players["bob"]["kopc_team"])))
    status, body = adm.call("DELETE", f"/teams/{players['carol']['team_id']}")
    check(status == 200, f"delete carol's team: {status} {body}")
    wait(60, "the deleted team's instances stopped",
         lambda: all(i["state"] == "Stopping" for i in kopc_instances(players["carol"]["kopc_team"])))
    ok("banning a team and deleting a team stop their kopc instances")

    with open(STATE_FILE, "w") as f:
        json.dump({"player": "alice", "password": players["alice"]["password"], "challenge_id": nc,
                   "challenge_name": "Greeter"}, f)


# ---- what the organizers see: shared flags, stop on solve ------------------------------


def shared_rows(admin_browser):
    """The plugin's admin list of shared flags, parsed from its page: one dict a row."""
    r = admin_browser.s.get(CTFD + "/admin/kopc", timeout=30)
    check(r.status_code == 200, f"the plugin's admin page: {r.status_code}")
    rows = []
    for tr in re.findall(r'<tr class="kopc-shared-row"(.*?)>', r.text, re.S):
        rows.append({k: html.unescape(v) for k, v in re.findall(r'data-([a-z-]+)="([^"]*)"', tr)})
    return rows


def admin_list(admin_browser, players, nc):
    log("the plugin's admin page lists the shared flag")
    rows = shared_rows(admin_browser)
    check(len(rows) == 1, f"the admin list of shared flags has {len(rows)} rows, want bob's one: {rows}")
    row = rows[0]
    want = {"user": "bob", "account": "Blue Team!", "submitter": players["bob"]["kopc_team"],
            "owner": players["alice"]["kopc_team"], "owner-name": "Red Team", "challenge": "Greeter",
            "challenge-id": str(nc)}
    check({k: row.get(k) for k in want} == want, f"the shared flag's row {row}, want {want}")
    when = row.get("when", "")
    check(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", when), f"the row's time: {when!r}")
    page = admin_browser.s.get(CTFD + "/admin/kopc", timeout=30).text
    check(ADMIN not in page, "the plugin's admin page shows kopc's admin token")
    ok("bob's submission of alice's flag (CTFd told him Incorrect) is listed on the plugin's admin page: when, "
       "bob of Blue Team!, Red Team's flag, the challenge Greeter; the made-up flag is not listed")


def kubectl(*args, stdin=None):
    r = subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, "--request-timeout=30s", *args],
                       capture_output=True, text=True, input=stdin)
    check(r.returncode == 0, f"kubectl {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def stop_on_solve(adm, players):
    log("stop on solve: a correct flag through CTFd stops the team's instance")
    d = json.loads(kubectl("-n", "ctf", "get", "chaldef", "nc", "-o", "json"))
    d["metadata"] = {"name": "nc-solve", "namespace": "ctf"}
    d.pop("status", None)
    d["spec"]["stopOnSolve"] = True
    kubectl("apply", "-f", "-", stdin=json.dumps(d))
    wait(60, "kopc to offer nc-solve", lambda: "nc-solve" in {
        c["name"] for c in kopc("GET", "/api/v1/challenges")[1]["challenges"]})
    cid = adm.create("/challenges", {"name": "Solver", "category": "pwn", "value": 10, "state": "visible",
                                     "description": "Solve it and it goes.", "type": "kopc",
                                     "kopc_definition": "nc-solve", "kopc_flag": "kopc"})["id"]
    alice = Browser()
    alice.login("alice", players["alice"]["password"])
    team = players["alice"]["kopc_team"]
    wait(120, f"{team} to hold no instance (one a team)", lambda: kopc_instances(team) == [])
    status, body = alice.instance(cid, "PUT")
    check(status == 200 and body["data"]["state"] in ("Starting", "Running"), f"Start Solver: {status} {body}")
    view = wait(180, "alice's Solver instance Running", lambda: running(alice, cid), every=0.5)
    flag = flag_from(view["endpoints"][0]["address"])
    r = alice.attempt(cid, "flag{" + "1" * 32 + "}")
    check(r["status"] == "incorrect", f"a wrong flag of Solver: {r}")
    check([i["challenge"] for i in kopc_instances(team)] == ["nc-solve"], "a wrong flag stopped the instance")
    r = alice.attempt(cid, flag)
    check(r["status"] == "correct" and "stopped" in r["message"], f"alice's flag of Solver: {r}")
    wait(120, "alice's Solver instance stopped in kopc", lambda: all(
        i["state"] == "Stopping" for i in kopc_instances(team)))
    wait(120, "alice's Solver instance gone", lambda: kopc_instances(team) == [])
    status, body = alice.instance(cid)
    check(status == 200 and body["data"]["state"] == "Stopped", f"the plugin's view after the solve: {status} {body}")
    status, body = adm.call("DELETE", f"/challenges/{cid}")
    check(status == 200, f"delete Solver: {status} {body}")
    ok(f"with stopOnSolve, a wrong flag through CTFd stops nothing; alice's correct flag is Correct ({r['message']!r}) "
       f"and kopc stops and removes her instance")


def main():
    try:
        admin_browser, adm, players, nc, web = setup()
        access(adm, players, nc, web)
        scenario(adm, players, nc, web)
        admin_list(admin_browser, players, nc)
        stop_on_solve(adm, players)
    except Fail as e:
        print(f"FAIL: {e}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
