#!/usr/bin/env python3
"""pwntools_line.py LINE [--ca CAFILE] [--resolve ADDR] - run the participant
page's pwntools line as a participant would (`from pwn import *`, then the
line exactly as the page shows it, e.g. remote("<id>.ctf.example.org", 443,
ssl=True, sni="<id>.ctf.example.org")) and print the first line the
instance sends.

  --ca CAFILE     then the same call again with
                  ssl_context=ssl.create_default_context(cafile=CAFILE) added,
                  the way docs/running-a-ctf.md says to check the certificate
                  (that one must verify), and print its first line too;
  --resolve ADDR  the line's host resolves to ADDR in this process, as the
                  wildcard DNS record of docs/running-a-ctf.md would make it
                  (curl's --resolve): for a test whose *.ctf.localhost hosts
                  glibc does not resolve. The line itself is not changed.

Run with the Python of tools/pwntools-venv.sh. Exits non-zero, saying why,
when the line is not a single remote(...) call of constants, or when no
line comes within 10 s.
"""
import argparse
import ast
import os
import socket
import sys
import tempfile


def dial_host(line):
    """The line's host (remote's first argument); it must be exactly one call
    of remote() with constant arguments: it is evaluated, so nothing else may
    ride along."""
    call = ast.parse(line, mode="eval").body
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "remote"):
        sys.exit(f"FAIL: not a remote(...) call: {line!r}")
    for a in list(call.args) + [k.value for k in call.keywords]:
        if not isinstance(a, ast.Constant):
            sys.exit(f"FAIL: a non-constant argument in {line!r}")
    return call.args[0].value


def resolve_to(host, addr):
    """getaddrinfo answers addr for host, as a DNS record would."""
    real = socket.getaddrinfo

    def getaddrinfo(h, *args, **kwargs):
        return real(addr if h == host else h, *args, **kwargs)
    socket.getaddrinfo = getaddrinfo


def first_line(io):
    got = io.recvline(timeout=10)
    io.close()
    if not got:
        sys.exit("FAIL: no line from the instance within 10 s")
    return got.decode(errors="replace").rstrip("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("line")
    ap.add_argument("--ca")
    ap.add_argument("--resolve")
    a = ap.parse_args()
    host = dial_host(a.line)
    if a.resolve:
        resolve_to(host, a.resolve)
    # pwntools without a terminal, and without its weekly update check (a
    # pwn.conf of its own saying never, its cache in the same throwaway place).
    os.environ.setdefault("PWNLIB_NOTERM", "1")
    home = tempfile.mkdtemp(prefix="kopc-pwn-")
    with open(os.path.join(home, "pwn.conf"), "w") as f:
        f.write("[update]\ninterval=never\n")
    os.environ["XDG_CONFIG_HOME"] = os.environ["XDG_CACHE_HOME"] = home
    from pwn import context, remote
    import ssl
    context.log_level = "error"
    print(first_line(eval(a.line, {"remote": remote})))
    if a.ca:
        verified = a.line[:-1] + ", ssl_context=ssl.create_default_context(cafile=CAFILE))"
        print(first_line(eval(verified, {"remote": remote, "ssl": ssl, "CAFILE": a.ca})))


if __name__ == "__main__":
    main()
