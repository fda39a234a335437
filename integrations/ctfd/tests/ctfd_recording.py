"""ctfd_recording.py - the recording of shared flags inside the real CTFd
3.8.7 (its own app factory and test helpers, SQLite in memory), with the
plugin loaded as CTFd loads plugins: a player's submission through CTFd's
attempt route that kopc answers with sharedFrom is recorded (who, their
team, whose flag by CTFd name, which challenge, when) and listed on the
plugin's admin page; a plain wrong flag and a correct one are not; a
correct flag that kopc says stopped the instance tells the player so; the
row outlives the owner's team being deleted.

kopc's answers are given here (KopcClient.check_flag replaced): what kopc
answers is e2e_ctfd's part, against the real operator. Not named test_*.py:
it needs CTFd's virtual environment, not the system python3 that runs the
pure tests. Run (ctest unit_ctfd_recording does):
    tools/ctfd.sh build/ctfd
    cd build/ctfd/CTFd-3.8.7 && ../venv/bin/python \\
        ../../../integrations/ctfd/tests/ctfd_recording.py
"""

import os
import re
import sys
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
