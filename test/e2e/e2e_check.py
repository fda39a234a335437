"""e2e_check.py - what the Python scenarios of test/e2e share: the "ok N -
what" lines (the count kept in $PASSED_FILE, shared with the shell script
that runs the scenario), a failure that says why, a bounded wait for a
condition (never a fixed sleep), and the first line a TCP challenge sends."""
import os
import socket
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
