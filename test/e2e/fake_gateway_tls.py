#!/usr/bin/env python3
"""fake_gateway_tls.py PORT_FILE CERT KEY WRONG_CERT WRONG_KEY WRONG_HOSTS -
the data plane of a gateway for e2e_ctf_gateway (fake nodes: no gateway
implementation runs, and no instance answers), so that the operator's probe
(--gateway-probe-address, --gateway-probe-ca) has a TLS server to check.

It listens on a free port of 127.0.0.1 (written to PORT_FILE once it
listens) and, for every SNI, presents CERT (the devcluster's wildcard
certificate with its CA after it, DIR/gateway/tls.crt: what the Gateway's
Secret holds) and greets with one line as a TCP challenge would; for the
hosts listed in the file WRONG_HOSTS (read at each connection, one a line)
it presents WRONG_CERT instead, as a gateway serving a certificate the
operator does not trust. It routes nothing: which instance is served is
not its question, only what certificate a host meets.
"""
import socket
import ssl
import sys
import threading

port_file, cert, key, wrong_cert, wrong_key, wrong_hosts = sys.argv[1:7]


def context(c, k):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(c, k)
    return ctx


right, wrong = context(cert, key), context(wrong_cert, wrong_key)


def pick(sock, name, _ctx):
    try:
        hosts = open(wrong_hosts).read().split()
    except OSError:
        hosts = []
    if name in hosts:
        sock.context = wrong


right.sni_callback = pick


def serve(conn):
    try:
        with right.wrap_socket(conn, server_side=True) as s:
            s.settimeout(5)
            s.sendall(b"Your flag: flag{fake-gateway}\n")
            while s.recv(512):
                pass
    except (OSError, ssl.SSLError):
        pass  # a probe that refused the certificate, or hung up


lsock = socket.socket()
lsock.bind(("127.0.0.1", 0))
lsock.listen(64)
with open(port_file + ".tmp", "w") as f:
    f.write(str(lsock.getsockname()[1]))
import os  # noqa: E402
os.rename(port_file + ".tmp", port_file)
while True:
    c, _ = lsock.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
