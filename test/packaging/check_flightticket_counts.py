#!/usr/bin/env python3
"""check_flightticket_counts.py SRC - every line count docs/flightticket.md
states of a shipped file is that file's count today, so the comparison with
controller-runtime cannot drift when the example or its Go twin changes.

One way of counting for both languages: a file's lines are its newline-ended
lines; its code lines are those left with something on them once comments
(C's /* */ and //, Go's //) are removed. A line with code and a trailing
comment is a code line.

Counted in examples/flightticket/main.c: the whole file; its opening comment
(up to the first line " */"); reconcile (from its comment "/* reconcile" to
the first "}" in column 0 after it); the rest (includes, the kop_resource of
ConfigMaps, main). Also the generated header, webhook.c and crd.yaml. In
bench/peers/flightticket-go/main.go: the reconciler (from "type
TicketReconciler struct" to the "}" ending Reconcile), the spec and status
structs, and the builder call (NewControllerManagedBy to Complete).

Each claim is a phrase of the document with its numbers filled in from the
files; a phrase missing means the document says another number (or was
reworded: then change the phrase here with it)."""
import pathlib
import re
import sys

src = pathlib.Path(sys.argv[1])


def lines_of(path):
    text = (src / path).read_text()
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def code_count(lines, go=False):
    """The lines with code once comments are removed (no comment markers
    appear inside string literals in these files)."""
    text = "\n".join(lines)
    if not go:
        text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return sum(1 for line in text.split("\n") if line.strip())


def span(lines, start_pred, end_pred, what):
    """The lines from the first that start_pred accepts to the first after
    it that end_pred accepts, both included."""
    for i, line in enumerate(lines):
        if start_pred(line):
            for j in range(i + 1, len(lines)):
                if end_pred(lines[j]):
                    return lines[i:j + 1]
    raise SystemExit(f"check_flightticket_counts: cannot find {what}")


main = lines_of("examples/flightticket/main.c")
opening = span(main, lambda l: l.startswith("/*"), lambda l: l == " */", "main.c's opening comment")
reconcile = span(main, lambda l: l.startswith("/* reconcile"), lambda l: l == "}", "reconcile")
rest = len(main) - len(opening) - len(reconcile)
rest_code = code_count(main) - code_count(opening) - code_count(reconcile)

go = lines_of("bench/peers/flightticket-go/main.go")
start = next(i for i, l in enumerate(go) if l.startswith("type TicketReconciler struct"))
rec_fn = next(i for i, l in enumerate(go) if l.startswith("func (r *TicketReconciler) Reconcile("))
end = next(j for j in range(rec_fn, len(go)) if go[j] == "}")
go_rec = go[start:end + 1]
go_types = (span(go, lambda l: l.startswith("type FlightTicketSpec struct"), lambda l: l == "}", "the spec")
            + span(go, lambda l: l.startswith("type FlightTicketStatus struct"), lambda l: l == "}",
                   "the status"))
go_builder = span(go, lambda l: "ctrl.NewControllerManagedBy(" in l, lambda l: "Complete(" in l,
                  "the builder call")
go_total = len(go_rec) + len(go_types) + len(go_builder)

n = {
    "total": len(main), "code": code_count(main),
    "opening": len(opening),
    "rec": len(reconcile), "rec_code": code_count(reconcile),
    "rest": rest, "rest_code": rest_code,
    "header": len(lines_of("examples/flightticket/flight_ticket_types.h")),
    "webhook": len(lines_of("examples/flightticket/webhook.c")),
    "crd": len(lines_of("examples/flightticket/crd.yaml")),
    "go_rec": len(go_rec), "go_rec_code": code_count(go_rec, go=True),
    "go_types": len(go_types), "go_builder": len(go_builder), "go_total": go_total,
}
assert n["opening"] + n["rec"] + n["rest"] == n["total"]

claims = [
    "a complete operator in {total} lines ({code} without comments and blank",
    "(generated, {header} lines, not counted)",
    "{rec} lines with comments, {rec_code} without",
    "{rest} lines with blanks and comments, {rest_code} without",
    "the file's opening comment, {opening} lines",
    "**{total} lines, {code} without comments**",
    "{total} lines ({code} with code)",
    "against C's {code} code lines",
    "`crd.yaml` is {crd} lines of YAML",
    "has a reconciler of {go_rec} lines ({go_rec_code} with code",
    "spec and status structs of {go_types} lines and a builder call of {go_builder}: "
    "{go_total} lines",
    "against C's {total}",
    "(`webhook.c`, {webhook} lines)",
]
doc = re.sub(r"\s+", " ", (src / "docs/flightticket.md").read_text())
bad = [c.format(**n) for c in claims if c.format(**n) not in doc]
if bad:
    print("docs/flightticket.md does not say (the files' counts today):", file=sys.stderr)
    for b in bad:
        print(f"  {b}", file=sys.stderr)
    sys.exit(1)
print(" ".join(f"{k}={v}" for k, v in n.items()))
