"""common.py - what every part of the benchmark shares: the tree's paths
(build/bin, the Go peers, the venv), the log line, running a command, a
free port, the /proc readers (CPU seconds, RSS, PSS), the teams' tokens,
a small thread pool and the wait for a condition. Standard library only;
no other bench module.
"""
import hashlib
import os
import socket
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")
PEERS = os.path.join(ROOT, "build", "bench")
# The venv of kopf and matplotlib: run.sh names it (build/bench-venv, or a cache's).
VENV = os.path.abspath(os.environ.get("BENCH_VENV") or os.path.join(ROOT, "build", "bench-venv"))
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
ADMIN_TOKEN = "bench-admin-token-0123456789abcdef"


def log(*a):
    print("bench:", *a, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(cmd, **kw):
    """run a command, failing loudly with its output."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout[-3000:]}")
    return r.stdout

# ---- /proc ---------------------------------------------------------------------

def proc_cpu(pid):
    """utime + stime of pid (all its threads) in seconds, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def proc_status(pid):
    """VmRSS and VmHWM of pid in KiB."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:", "RssAnon:", "RssFile:")):
                    out[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        pass
    return out


def proc_pss_kib(pid):
    """Pss of pid (/proc/PID/smaps_rollup): shared library pages counted in
    proportion to the processes that map them, unlike VmRSS."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


WRITES = ("POST", "PUT", "PATCH", "DELETE")


def writes_of(by_method):
    return sum(v for k, v in by_method.items() if k in WRITES) if by_method else None


def team_token(i):
    """Team i's own token for the instance API (the Secret ctf-team-tokens)."""
    return "bench-team-%05d-" % i + hashlib.sha256(b"team-%d" % i).hexdigest()[:32]


def parallel(fn, items, workers=8):
    """fn over items on a few threads; the results in order."""
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
        return list(ex.map(fn, items))


def shutil_which(name):
    import shutil
    return shutil.which(name)


def wait_until(check, timeout, what, step=1):
    """Call check() every step seconds until it is true; the seconds it
    took. After timeout seconds, RuntimeError naming what was awaited."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        if check():
            return time.time() - t0
        time.sleep(step)
    raise RuntimeError(f"{what} within {timeout} s")
