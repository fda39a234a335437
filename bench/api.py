"""api.py - the instance API's read path (after each warm run of
ctf-operator): every team reads its own instance with its own token and is
refused with another team's (team_reads); then wrk against
GET .../instances/{challenge}, each request a team drawn at random with its
own token, and against nginx serving the same bytes (measure_api).
"""
import os
import re
import subprocess
import time
import urllib.error
import urllib.request

from common import free_port, log, run, shutil_which, team_token

MAX_TOKEN_TEAMS = 1000  # the API read path: this many teams, each with its own token


def team_reads(op, n):
    """Each of n teams reads its own instance with its own token (200), and
    is refused with another team's token; the counts."""
    ok = refused = 0
    for i in range(n):
        for token, want in ((team_token(i), True), (team_token((i + 1) % n), False)):
            if n == 1 and not want:
                continue
            req = urllib.request.Request(
                f"http://127.0.0.1:{op.api_port}/api/v1/teams/team-{i:05d}/instances/bench",
                headers={"Authorization": f"Bearer {token}"})
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    code = r.status
            except urllib.error.HTTPError as e:
                code = e.code
            if want and code == 200:
                ok += 1
            elif not want and code in (401, 403, 404):
                refused += 1
    return {"teams": n, "own_token_ok": ok, "other_token_refused": refused if n > 1 else None}


def wrk(url, header, out, name, duration, script=None):
    cmd = ["wrk", "-t2", "-c32", f"-d{duration}s", "--latency", url]
    if header:
        cmd[1:1] = ["-H", header]
    if script:
        cmd[1:1] = ["-s", script]
    text = run(cmd)
    with open(os.path.join(out, f"wrk-{name}.txt"), "w") as f:
        f.write(text)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", text)
    scale = {"us": 1e-3, "ms": 1, "s": 1e3}[p99.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    return {"rps": rps, "p99_ms": float(p99.group(1)) * scale,
            "non2xx": int(non2xx.group(1)) if non2xx else 0}


def measure_api(op, out, n):
    """wrk against GET .../instances/{challenge} and against nginx serving the same bytes."""
    if not shutil_which("wrk") or not shutil_which("nginx"):
        log("wrk or nginx missing: API read path skipped")
        return None
    url = f"http://127.0.0.1:{op.api_port}/api/v1/teams/team-00001/instances/bench"
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {team_token(1 % n)}"})
    with urllib.request.urlopen(req, timeout=5) as r:
        body = r.read()
    # Each request: a team drawn at random of the n, reading its own
    # instance with its own token (not the admin token).
    script = os.path.join(out, "teams.lua")
    with open(script, "w") as f:
        f.write("local tokens = {" + ",".join(f'"{team_token(i)}"' for i in range(n)) + "}\n")
        f.write(f"local n = {n}\n")
        f.write("request = function()\n  local i = math.random(0, n - 1)\n"
                "  return wrk.format(\"GET\", string.format("
                "\"/api/v1/teams/team-%05d/instances/bench\", i),\n"
                "    {[\"Authorization\"] = \"Bearer \" .. tokens[i + 1]})\nend\n")
    dur = 3 if n < 100 else 10
    res = {"bytes": len(body), "teams": n, "token": "each team its own",
           "kopc": wrk(url, None, out, "kopc", dur, script)}
    www = os.path.join(out, "nginx")
    os.makedirs(www, exist_ok=True)
    with open(os.path.join(www, "instance.json"), "wb") as f:
        f.write(body)
    port = free_port()
    conf = os.path.join(www, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off; worker_processes auto; pid {www}/nginx.pid;
error_log {www}/error.log;
events {{ worker_connections 1024; }}
http {{ access_log off; client_body_temp_path {www}; proxy_temp_path {www};
  fastcgi_temp_path {www}; uwsgi_temp_path {www}; scgi_temp_path {www};
  server {{ listen 127.0.0.1:{port}; root {www};
    location / {{ default_type application/json; }} }} }}
""")
    ng = subprocess.Popen(["nginx", "-c", conf, "-p", www], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/instance.json", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        res["nginx"] = wrk(f"http://127.0.0.1:{port}/instance.json", None, out, "nginx", dur)
    finally:
        ng.terminate()
        ng.wait()
    return res
