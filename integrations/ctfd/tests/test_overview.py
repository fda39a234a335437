"""Unit tests of the admin page's instance overview: its pure part
(kopc_ctfd/mapping.py: rows, filters, pages, what a stop says) and the calls
client.py makes for it (the paths and methods of kopc's admin routes, read
from a session that records them). No CTFd, no network. Run:
python3 -m unittest discover -s integrations/ctfd/tests (ctest
unit_ctfd_plugin); the page itself inside CTFd is ctfd_recording.py's."""

import importlib
import os
import sys
import types
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "kopc_ctfd"))

import mapping  # noqa: E402  (the module alone: the package imports CTFd)

# client.py imports requests (CTFd's, not always the system python3's): the
# calls below pass their own session, so without requests only its exception
# class is needed.
try:
    import requests  # noqa: F401
except ImportError:
    _requests = types.ModuleType("requests")
    _requests.RequestException = type("RequestException", (Exception,), {})
    _requests.Session = object
    sys.modules["requests"] = _requests

# client.py imports mapping relatively: load it inside a package of its own
# whose __init__ (the plugin's, which needs CTFd) never runs.
_pkg = types.ModuleType("kopc_pure")
_pkg.__path__ = [os.path.join(HERE, "..", "kopc_ctfd")]
sys.modules.setdefault("kopc_pure", _pkg)
client = importlib.import_module("kopc_pure.client")

NOW = 1_800_000_000  # 2027-01-15T08:00:00Z


def iso(t):
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def inst(team, challenge, state="Running", created=-300, expires=1500, **kw):
    i = {"team": team, "challenge": challenge, "state": state, "reason": None, "message": "instance running",
         "endpoints": [{"name": "tcp", "type": "TCP", "address": f"10.0.0.2:{31000 + len(team)}"}],
         "createdAt": iso(NOW + created), "expiresAt": iso(NOW + expires), "secondsLeft": expires,
         "events": [{"type": "Normal", "reason": "Running"}]}
    i.update(kw)
    return i


class Clock(unittest.TestCase):
    def test_as_the_kopc_page_writes_it(self):
        self.assertEqual(mapping.clock(0), "0:00")
        self.assertEqual(mapping.clock(59), "0:59")
        self.assertEqual(mapping.clock(61), "1:01")
        self.assertEqual(mapping.clock(3600), "1:00:00")
        self.assertEqual(mapping.clock(7322), "2:02:02")
        self.assertEqual(mapping.clock(-5), "0:00")
        self.assertEqual(mapping.clock(None), "")

    def test_parse_time(self):
        self.assertEqual(mapping.parse_time("2027-01-15T08:00:00Z"), NOW)
        for bad in (None, "", "yesterday", 5, "2027-13-40T99:00:00Z"):
            self.assertIsNone(mapping.parse_time(bad), bad)


class Rows(unittest.TestCase):
    def test_what_a_row_shows(self):
        row = mapping.overview_row(inst("team-3", "nc"), NOW, {"team-3": "Red Team"})
        self.assertEqual(row, {"team": "team-3", "team_name": "Red Team", "challenge": "nc", "state": "Running",
                               "reason": "", "message": "instance running", "age": "5:00", "left": "25:00",
                               "endpoints": ["10.0.0.2:31006"]})

    def test_error_keeps_its_reason_and_message(self):
        row = mapping.overview_row(inst("team-1", "broken", "Error", reason="ImagePullFailed",
                                        message="no image x"), NOW, {})
        self.assertEqual((row["state"], row["reason"], row["message"], row["team_name"]),
                         ("Error", "ImagePullFailed", "no image x", ""))

    def test_missing_times_and_odd_fields(self):
        row = mapping.overview_row({"team": "team-1", "challenge": "nc", "state": "Weird", "endpoints": ["x", {}],
                                    "secondsLeft": 90}, NOW, {})
        self.assertEqual((row["state"], row["age"], row["left"], row["endpoints"]), ("Starting", "", "1:30", []))

    def test_what_is_no_instance_is_dropped(self):
        for bad in (None, "x", [], {}, {"team": "team-1"}, {"challenge": "nc"}, {"team": "Red Team", "challenge": "nc"},
                    {"team": "team-1", "challenge": "../etc"}):
            self.assertIsNone(mapping.overview_row(bad, NOW, {}), bad)


