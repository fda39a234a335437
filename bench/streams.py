"""streams.py - the benchmark's event-stream measurement (issue 15): N teams
(at most MAX_STREAMS) each hold one open event stream of the CTF operator's instance API while
every team's instance is renewed; what each stream costs the operator, and
how soon each stream shows the change.

The streams come from 50 loopback addresses (127.0.1.1 ...), as many
participants would, so the API's per-address cap (64) is not what is
measured (2,000 teams' streams are 40 per address; from 20 addresses, as
before, 720 of them were refused). Each stream is opened with team-<i>'s own token (token may be a
function of the team's index; the admin token works too) for team-<i> (the
loader's Challenge i), parsed as server-sent events, and ready once its
snapshot has arrived. Memory per stream is the operator's VmRSS and PSS
with every stream open and its snapshot delivered, less the same before the
first was opened, divided by N. Then each team's instance is renewed through
the API (POST .../renew, paced over RENEW_MS, at most RENEW_CONCURRENCY at
once): the renewal patches the Challenge, and the stream's next `instance`
event carries the new expiresAt. Delivery latency is from the renewal sent
to that event received; a stream that misses it within DEADLINE_S counts as
not delivered. Python's asyncio, standard library only.
"""
import asyncio
import json
import os
import resource
import time

MAX_STREAMS = 1000       # the figure: 1,000 streams (the API holds 2,048 in all)
ADDRESSES = 50           # source addresses; 2,000 streams are 40 per address (cap 64)
RENEW_MS = 10000         # the renewals are spread over 10 s, as a burst of teams would
RENEW_CONCURRENCY = 32   # renewals in flight at once
DEADLINE_S = 60          # a stream that has not shown its renewal by then missed it
OPEN_TIMEOUT_S = 120     # all snapshots in by then, or the measurement fails
MAX_LINE = 1 << 20       # the longest SSE line accepted (a snapshot of one team is ~1 KB)


def _source(i):
    return f"127.0.1.{1 + i % ADDRESSES}"


def _team(i):
    return f"team-{i:05d}"


def _proc(pid):
    """VmRSS and Threads of pid from /proc, and its PSS, in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "Threads:")):
                out[line.split(":")[0]] = int(line.split()[1])
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                out["Pss"] = int(line.split()[1])
    return out


class Stream:
    """One team's event stream: its snapshot's expiresAt, then the time the
    first instance event with another expiresAt arrived."""

    def __init__(self, i):
        self.i = i
        self.expires = None
        self.snapshot = asyncio.Event()
        self.changed_at = None
        self.changed = asyncio.Event()
        self.error = None
        self.writer = None

    async def run(self, host, port, token):
        try:
            reader, self.writer = await asyncio.open_connection(
                host, port, local_addr=(_source(self.i), 0), limit=MAX_LINE)
            self.writer.write((f"GET /api/v1/teams/{_team(self.i)}/events HTTP/1.1\r\n"
                               f"Host: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
                               "Accept: text/event-stream\r\n\r\n").encode())
            await self.writer.drain()
            status = await reader.readline()
            if b" 200 " not in status:
                raise RuntimeError(f"stream answered {status.decode(errors='replace').strip()}")
            chunked = False
            while True:  # headers
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                if line.lower().startswith(b"transfer-encoding:") and b"chunked" in line.lower():
                    chunked = True
            await self._events(reader, chunked)
        except (OSError, RuntimeError, ValueError, asyncio.IncompleteReadError) as e:
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.snapshot.set()  # never leave a waiter hanging on a failed stream
            self.changed.set()

    async def _lines(self, reader, chunked):
        """The stream's text lines, with chunked transfer encoding undone."""
        buf = b""
        while True:
            if chunked:
                size = int((await reader.readline()).split(b";")[0], 16)
                if size == 0:
                    return
                data = await reader.readexactly(size + 2)
                buf += data[:-2]
            else:
                data = await reader.read(65536)
                if not data:
                    return
                buf += data
            if len(buf) > MAX_LINE:
                raise ValueError("an event line longer than MAX_LINE")
            *lines, buf = buf.split(b"\n")
            for line in lines:
                yield line.rstrip(b"\r").decode()

    async def _events(self, reader, chunked):
        event = None
        async for line in self._lines(reader, chunked):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event:
                self._on(event, json.loads(line[5:]))
            elif line == "":
                event = None

    def _on(self, event, data):
        if event == "snapshot" and self.expires is None:
            insts = data.get("instances") or []
            self.expires = insts[0].get("expiresAt") if insts else ""
            self.snapshot.set()
        elif event == "instance" and self.changed_at is None and self.expires is not None:
            if data.get("expiresAt") and data["expiresAt"] != self.expires:
                self.changed_at = time.time()
                self.changed.set()

    def close(self):
        if self.writer:
            self.writer.close()


