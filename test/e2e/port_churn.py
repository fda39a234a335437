#!/usr/bin/env python3
"""port_churn.py - take the kernel's ephemeral ports as a busy machine does,
for devcluster_ports_test.sh: hold --hold outgoing TCP connections to a
loopback listener of its own, and replace the oldest with a new one as fast
as it can, until SIGTERM.

Half the connections bind their client socket to 127.0.0.1 port 0 before
connecting, as clients that choose a source address do: the kernel gives
them a free port of the ephemeral range the way it gives a listener's port
0 (odd ports first), the half a plain connect() leaves alone. So a port that
a process asked the kernel for, closed, and means to bind later, soon
becomes somebody's source port, and stays so for a while.

Connections end with a reset (SO_LINGER 0), so none lingers in TIME_WAIT:
the held ones are all the ports it takes, and all come back the moment it
stops. (Closed normally, they would fill the whole range for a minute and
make every bind to port 0 on the machine fail.)

On SIGTERM it prints one JSON line: connections made and failed. Python 3
standard library only.
"""

import argparse
import collections
import json
import resource
import signal
import socket
import struct
import sys
import threading

stop = threading.Event()
RESET = struct.pack("ii", 1, 0)


def acceptor(listener):
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        conn.close()  # the client's side lives on, holding its port


def close_reset(s):
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
    except OSError:
        pass
    s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hold", type=int, default=8000, help="connections held at once")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.hold + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4096)
    addr = listener.getsockname()
    threading.Thread(target=acceptor, args=(listener,), daemon=True).start()
    sys.stdout.write("ready\n")  # one write, also when unbuffered
    sys.stdout.flush()
    held = collections.deque()
    made = failed = 0
    while not stop.is_set():
        if len(held) >= args.hold:
            close_reset(held.popleft())
        s = socket.socket()
        try:
            if (made + failed) % 2:
                s.bind(("127.0.0.1", 0))
            s.connect(addr)
            made += 1
            held.append(s)
        except OSError:
            failed += 1
            close_reset(s)
    while held:
        close_reset(held.popleft())
    print(json.dumps({"connections": made, "failed": failed}), flush=True)


if __name__ == "__main__":
    main()