class Overview(unittest.TestCase):
    def setUp(self):
        self.names = {"team-1": "Red Team", "team-2": "Blue Team!", "team-10": "Green"}
        self.instances = [inst("team-10", "nc"), inst("team-2", "web"), inst("team-2", "nc"),
                          inst("team-1", "nc", "Error", reason="StartTimeout"), "junk",
                          inst("other", "nc", "Stopping")]

    def test_all_sorted_by_team_id_then_challenge(self):
        ov = mapping.overview(self.instances, NOW, self.names)
        self.assertEqual([(r["team"], r["challenge"]) for r in ov["rows"]],
                         [("team-1", "nc"), ("team-2", "nc"), ("team-2", "web"), ("team-10", "nc"), ("other", "nc")])
        self.assertEqual((ov["total"], ov["matched"], ov["teams"], ov["page"], ov["pages"], ov["first"], ov["last"]),
                         (5, 5, 4, 1, 1, 1, 5))
        self.assertEqual(ov["counts"], {"Starting": 0, "Running": 3, "Error": 1, "Stopping": 1})
        self.assertEqual(ov["challenges"], ["nc", "web"])
        self.assertIsNone(ov["exact_team"])
        self.assertEqual(ov["challenge_count"], 0)

    def test_team_filter_matches_kopc_or_ctfd_name(self):
        ov = mapping.overview(self.instances, NOW, self.names, team="blue")
        self.assertEqual([(r["team"], r["challenge"]) for r in ov["rows"]], [("team-2", "nc"), ("team-2", "web")])
        self.assertIsNone(ov["exact_team"])  # a part of a name is not a team
        ov = mapping.overview(self.instances, NOW, self.names, team="team-1")
        self.assertEqual([r["team"] for r in ov["rows"]], ["team-1", "team-10"])  # a part, again
        self.assertEqual((ov["exact_team"], ov["exact_team_name"], ov["team_count"]), ("team-1", "Red Team", 1))
        ov = mapping.overview(self.instances, NOW, self.names, team=" Blue Team! ")
        self.assertEqual((ov["exact_team"], ov["team_count"], ov["matched"]), ("team-2", 2, 2))

    def test_challenge_and_state_filters(self):
        ov = mapping.overview(self.instances, NOW, self.names, challenge="nc")
        self.assertEqual((ov["matched"], ov["challenge_count"]), (4, 4))
        ov = mapping.overview(self.instances, NOW, self.names, challenge="nc", state="Error")
        self.assertEqual([(r["team"], r["reason"]) for r in ov["rows"]], [("team-1", "StartTimeout")])
        self.assertEqual((ov["matched"], ov["challenge_count"], ov["total"]), (1, 4, 5))
        ov = mapping.overview(self.instances, NOW, self.names, state="Nonsense")
        self.assertEqual((ov["matched"], ov["filters"]["state"]), (5, ""))
        ov = mapping.overview(self.instances, NOW, self.names, team="nobody")
        self.assertEqual((ov["rows"], ov["matched"], ov["first"], ov["last"], ov["pages"]), ([], 0, 0, 0, 1))

    def test_what_is_no_list_is_empty(self):
        for junk in (None, 5, "abc", {"team-1": "nc"}, {"instances": []}):
            ov = mapping.overview(junk, NOW, self.names)
            self.assertEqual((ov["rows"], ov["total"], ov["pages"]), ([], 0, 1), junk)

    def test_two_thousand_instances_are_pages_of_a_hundred(self):
        many = [inst(f"team-{t}", c) for t in range(1, 1001) for c in ("nc", "web")]
        names = {f"team-{t}": f"Team {t}" for t in range(1, 1001)}
        ov = mapping.overview(many, NOW, names)
        self.assertEqual((len(ov["rows"]), ov["total"], ov["pages"], ov["first"], ov["last"]), (100, 2000, 20, 1, 100))
        self.assertEqual(ov["rows"][0]["team"], "team-1")
        ov = mapping.overview(many, NOW, names, page="20")
        self.assertEqual((len(ov["rows"]), ov["page"], ov["first"], ov["last"]), (100, 20, 1901, 2000))
        self.assertEqual(ov["rows"][-1]["team"], "team-1000")
        for odd, want in (("999", 20), ("0", 1), ("-3", 1), ("x", 1), (None, 1)):
            self.assertEqual(mapping.overview(many, NOW, names, page=odd)["page"], want, odd)
        # A part of a name: Team 77 and Team 770 to 779; the whole name is Team 77 alone.
        ov = mapping.overview(many, NOW, names, team="Team 77", state="Running")
        self.assertEqual((ov["matched"], ov["exact_team"], ov["team_count"]), (22, "team-77", 2))
        ov = mapping.overview(many, NOW, names, challenge="web", page=3)
        self.assertEqual((ov["matched"], ov["pages"], ov["first"], ov["challenge_count"]), (1000, 10, 201, 1000))


