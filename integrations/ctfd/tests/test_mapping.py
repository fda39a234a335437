"""Unit tests of the plugin's pure part (kopc_ctfd/mapping.py): no CTFd, no
network. Run: python3 -m unittest discover -s integrations/ctfd/tests
(ctest runs them as unit_ctfd_plugin)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "kopc_ctfd"))

import mapping  # noqa: E402  (the module alone: the package imports CTFd)


class TeamMapping(unittest.TestCase):
    def test_by_id_in_either_mode(self):
        self.assertEqual(mapping.kopc_team(team_id=42), "team-42")
        self.assertEqual(mapping.kopc_team(user_id=7), "user-7")
        self.assertEqual(mapping.kopc_team(team_id="3"), "team-3")
        # A team id wins: in team mode a user acts for the team.
        self.assertEqual(mapping.kopc_team(team_id=1, user_id=2), "team-1")

    def test_always_a_dns_label(self):
        for i in (0, 1, 99, 10**12):
            for name in (mapping.kopc_team(team_id=i), mapping.kopc_team(user_id=i)):
                self.assertRegex(name, mapping.DNS_LABEL)
                self.assertLessEqual(len(name), 63)

    def test_refuses_what_is_no_id(self):
        with self.assertRaises(ValueError):
            mapping.kopc_team()
        with self.assertRaises(ValueError):
            mapping.kopc_team(team_id="Red Team")


class Definitions(unittest.TestCase):
    def test_valid_names(self):
        for ok in ("web", "nc", "web.v2", "a", "x" * 253, "a-b"):
            self.assertTrue(mapping.valid_definition(ok), ok)
        for bad in ("", "Web", "-web", "web-", "a_b", "a/b", "../x", "x" * 254, None, 5, "a..b", "web "):
            self.assertFalse(mapping.valid_definition(bad), bad)


class ChallengeAccess(unittest.TestCase):
    """challenge_refusal decides as CTFd's own challenge API (3.8.7) does."""

    def test_visible_without_requirements(self):
        self.assertIsNone(mapping.challenge_refusal("visible", None, (), ()))
        self.assertIsNone(mapping.challenge_refusal("visible", {}, (), ()))
        self.assertIsNone(mapping.challenge_refusal("visible", {"prerequisites": []}, (), ()))

    def test_hidden_is_not_found_and_locked_forbidden(self):
        self.assertEqual(mapping.challenge_refusal("hidden", None, (), ()), 404)
        self.assertEqual(mapping.challenge_refusal("locked", None, (), ()), 403)
        # Solving the prerequisites does not open a hidden or locked challenge.
        self.assertEqual(mapping.challenge_refusal("hidden", {"prerequisites": [1]}, {1}, {1}), 404)
        self.assertEqual(mapping.challenge_refusal("locked", {"prerequisites": [1]}, {1}, {1}), 403)

    def test_prerequisites_must_all_be_solved(self):
        req = {"prerequisites": [1, 2]}
        self.assertEqual(mapping.challenge_refusal("visible", req, (), {1, 2, 3}), 403)
        self.assertEqual(mapping.challenge_refusal("visible", req, {1}, {1, 2, 3}), 403)
        self.assertEqual(mapping.challenge_refusal("visible", req, {2, 3}, {1, 2, 3}), 403)
        self.assertIsNone(mapping.challenge_refusal("visible", req, {1, 2}, {1, 2, 3}))
        self.assertIsNone(mapping.challenge_refusal("visible", req, {1, 2, 3}, {1, 2, 3}))

    def test_deleted_prerequisites_do_not_count(self):
        # CTFd intersects the prerequisites with the challenges that exist.
        req = {"prerequisites": [1, 99]}
        self.assertIsNone(mapping.challenge_refusal("visible", req, {1}, {1, 2}))
        self.assertEqual(mapping.challenge_refusal("visible", req, (), {1, 2}), 403)
        self.assertIsNone(mapping.challenge_refusal("visible", {"prerequisites": [99]}, (), {1}))

    def test_anonymized_requirements_still_refuse(self):
        # "anonymize" only changes what CTFd shows of a locked-out challenge.
        req = {"prerequisites": [1], "anonymize": True}
        self.assertEqual(mapping.challenge_refusal("visible", req, (), {1}), 403)


