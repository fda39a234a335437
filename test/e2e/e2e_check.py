"""e2e_check.py - what the Python scenarios of test/e2e share: the "ok N -
what" lines (the count kept in $PASSED_FILE, shared with the shell script
that runs the scenario), a failure that says why, and a bounded wait for a
condition (never a fixed sleep)."""
import os
import time

PASSED_FILE = os.environ["PASSED_FILE"]
_passed = [int(open(PASSED_FILE).read().strip() or 0)]


class Fail(Exception):
    pass


def ok(what):
    _passed[0] += 1
    with open(PASSED_FILE, "w") as f:
        f.write(str(_passed[0]))
    print(f"ok {_passed[0]} - {what}", flush=True)


def log(what):
    print(f"=== {what}", flush=True)


def check(cond, why):
    if not cond:
        raise Fail(why)


def wait(secs, what, fn, every=0.25):
    """Call fn until it returns something truthy; return that. Fail after secs."""
    end = time.monotonic() + secs
    last = None
    while time.monotonic() < end:
        try:
            v = fn()
            if v:
                return v
            last = v
        except Fail as e:
            last = e
        time.sleep(every)
    raise Fail(f"timed out after {secs}s waiting for {what} (last: {last})")
