#!/usr/bin/env python3
"""check_api_shape.py - libkop's public calls keep one shape.

The design guide's rule 7: a call that needs more than five arguments takes an
options or request struct instead (kop_patch_object(c, &kop_patch_req, out,
st)), so that call sites read as named fields with zero defaults. This script
reads every function declared in include/kop/*.h and fails for one that takes
more than five arguments, the trailing kop_status * out-parameter not counted
(a printf-style "..." counts as one). It also fails for a stats getter that is
not named kop_<module>_read_stats: _read_stats copies into the caller's
struct, where _get would say it borrows.

    test/packaging/check_api_shape.py [--source DIR]

Python 3 standard library only.
"""
import argparse
import pathlib
import re
import sys

MAX_ARGS = 5


def declarations(text):
    """(name, [argument text]) of each function declared in a header."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"#define[^\n]*(?:\\\n[^\n]*)*", "", text)
    decl = re.compile(r"\b(kop_\w+)\s*\(([^;{}]*?)\)\s*(?:KOP_\w+(?:\([^)]*\))?\s*)*;", re.S)
    for m in decl.finditer(text):
        # Commas inside a function-pointer argument's own list do not count.
        flat = m.group(2)
        while re.search(r"\([^()]*,[^()]*\)", flat):
            flat = re.sub(r"\(([^()]*)\)", lambda g: "(" + g.group(1).replace(",", " ") + ")", flat)
        args = [a.strip() for a in flat.split(",") if a.strip()]
        if args == ["void"]:
            args = []
        yield m.group(1), args


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", default=pathlib.Path(__file__).resolve().parents[2])
    src = pathlib.Path(ap.parse_args().source)
    bad = []
    for header in sorted((src / "include" / "kop").glob("*.h")):
        for name, args in declarations(header.read_text()):
            n = len(args) - (1 if args and re.match(r"kop_status\s*\*", args[-1]) else 0)
            if n > MAX_ARGS:
                bad.append(f"{header.name}: {name} takes {n} arguments (more than {MAX_ARGS}): "
                           "give it an options or request struct")
            if "stats" in name and not name.endswith("_read_stats"):
                bad.append(f"{header.name}: {name}: a stats getter is named kop_<module>_read_stats")
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
