#!/usr/bin/env python3
"""e2e_check_test.py - e2e_check.wait, alone (no cluster): a Fail from the
probe means "not yet", an Errored one (not_error on an Instance in state
Error) ends the wait at once with the Error's reason, not at the timeout.
ctest runs it as unit_e2e_check."""
import os
import sys
import tempfile
import time
import unittest

with tempfile.NamedTemporaryFile("w", suffix=".passed", delete=False) as _f:
    _f.write("0")
os.environ["PASSED_FILE"] = _f.name
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import e2e_check  # noqa: E402
from e2e_check import Fail, not_error, wait  # noqa: E402


class Wait(unittest.TestCase):
    def test_returns_the_first_truthy_value(self):
        seq = iter([None, 0, {"state": "Running"}])
        self.assertEqual(wait(10, "x", lambda: next(seq), every=0.01), {"state": "Running"})

    def test_a_fail_is_not_yet(self):
        calls = []

        def probe():
            calls.append(1)
            if len(calls) < 3:
                raise Fail("not there yet")
            return "done"
        self.assertEqual(wait(10, "x", probe, every=0.01), "done")
        self.assertEqual(len(calls), 3)

    def test_times_out_with_the_last_fail(self):
        def probe():
            raise Fail("still Pending")
        with self.assertRaises(Fail) as cm:
            wait(0.2, "team-a/nc Running", probe, every=0.01)
        self.assertIn("timed out after 0.2s", str(cm.exception))
        self.assertIn("still Pending", str(cm.exception))

    def test_error_fails_at_once_with_its_reason(self):
        error = {"state": "Error", "reason": "ImagePullFailed", "message": "no such image"}
        t0 = time.monotonic()
        with self.assertRaises(Fail) as cm:
            wait(30, "team-a/nc Running", lambda: not_error(error, "team-a/nc") and None, every=0.01)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertIn("ImagePullFailed", str(cm.exception))
        self.assertIn("no such image", str(cm.exception))
        self.assertNotIn("timed out", str(cm.exception))

    def test_waiting_for_error_still_works(self):
        seq = iter([{"state": "Pending"}, {"state": "Error", "reason": "CrashLoop"}])

        def is_error():
            i = next(seq)
            return i if i["state"] == "Error" else None
        self.assertEqual(wait(10, "Error", is_error, every=0.01)["reason"], "CrashLoop")

    def test_not_error_passes_everything_else(self):
        for v in (None, {}, {"state": "Running"}, {"state": "Pending"}, []):
            self.assertIs(not_error(v, "x"), v)


if __name__ == "__main__":
    try:
        unittest.main()
    finally:
        os.unlink(e2e_check.PASSED_FILE)