class PlayerView(unittest.TestCase):
    def test_missing_instance_is_stopped(self):
        v = mapping.player_view(None, "nc")
        self.assertEqual(v["state"], "Stopped")
        self.assertEqual(v["endpoints"], [])
        self.assertFalse(v["renewable"])

    def test_only_player_fields(self):
        inst = {
            "team": "team-1",
            "challenge": "nc",
            "name": "nc-team-1-abc",
            "state": "Running",
            "status": "Running",
            "endpoints": [{"name": "tcp", "type": "TCP", "address": "10.0.0.2:31000", "extra": "x"}, "junk"],
            "expiresAt": "2026-11-25T10:30:00Z",
            "secondsLeft": 100,
            "renewable": True,
            "namespace": "ctf-nc-1",
        }
        v = mapping.player_view(inst, "nc")
        self.assertEqual(set(v), set(mapping.PLAYER_FIELDS))
        self.assertEqual(v["endpoints"], [{"name": "tcp", "type": "TCP", "address": "10.0.0.2:31000"}])
        self.assertNotIn("namespace", v)
        self.assertNotIn("name", v)

    def test_gateway_host_and_port(self):
        inst = {
            "state": "Running",
            "endpoints": [
                {"name": "tcp", "type": "TCP", "address": "abcdefghijklmnop.ctf.test:443",
                 "host": "abcdefghijklmnop.ctf.test", "port": 443},
                {"name": "http", "type": "HTTP", "address": "https://qrstuvwxyz234567.ctf.test",
                 "host": "qrstuvwxyz234567.ctf.test", "port": 443},
            ],
        }
        v = mapping.player_view(inst, "nc")
        self.assertEqual(v["endpoints"][0], {"name": "tcp", "type": "TCP", "address": "abcdefghijklmnop.ctf.test:443",
                                             "host": "abcdefghijklmnop.ctf.test", "port": 443})
        self.assertEqual(v["endpoints"][1]["host"], "qrstuvwxyz234567.ctf.test")
        self.assertEqual(v["endpoints"][1]["port"], 443)

    def test_gateway_host_or_port_that_is_not_one_is_dropped(self):
        for host in ('a.test"; rm -rf ~; "', "A.TEST", "-a.test", "a..test", "<b>x</b>.test", 7, None, "a" * 254):
            e = {"name": "tcp", "type": "TCP", "address": "x:443", "host": host, "port": 443}
            v = mapping.player_view({"endpoints": [e]}, "nc")
            self.assertEqual(set(v["endpoints"][0]), {"name", "type", "address"}, host)
        for port in ("443", 0, 65536, True, 4.5):
            e = {"name": "tcp", "type": "TCP", "address": "a.test:443", "host": "a.test", "port": port}
            v = mapping.player_view({"endpoints": [e]}, "nc")
            self.assertEqual(set(v["endpoints"][0]), {"name", "type", "address"}, port)


class Errors(unittest.TestCase):
    def err(self, code, message="m"):
        return {"error": {"code": code, "message": message}}

    def test_quota_in_plain_words(self):
        s = mapping.plain_error(409, self.err("QuotaExceeded", "team team-1 runs 1 of 1 instances"))
        self.assertIn("as many instances as it may", s)
        self.assertIn("team team-1 runs 1 of 1 instances", s)

    def test_known_codes(self):
        self.assertIn("still stopping", mapping.plain_error(409, self.err("InstanceStopping")))
        self.assertIn("cannot be extended", mapping.plain_error(409, self.err("RenewLimitReached")))
        self.assertIn("in 7 s", mapping.plain_error(429, self.err("TooManyRequests"), "7"))
        self.assertIn("misconfigured (key gone)", mapping.plain_error(409, self.err("InvalidDefinition", "key gone")))

    def test_credentials_and_outages_blame_no_player(self):
        for status in (401, 403):
            self.assertIn("credentials", mapping.plain_error(status, self.err("Unauthorized")))
        self.assertEqual(mapping.plain_error(502, None), mapping.UNREACHABLE)
        self.assertEqual(mapping.plain_error(500, "not json"), mapping.UNREACHABLE)

    def test_unknown_code_keeps_kopcs_sentence(self):
        self.assertEqual(mapping.plain_error(400, self.err("Weird", "odd thing")),
                         "The instance manager refused: odd thing")
        self.assertEqual(mapping.plain_error(418, {}), "The instance manager answered 418.")

    def test_instance_error(self):
        self.assertIsNone(mapping.instance_error(None))
        self.assertIsNone(mapping.instance_error({"state": "Running"}))
        s = mapping.instance_error({"state": "Error", "reason": "ImagePullFailed", "message": "no image x"})
        self.assertIn("ImagePullFailed: no image x", s)


