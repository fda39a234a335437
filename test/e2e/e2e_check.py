"""e2e_check.py - what the Python scenarios of test/e2e share: the "ok N -
what" lines (the count kept in $PASSED_FILE, shared with the shell script
that runs the scenario), a failure that says why, a bounded wait for a
condition (never a fixed sleep) that stops at once when the awaited object
reaches state Error, and the first line a TCP challenge sends (which the
real-node benchmark, bench/realflag.py, uses too: without PASSED_FILE, no
count is kept)."""
import os
import socket
import time

PASSED_FILE = os.environ.get("PASSED_FILE")
_passed = [int(open(PASSED_FILE).read().strip() or 0) if PASSED_FILE else 0]


class Fail(Exception):
    pass


class Errored(Fail):
    """The awaited object reached state Error: wait() fails at once with this,
    rather than at its timeout (a Fail is taken as "not yet")."""


def not_error(view, what):
    """view (an Instance as kopc's API shows it, or None), unless it is in
    state Error: then Errored, with its reason and message. A caller that
    waits for Error, or through it (a definition being fixed), does not call this."""
    if isinstance(view, dict) and view.get("state") == "Error":
        raise Errored(f"{what} is Error: {view.get('reason')}: {view.get('message')}")
    return view


def ok(what):
    _passed[0] += 1
    if PASSED_FILE:
        with open(PASSED_FILE, "w") as f:
            f.write(str(_passed[0]))
    print(f"ok {_passed[0]} - {what}", flush=True)


def log(what):
    print(f"=== {what}", flush=True)


def check(cond, why):
    if not cond:
        raise Fail(why)


def wait(secs, what, fn, every=0.25):
    """Call fn until it returns something truthy; return that. Fail after secs.
    A Fail that fn raises means "not yet" (kept for the timeout's message),
    except Errored (not_error), which fails at once, saying why."""
    end = time.monotonic() + secs
    last = None
    while time.monotonic() < end:
        try:
            v = fn()
            if v:
                return v
            last = v
        except Errored as e:
            raise Fail(f"while waiting for {what}: {e}") from e
        except Fail as e:
            last = e
        time.sleep(every)
    raise Fail(f"timed out after {secs}s waiting for {what} (last: {last})")


def greeting(addr, timeout=5):
    """Connect to host:port once; return the first line the service sends."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.settimeout(timeout)
        data = b""
        while b"\n" not in data:
            chunk = s.recv(512)
            if not chunk:
                break
            data += chunk
    return data.decode(errors="replace").split("\n", 1)[0]
