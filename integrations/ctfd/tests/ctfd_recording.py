"""ctfd_recording.py - the recording of shared flags inside the real CTFd
3.8.7 (its own app factory and test helpers, SQLite in memory), with the
plugin loaded as CTFd loads plugins: a player's submission through CTFd's
attempt route that kopc answers with sharedFrom is recorded (who, their
team, whose flag by CTFd name, which challenge, when) and listed on the
plugin's admin page; a plain wrong flag and a correct one are not; a
correct flag that kopc says stopped the instance tells the player so; the
row outlives the owner's team being deleted.

The admin page's instance overview, in the same app: every instance kopc
lists with its team's CTFd name, state and reason, age, time left and
endpoint; the filters; pages of 100 at 2,000 instances; the three stops
(one, a team's, a challenge's) reach kopc's admin routes only from an admin
with CTFd's CSRF nonce, and come back to the page with what kopc said;
kopc's errors are the page's error (200), never a 500; a player reaches
neither the page nor its stop.

kopc's answers are given here (KopcClient's calls replaced): what kopc
answers is e2e_ctfd's part, against the real operator. Not named test_*.py:
it needs CTFd's virtual environment, not the system python3 that runs the
pure tests. Run (ctest unit_ctfd_recording does):
    tools/ctfd.sh build/ctfd
    cd build/ctfd/CTFd-3.8.7 && ../venv/bin/python \\
        ../../../integrations/ctfd/tests/ctfd_recording.py
"""

import html
import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.getcwd())  # the CTFd tree: CTFd and its tests.helpers
os.environ.setdefault("KOPC_API_URL", "http://127.0.0.1:9")  # never called: check_flag is replaced
os.environ.setdefault("KOPC_ADMIN_TOKEN", "unused-token")

from tests.helpers import create_ctfd, destroy_ctfd, gen_team, login_as_user  # noqa: E402


