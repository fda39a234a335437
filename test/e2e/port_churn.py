#!/usr/bin/env python3
"""port_churn.py - take the kernel's ephemeral ports as busy machines do: open
and close short TCP connections to a loopback listener of its own, as fast
as it can, until SIGTERM (devcluster_ports_test.sh).

Half the connections bind their client socket to 127.0.0.1 port 0 before
connecting, as clients that choose a source address do: the kernel gives
them a port of the ephemeral range the way it gives a listener's port 0
(odd ports first), the half a plain connect() leaves alone. So a port
that a process asked the kernel for, closed, and means to bind later, is
soon somebody else's source port.

On SIGTERM it prints one JSON line: connections made and failed. Python 3
standard library only.
"""

import json
import signal
import socket
import sys
import threading

stop = threading.Event()


def acceptor(listener):
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        conn.close()  # the server closes first: its side keeps TIME_WAIT


def main():
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4096)
    addr = listener.getsockname()
    threading.Thread(target=acceptor, args=(listener,), daemon=True).start()
    print("ready", flush=True)
    made = failed = 0
    while not stop.is_set():
        s = socket.socket()
        try:
            if (made + failed) % 2:
                s.bind(("127.0.0.1", 0))
            s.connect(addr)
            made += 1
        except OSError:
            failed += 1
        finally:
            s.close()
    print(json.dumps({"connections": made, "failed": failed}), flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