if __name__ == "__main__":
    unittest.main()


class FlagVerdict(unittest.TestCase):
    """What is recorded of a flag check: kopc's answer read for the submitting team."""

    def test_correct_and_wrong(self):
        self.assertEqual(mapping.flag_verdict({"correct": True}, "team-1"), (True, None, False))
        self.assertEqual(mapping.flag_verdict({"correct": False}, "team-1"), (False, None, False))

    def test_shared_flag_names_the_owner(self):
        self.assertEqual(mapping.flag_verdict({"correct": False, "sharedFrom": "team-2"}, "team-1"),
                         (False, "team-2", False))
        self.assertEqual(mapping.flag_verdict({"correct": False, "sharedFrom": "user-9"}, "user-3"),
                         (False, "user-9", False))

    def test_never_shared_from_oneself_or_with_a_correct_flag(self):
        self.assertEqual(mapping.flag_verdict({"correct": False, "sharedFrom": "team-1"}, "team-1"),
                         (False, None, False))
        self.assertEqual(mapping.flag_verdict({"correct": True, "sharedFrom": "team-2"}, "team-1"),
                         (True, None, False))

    def test_what_is_no_team_is_not_recorded(self):
        for bad in ("", "Team 2", "team_2", "x" * 64, 5, None, ["team-2"], {"team": 2}, "../team-2"):
            self.assertEqual(mapping.flag_verdict({"correct": False, "sharedFrom": bad}, "team-1"),
                             (False, None, False), bad)
        for answer in (None, [], "correct", {}, {"correct": "true"}, {"correct": 1}):
            self.assertEqual(mapping.flag_verdict(answer, "team-1"), (False, None, False), answer)

    def test_stopped_on_solve(self):
        self.assertEqual(mapping.flag_verdict({"correct": True, "stopped": True}, "team-1"), (True, None, True))
        # Only a correct flag stops anything; a wrong answer's "stopped" means nothing.
        self.assertEqual(mapping.flag_verdict({"correct": False, "stopped": True}, "team-1"), (False, None, False))
        self.assertEqual(mapping.flag_verdict({"correct": True, "stopped": "yes"}, "team-1"), (True, None, False))


class KopcAccount(unittest.TestCase):
    def test_round_trip(self):
        for kind, i in (("team", 1), ("team", 42), ("user", 7), ("user", 10**12)):
            name = mapping.kopc_team(team_id=i) if kind == "team" else mapping.kopc_team(user_id=i)
            self.assertEqual(mapping.kopc_account(name), (kind, i))

    def test_not_ours(self):
        for bad in ("share-a", "team-", "team-x", "team-01", "user--1", "team-1-2", "Team-1", "", None, 3):
            self.assertIsNone(mapping.kopc_account(bad), bad)


class SharedRecord(unittest.TestCase):
    """The row recorded of a shared flag: who, whose, which challenge."""

    def test_fields(self):
        row = mapping.shared_record("team-2", "team-1", "Red Team", 5, "bob", "Blue Team!", 9, "Greeter")
        self.assertEqual(row, {"submitter": "team-2", "owner": "team-1", "owner_name": "Red Team", "user_id": 5,
                               "user_name": "bob", "account_name": "Blue Team!", "challenge_id": 9,
                               "challenge_name": "Greeter"})

    def test_owner_without_account_keeps_its_kopc_name(self):
        row = mapping.shared_record("team-2", "team-77", None, 5, "bob", "Blue", 9, "Greeter")
        self.assertEqual(row["owner_name"], "team-77")

    def test_names_cut_to_the_columns(self):
        row = mapping.shared_record("team-2", "team-1", "R" * 500, 5, "b" * 500, "B" * 500, 9, "G" * 500)
        for k in ("owner_name", "user_name", "account_name", "challenge_name"):
            self.assertEqual(len(row[k]), 128, k)
        self.assertIsNone(mapping.shared_record("team-2", "team-1", "R", None, "b", "B", 9, "G")["user_id"])