class Recording(unittest.TestCase):
    def setUp(self):
        self.app = create_ctfd(user_mode="teams", enable_plugins=True)
        import CTFd.plugins.kopc_ctfd as plugin

        self.plugin = plugin
        self.answers = {}
        self.saved = plugin.KopcClient.check_flag
        plugin.KopcClient.check_flag = lambda _self, team, challenge, flag: self.answers[(team, flag)]

    def tearDown(self):
        self.plugin.KopcClient.check_flag = self.saved
        destroy_ctfd(self.app)

    def rows(self, client):
        r = client.get("/admin/kopc")
        self.assertEqual(r.status_code, 200)
        page = r.get_data(as_text=True)
        return [dict(re.findall(r'data-([a-z-]+)="([^"]*)"', tr))
                for tr in re.findall(r'<tr class="kopc-shared-row"(.*?)>', page, re.S)]

    def test_shared_flag_recorded_and_listed(self):
        from CTFd.models import Teams, db

        p = self.plugin
        with self.app.app_context():
            red = gen_team(db, name="Red Team", email="red@example.com", member_count=1)
            blue = gen_team(db, name="Blue Team!", email="blue@example.com", member_count=1)
            red_id, bob = red.id, blue.members[0].name
            me, owner = f"team-{blue.id}", f"team-{red.id}"
            chal = p.KopcChallengeModel(name="Greeter", category="pwn", description="d", value=10,
                                        state="visible", type="kopc", kopc_definition="nc", kopc_flag="kopc")
            db.session.add(chal)
            db.session.commit()
            cid = chal.id
            self.answers[(me, "flag{red}")] = {"correct": False, "sharedFrom": owner}
            self.answers[(me, "flag{made-up}")] = {"correct": False}
            self.answers[(me, "flag{mine}")] = {"correct": True, "stopped": True}
            self.answers[(me, "flag{self}")] = {"correct": False, "sharedFrom": me}

            c = login_as_user(self.app, name=bob, password="password")
            said = {}
            for flag in ("flag{red}", "flag{made-up}", "flag{self}", "flag{mine}"):
                r = c.post("/api/v1/challenges/attempt", json={"challenge_id": cid, "submission": flag})
                self.assertEqual(r.status_code, 200, r.get_data(as_text=True))
                said[flag] = r.get_json()["data"]
            self.assertEqual(said["flag{red}"], {"status": "incorrect", "message": "Incorrect"})
            self.assertEqual(said["flag{made-up}"]["status"], "incorrect")
            self.assertEqual(said["flag{mine}"]["status"], "correct")
            self.assertIn("stopped", said["flag{mine}"]["message"])

            recorded = p.KopcSharedFlag.query.all()
            self.assertEqual(len(recorded), 1)
            row = recorded[0]
            self.assertEqual((row.submitter, row.owner, row.owner_name, row.user_name, row.account_name,
                              row.challenge_id, row.challenge_name),
                             (me, owner, "Red Team", bob, "Blue Team!", cid, "Greeter"))
            self.assertIsNotNone(row.date)

            admin = login_as_user(self.app, name="admin", password="password")
            listed = self.rows(admin)
            self.assertEqual(len(listed), 1)
            self.assertEqual({k: listed[0][k] for k in ("user", "account", "owner", "owner-name", "challenge")},
                             {"user": bob, "account": "Blue Team!", "owner": owner, "owner-name": "Red Team",
                              "challenge": "Greeter"})
            self.assertRegex(listed[0]["when"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")

            # The evidence outlives the owner's team.
            db.session.delete(Teams.query.filter_by(id=red_id).first())
            db.session.commit()
            self.assertEqual(len(self.rows(admin)), 1)
            # A player never reaches the list.
            self.assertNotEqual(c.get("/admin/kopc").status_code, 200)


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def instance(team, challenge, state="Running", reason=None, message="instance running", port=31000):
    now = time.time()
    return {"team": team, "challenge": challenge, "state": state, "reason": reason, "message": message,
            "endpoints": [{"name": "tcp", "type": "TCP", "address": f"10.0.0.2:{port}"}],
            "createdAt": iso(now - 125), "expiresAt": iso(now + 1800), "secondsLeft": 1800, "renewable": True,
            "events": [{"type": "Normal", "reason": "Running", "message": "m", "count": 1}]}


class AdminOverview(unittest.TestCase):
    """The admin page's instance overview and its stops, kopc's answers given."""

    def setUp(self):
        self.app = create_ctfd(user_mode="teams", enable_plugins=True)
        import CTFd.plugins.kopc_ctfd as plugin

        self.plugin = plugin
        self.calls = []
        self.listing = {"instances": [], "limits": {"maxInstances": 100, "maxInstancesPerTeam": 1},
                        "summary": {"totals": {"room": 97}}}
        self.failure = None  # a KopcError every call raises, when set
        k = plugin.KopcClient
        self.saved = {n: getattr(k, n) for n in ("definitions", "admin_instances", "admin_stop", "admin_stop_team",
                                                 "admin_stop_challenge")}

        def call(name, answer):
            def f(_self, *args):
                self.calls.append((name, *args))
                if self.failure:
                    raise self.failure
                return answer(*args)
            return f

        k.definitions = lambda _self: {"nc", "web"}
        k.admin_instances = call("list", lambda: self.listing)
        k.admin_stop = call("one", lambda team, chal: {"team": team, "challenge": chal, "state": "Stopping"})
        k.admin_stop_team = call("team", lambda team: {"stopped": 2, "failed": 0, "instances": []})
        k.admin_stop_challenge = call("challenge", lambda chal: {"stopped": 3, "failed": 1, "instances": []})

    def tearDown(self):
        for n, f in self.saved.items():
            setattr(self.plugin.KopcClient, n, f)
        destroy_ctfd(self.app)

    def teams(self):
        from CTFd.models import db

        red = gen_team(db, name="Red Team", email="red@example.com", member_count=1)
        blue = gen_team(db, name="Blue <b>Team</b>", email="blue@example.com", member_count=1)
        return f"team-{red.id}", f"team-{blue.id}", blue.members[0].name

    @staticmethod
    def page_of(client, query=""):
        r = client.get("/admin/kopc" + query)
        return r.status_code, r.get_data(as_text=True)

    def rows(self, client, query=""):
        status, page = self.page_of(client, query)
        self.assertEqual(status, 200, page[:500])
        return [{k: html.unescape(v) for k, v in re.findall(r'data-([a-z-]+)="([^"]*)"', tr)}
                for tr in re.findall(r'<tr class="kopc-instance-row"(.*?)>', page, re.S)], page

    def stop(self, client, fields, nonce=True):
        with client.session_transaction() as sess:
            n = sess.get("nonce")
        data = dict(fields, **({"nonce": n} if nonce else {}))
        return client.post("/admin/kopc/stop", data=data)

    def test_lists_and_filters(self):
        with self.app.app_context():
            red, blue, _ = self.teams()
            self.listing["instances"] = [
                instance(blue, "web", "Starting", port=31002),
                instance(red, "nc", port=31001),
                instance(blue, "nc", "Error", "ImagePullFailed", "image x cannot be pulled", port=31003),
                "junk", {"team": "Not A Team", "challenge": "nc"},
            ]
            admin = login_as_user(self.app, name="admin", password="password")
            rows, page = self.rows(admin)
            self.assertEqual([(r["team"], r["team-name"], r["challenge"], r["state"], r["reason"], r["endpoint"])
                              for r in rows],
                             [(red, "Red Team", "nc", "Running", "", "10.0.0.2:31001"),
                              (blue, "Blue <b>Team</b>", "nc", "Error", "ImagePullFailed", "10.0.0.2:31003"),
                              (blue, "Blue <b>Team</b>", "web", "Starting", "", "10.0.0.2:31002")])
            self.assertNotIn("<b>Team</b>", page)  # a team's name is text, never markup
            self.assertIn("image x cannot be pulled", page)
            self.assertRegex(page, r"<td>2:0[5-9]</td>")  # age, created 125 s ago
            self.assertRegex(page, r"<td>(29:[5-9]\d|30:00)</td>")  # time left
            self.assertIn("3 instance(s) of 2 team(s)", page)
            self.assertIn("kopc allows 100 in all (97 room left), 1 a team", page)
            self.assertEqual(page.count('class="btn btn-sm btn-outline-danger kopc-stop"'), 3)
            self.assertNotIn("kopc-stop-team", page)  # no team named whole: no stop-all
            self.assertNotIn("unused-token", page)

            rows, page = self.rows(admin, "?team=Blue+%3Cb%3ETeam%3C%2Fb%3E")
            self.assertEqual([r["challenge"] for r in rows], ["nc", "web"])
            self.assertRegex(page, rf'kopc-stop-team" data-team="{blue}"')
            self.assertIn(f'data-confirm="Stop all 2 instance(s) of team Blue &lt;b&gt;Team&lt;/b&gt; ({blue})?"',
                          page)
            rows, page = self.rows(admin, "?team=red")
            self.assertEqual([r["team"] for r in rows], [red])
            self.assertNotIn("kopc-stop-team", page)
            rows, page = self.rows(admin, "?challenge=nc")
            self.assertEqual([r["team"] for r in rows], [red, blue])
            self.assertIn('kopc-stop-challenge" data-challenge="nc"', page)
            rows, _ = self.rows(admin, "?state=Error")
            self.assertEqual([(r["team"], r["reason"]) for r in rows], [(blue, "ImagePullFailed")])
            rows, page = self.rows(admin, "?team=nobody")
            self.assertEqual(rows, [])
            self.assertIn("No instance matches the filters.", page)

    def test_two_thousand_instances_in_pages(self):
        with self.app.app_context():
            self.listing["instances"] = [instance(f"team-{t}", c, port=30000 + t)
                                         for t in range(1, 1001) for c in ("nc", "web")]
            admin = login_as_user(self.app, name="admin", password="password")
            t0 = time.monotonic()
            rows, page = self.rows(admin)
            first = time.monotonic() - t0
            self.assertEqual(len(rows), 100)
            self.assertIn("Rows 1&ndash;100 of 2000; page 1 of 20, 100 a page.", page)
            self.assertIn('href="?page=2#kopc-instances"', page)
            rows, page = self.rows(admin, "?page=20")
            self.assertEqual((len(rows), rows[-1]["team"]), (100, "team-1000"))
            self.assertIn('href="?page=19#kopc-instances"', page)
            self.assertNotIn("kopc-next", page)
            t0 = time.monotonic()
            rows, page = self.rows(admin, "?challenge=web&state=Running&page=3")
            filtered = time.monotonic() - t0
            self.assertEqual(len(rows), 100)
            self.assertIn("Rows 201&ndash;300 of 1000 (filtered from 2000); page 3 of 10", page)
            self.assertIn('href="?challenge=web&amp;state=Running&amp;page=4#kopc-instances"', page)
            print(f"\n  the admin page with 2,000 instances (kopc's list given): {first * 1000:.0f} ms, "
                  f"filtered to a page of 1,000: {filtered * 1000:.0f} ms", file=sys.stderr)

    def test_stops(self):
        with self.app.app_context():
            red, blue, _ = self.teams()
            self.listing["instances"] = [instance(red, "nc"), instance(blue, "nc")]
            admin = login_as_user(self.app, name="admin", password="password")
            self.rows(admin)
            self.calls.clear()

            r = self.stop(admin, {"kind": "one", "team": red, "challenge": "nc", "back": "?team=Red+Team&page=1"})
            self.assertEqual(r.status_code, 302)
            self.assertTrue(r.headers["Location"].endswith("/admin/kopc?team=Red+Team&page=1"), r.headers)
            self.assertEqual(self.calls, [("one", red, "nc")])
            _, page = self.rows(admin)
            self.assertIn(f"Stopped nc of Red Team ({red}).", page)
            _, page = self.rows(admin)
            self.assertNotIn("Stopped nc", page)  # said once

            self.calls.clear()
            r = self.stop(admin, {"kind": "team", "team": blue, "back": "?evil=https://x.example&team=b"})
            self.assertEqual((r.status_code, self.calls), (302, [("team", blue)]))
            self.assertTrue(r.headers["Location"].endswith("/admin/kopc?team=b"), r.headers)
            _, page = self.rows(admin)
            self.assertIn(f"Stopped 2 instance(s) of team Blue &lt;b&gt;Team&lt;/b&gt; ({blue}).", page)

            self.calls.clear()
            self.stop(admin, {"kind": "challenge", "challenge": "nc"})
            self.assertEqual(self.calls, [("challenge", "nc")])
            _, page = self.rows(admin)
            self.assertIn("alert-warning kopc-notice", page)
            self.assertIn("Stopped 3 instance(s) of challenge nc. The cluster refused 1", page)

            # Without CTFd's nonce nothing is stopped; a stop that names nothing neither.
            self.calls.clear()
            r = self.stop(admin, {"kind": "one", "team": red, "challenge": "nc"}, nonce=False)
            self.assertEqual(r.status_code, 403)
            r = admin.post("/admin/kopc/stop", data={"kind": "team", "team": red, "nonce": "0" * 64})
            self.assertEqual(r.status_code, 403)
            r = self.stop(admin, {"kind": "team", "team": "Red Team"})
            self.assertEqual(r.status_code, 302)
            self.assertEqual(self.calls, [])
            _, page = self.rows(admin)
            self.assertIn("Nothing stopped: the stop names no kopc team.", page)

    def test_kopc_errors_are_the_pages(self):
        from CTFd.plugins.kopc_ctfd.client import KopcError
        from CTFd.plugins.kopc_ctfd.mapping import UNREACHABLE

        with self.app.app_context():
            red, _, _ = self.teams()
            admin = login_as_user(self.app, name="admin", password="password")
            self.failure = KopcError(UNREACHABLE, 502, "Unreachable")
            status, page = self.page_of(admin)
            page = html.unescape(page)
            self.assertEqual(status, 200)
            self.assertIn(f"kopc's instance list cannot be read: {UNREACHABLE}", page)
            self.assertIn("kopc-shared", page)  # the rest of the page is there
            r = self.stop(admin, {"kind": "one", "team": red, "challenge": "nc"})
            self.assertEqual(r.status_code, 302)
            self.failure = KopcError("The instance manager refused the platform's credentials; tell the organizers.",
                                  502, "Forbidden")
            _, page = self.page_of(admin)
            page = html.unescape(page)
            self.assertIn(f"kopc did not stop it: {UNREACHABLE}", page)
            self.assertIn("alert-danger kopc-notice", page)
            self.assertIn("kopc's instance list cannot be read: The instance manager refused", page)
            # An answer that is no list is an empty overview, not a 500.
            self.failure = None
            self.listing = {"instances": "junk", "limits": [], "summary": 5}
            status, page = self.page_of(admin)
            page = html.unescape(page)
            self.assertEqual(status, 200)
            self.assertIn("No instance is running.", page)

    def test_players_reach_neither_page_nor_stop(self):
        with self.app.app_context():
            red, blue, bob = self.teams()
            self.listing["instances"] = [instance(red, "nc")]
            player = login_as_user(self.app, name=bob, password="password")
            status, page = self.page_of(player)
            self.assertNotEqual(status, 200)
            self.assertNotIn("kopc-instance-row", page)
            for fields in ({"kind": "one", "team": red, "challenge": "nc"}, {"kind": "team", "team": red},
                           {"kind": "challenge", "challenge": "nc"}):
                r = self.stop(player, fields)
                self.assertIn(r.status_code, (302, 403), fields)
                self.assertIn("/login", r.headers.get("Location", "/login"))
            r = player.post("/admin/kopc/stop", json={"kind": "team", "team": red})
            self.assertEqual(r.status_code, 403)
            self.assertEqual(self.calls, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