async def request(host, port, token, method, path, sem, ok=(200,)):
    """Send one bodiless request with the bearer token (at most sem at once);
    the time it was sent when the answer's status is in ok, else None."""
    async with sem:
        sent = time.time()
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write((f"{method} {path} HTTP/1.1\r\n"
                          f"Host: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
                          "Content-Length: 0\r\nConnection: close\r\n\r\n").encode())
            await writer.drain()
            status = await reader.readline()
            await reader.read()
        finally:
            writer.close()
        parts = status.split()
        return sent if len(parts) > 1 and parts[1].isdigit() and int(parts[1]) in ok else None


async def _renew(host, port, token, i, sem, answered):
    """POST the renewal of team i's instance; the time it was sent, or None.
    answered[i] gets the time its answer was read: the API answers after its
    GET and PATCH of the Challenge at the apiserver, so the delivery splits
    in two there."""
    sent = await request(host, port, token(i) if callable(token) else token, "POST",
                         f"/api/v1/teams/{_team(i)}/instances/bench/renew",
                         sem)
    answered[i] = time.time()
    return sent


def spread(xs):
    """The p50, p99 and max of latencies xs (None for each when xs is empty)."""
    return {"p50": _percentile(xs, 50), "p99": _percentile(xs, 99), "max": max(xs) if xs else None}


def _percentile(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def open_streams(cls, host, port, token, n):
    """Open one stream of class cls per team 0..n-1 and wait for every
    snapshot; (streams, their tasks). token is one bearer token for all, or
    a function of the team's index giving each team its own. Fails when one
    did not open."""
    ss = [cls(i) for i in range(n)]
    tasks = [asyncio.create_task(s.run(host, port, token(s.i) if callable(token) else token))
             for s in ss]
    await asyncio.wait_for(asyncio.gather(*(s.snapshot.wait() for s in ss)), OPEN_TIMEOUT_S)
    failed = [s for s in ss if s.error or s.expires is None]
    if failed:
        raise RuntimeError(f"{len(failed)} of {n} streams failed to open: {failed[0].error}")
    return ss, tasks


async def send_and_time(ss, tasks, send, spread_ms, concurrency, deadline_s):
    """Call send(i, sem) for each stream's team, paced over spread_ms with at
    most concurrency in flight; wait up to deadline_s for every stream to
    show its change; close the streams. (the send times, None for a refused
    one; the latencies in ms from a send to its stream's change)."""
    sem = asyncio.Semaphore(concurrency)
    t0 = time.time()
    n = len(ss)

    async def paced(i):
        await asyncio.sleep(max(0.0, t0 + spread_ms / 1000 * i / n - time.time()))
        return await send(i, sem)

    sent = await asyncio.gather(*(paced(i) for i in range(n)))
    try:
        await asyncio.wait_for(asyncio.gather(*(s.changed.wait() for s in ss)), deadline_s)
    except asyncio.TimeoutError:
        pass
    lat = [(s.changed_at - sent[s.i]) * 1000 for s in ss
           if s.changed_at is not None and sent[s.i] is not None]
    for s in ss:
        s.close()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return sent, lat


async def _measure(pid, host, port, token, n, spread_ms):
    before = _proc(pid)
    streams, tasks = await open_streams(Stream, host, port, token, n)
    await asyncio.sleep(2)  # the operator settles (parked streams, freed request buffers)
    held = _proc(pid)
    answered = {}
    sent, lat = await send_and_time(streams, tasks,
                                    lambda i, sem: _renew(host, port, token, i, sem, answered),
                                    spread_ms, RENEW_CONCURRENCY, DEADLINE_S)
    # The delivery in two parts: sent -> the API's answer (its GET and PATCH at
    # the apiserver), and answer -> the stream shows it (watch event, fan-out, client).
    answer = [(answered[i] - t) * 1000 for i, t in enumerate(sent) if t is not None]
    after = [(s.changed_at - answered[s.i]) * 1000 for s in streams
             if s.changed_at is not None and sent[s.i] is not None]
    return {
        "streams": n,
        "renewed": sum(1 for x in sent if x is not None),
        "delivered": len(lat),
        "delivery_ms": spread(lat),
        "within_1s": sum(1 for x in lat if x <= 1000),
        "answer_ms": spread(answer),
        "answer_to_event_ms": spread(after),
        "rss_kib_before": before["VmRSS"], "rss_kib_held": held["VmRSS"],
        "pss_kib_before": before.get("Pss"), "pss_kib_held": held.get("Pss"),
        "rss_kib_per_stream": (held["VmRSS"] - before["VmRSS"]) / n,
        "pss_kib_per_stream": ((held["Pss"] - before["Pss"]) / n
                               if "Pss" in held and "Pss" in before else None),
        "threads_before": before["Threads"], "threads_held": held["Threads"],
    }


def measure(pid, api_port, token, n, out, spread_ms=RENEW_MS):
    """Hold n streams against the operator pid's API on api_port, the
    renewals paced over spread_ms (RENEW_MS; shorter in bench.py's quick
    mode); the figures as a dict (also written to out/streams.json)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 1024), hard))
    res = asyncio.run(_measure(pid, "127.0.0.1", api_port, token, n, spread_ms))
    with open(os.path.join(out, "streams.json"), "w") as f:
        json.dump(res, f, indent=1)
    return res