class Stops(unittest.TestCase):
    def test_requests_checked(self):
        self.assertEqual(mapping.stop_request("one", "team-1", "nc"), ("one", "team-1", "nc"))
        self.assertEqual(mapping.stop_request("team", " team-1 ", "nc"), ("team", "team-1", None))
        self.assertEqual(mapping.stop_request("challenge", "team-1", "web.v2"), ("challenge", None, "web.v2"))
        for kind, team, chal in (("all", "team-1", "nc"), (None, "team-1", "nc"), ("one", "", "nc"),
                                 ("one", "team-1", ""), ("team", None, None), ("team", "Red Team", None),
                                 ("team", "team/1", None), ("challenge", "team-1", None),
                                 ("challenge", None, "../nc"), ("one", "x" * 64, "nc")):
            with self.assertRaises(ValueError, msg=(kind, team, chal)):
                mapping.stop_request(kind, team, chal)

    def test_notices(self):
        self.assertEqual(mapping.stop_notice("one", {"state": "Stopping"}, "team-1", "nc", "Red Team"),
                         ("success", "Stopped nc of Red Team (team-1)."))
        self.assertEqual(mapping.stop_notice("one", None, "team-1", "nc", None),
                         ("warning", "team-1 had no instance of nc (already gone)."))
        self.assertEqual(mapping.stop_notice("team", {"stopped": 2, "failed": 0}, "team-1", None, "Red Team"),
                         ("success", "Stopped 2 instance(s) of team Red Team (team-1)."))
        level, text = mapping.stop_notice("challenge", {"stopped": 5, "failed": 1}, None, "nc")
        self.assertEqual(level, "warning")
        self.assertIn("Stopped 5 instance(s) of challenge nc. The cluster refused 1", text)
        self.assertEqual(mapping.stop_notice("challenge", "junk", None, "nc"),
                         ("success", "Stopped 0 instance(s) of challenge nc."))


class Response:
    def __init__(self, status, body):
        self.status_code, self.body, self.headers = status, body, {}

    def json(self):
        if self.body is None:
            raise ValueError("no JSON")
        return self.body


class Session:
    """What client.py sends, recorded; each call answered from a list."""

    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    def request(self, method, url, json=None, headers=None, timeout=None):
        self.calls.append((method, url, headers.get("Authorization"), timeout))
        return self.answers.pop(0)


class AdminCalls(unittest.TestCase):
    def kopc(self, *answers):
        s = Session(*answers)
        return client.KopcClient("http://kopc:8080/", "tok", session=s), s

    def test_paths_and_methods(self):
        k, s = self.kopc(Response(200, {"instances": [], "limits": {}}), Response(202, {"state": "Stopping"}),
                         Response(202, {"stopped": 1, "failed": 0}), Response(202, {"stopped": 3, "failed": 0}))
        self.assertEqual(k.admin_instances(), {"instances": [], "limits": {}})
        self.assertEqual(k.admin_stop("team-1", "nc"), {"state": "Stopping"})
        self.assertEqual(k.admin_stop_team("team-1"), {"stopped": 1, "failed": 0})
        self.assertEqual(k.admin_stop_challenge("web.v2"), {"stopped": 3, "failed": 0})
        self.assertEqual([c[:3] for c in s.calls], [
            ("GET", "http://kopc:8080/api/v1/admin/instances", "Bearer tok"),
            ("DELETE", "http://kopc:8080/api/v1/admin/teams/team-1/instances/nc", "Bearer tok"),
            ("DELETE", "http://kopc:8080/api/v1/admin/teams/team-1/instances", "Bearer tok"),
            ("DELETE", "http://kopc:8080/api/v1/admin/challenges/web.v2/instances", "Bearer tok"),
        ])
        self.assertEqual(s.calls[0][3], client.ADMIN_LIST_TIMEOUT)

    def test_names_are_quoted(self):
        k, s = self.kopc(Response(202, {}), Response(202, {}))
        k.admin_stop("a/b", "c?d")
        k.admin_stop_challenge("../x")
        self.assertEqual([c[1] for c in s.calls], ["http://kopc:8080/api/v1/admin/teams/a%2Fb/instances/c%3Fd",
                                                   "http://kopc:8080/api/v1/admin/challenges/..%2Fx/instances"])

    def test_refusals(self):
        k, _ = self.kopc(Response(404, {"error": {"code": "NotFound", "message": "no instance"}}))
        self.assertIsNone(k.admin_stop("team-1", "nc"))  # already gone: no error
        k, _ = self.kopc(Response(403, {"error": {"code": "Forbidden", "message": "admin only"}}))
        with self.assertRaises(client.KopcError) as e:
            k.admin_instances()
        self.assertIn("credentials", str(e.exception))
        self.assertEqual(e.exception.status, 502)
        k, _ = self.kopc(Response(503, None))
        with self.assertRaises(client.KopcError) as e:
            k.admin_stop_team("team-1")
        self.assertEqual(str(e.exception), mapping.UNREACHABLE)
        k, _ = self.kopc(Response(429, {"error": {"code": "TooManyRequests", "message": "slow"}}))
        with self.assertRaises(client.KopcError) as e:
            k.admin_stop_challenge("nc")
        self.assertEqual(e.exception.status, 429)


if __name__ == "__main__":
    unittest.main()
