#!/usr/bin/env python3
"""gen-libkop-ref.py - docs/libkop-reference.md from the comments of include/kop/*.h.

The headers are the reference: each opens with what its module is for, and
each public declaration has a comment above it that starts with its name and
states what it returns and who owns what. This script lays them out as one
Markdown page, module by module in the order kop/kop.h includes them: the
module's opening comment, then every declaration (code) with its comment.
Names starting with kop__/KOP__ are internal and left out, as are include
guards, includes and the extern "C" wrappers.

    tools/gen-libkop-ref.py            write docs/libkop-reference.md
    tools/gen-libkop-ref.py --check    fail if that file is not up to date
    tools/gen-libkop-ref.py --stdout   print it

Python 3 standard library only.
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
INCLUDE = ROOT / "include" / "kop"
OUT = ROOT / "docs" / "libkop-reference.md"

SKIP_PREFIXES = ("#include", "#ifndef", "#ifdef", "#if ", "#else", "#endif", "#undef",
                 "KOP_BEGIN_DECLS", "KOP_END_DECLS")


def module_order():
    """The headers in kop/kop.h's include order, then any it does not include."""
    names = re.findall(r'#include "kop/(\w+)\.h"', (INCLUDE / "kop.h").read_text())
    rest = sorted(p.stem for p in INCLUDE.glob("*.h") if p.stem not in names and p.stem != "kop")
    return ["kop"] + names + rest


def comment_text(lines):
    """The text of a /* ... */ block, without its frame."""
    body = "\n".join(lines).strip()
    body = re.sub(r"^/\*+", "", body)
    body = re.sub(r"\*/$", "", body)
    out = []
    for line in body.split("\n"):
        line = re.sub(r"^\s*\* ?", "", line) if line.lstrip().startswith("*") else line.strip()
        out.append(line.rstrip())
    while out and not out[0]:
        out.pop(0)
    while out and not out[-1]:
        out.pop()
    return out


def escape_prose(line):
    """A comment's sentence as Markdown text: characters that would make
    emphasis, HTML tags, links, headings or quotes of C notation (*out,
    <team>, [a-z](...)) are escaped; `code spans` are left as they are."""
    parts = line.split("`")
    for i in range(0, len(parts), 2):
        t = parts[i].replace("\\", "\\\\").replace("*", "\\*").replace("<", "\\<")
        parts[i] = t.replace("](", "]\\(")
    out = "`".join(parts)
    return "\\" + out if out.lstrip().startswith(("#", ">", "=")) else out


def to_markdown(text_lines):
    """Paragraphs as they are; runs of lines indented by two or more spaces
    (examples and tables in the comments) as fenced code."""
    out, code = [], []

    def flush():
        if code:
            indent = min(len(l) - len(l.lstrip()) for l in code if l.strip())
            if out and out[-1]:
                out.append("")
            out.append("```")
            out.extend(l[indent:] for l in code)
            out.append("```")
            out.append("")
            code.clear()

    for line in text_lines:
        if line.startswith("  ") and line.strip():
            code.append(line)
        elif not line.strip() and code:
            code.append("")
        else:
            while code and not code[-1].strip():
                code.pop()
            flush()
            out.append(escape_prose(line))
    while code and not code[-1].strip():
        code.pop()
    flush()
    return "\n".join(out)


def strip_comments(code):
    code = re.sub(r"/\*.*?\*/", "", code, flags=re.S)
    return re.sub(r"//[^\n]*", "", code)


def decl_name(code):
    """The name a declaration declares."""
    flat = strip_comments(code)
    m = re.match(r"\s*#\s*define\s+(\w+)", flat)
    if m:
        return m.group(1)
    if flat.lstrip().startswith("typedef") and "{" in flat:  # typedef struct/enum {...} name;
        m = re.search(r"\}\s*(\w+)\s*;\s*$", flat.strip())
        return m.group(1) if m else None
    m = re.search(r"\(\s*\*\s*(\w+)\s*\)\s*\(", flat)  # function pointer typedef
    if m and flat.lstrip().startswith("typedef"):
        return m.group(1)
    if flat.lstrip().startswith("typedef"):
        m = re.search(r"(\w+)\s*(\[[^\]]*\])?\s*;\s*$", flat.strip())
        return m.group(1) if m else None
    m = re.match(r"\s*(?:struct|enum|union)\s+(\w+)\s*\{", flat)
    if m:
        return m.group(1)
    m = re.search(r"(\w+)\s*\(", flat)  # a function
    return m.group(1) if m else None


def parse(path):
    """Returns (module comment lines, [(names, code, comment lines)])."""
    lines = path.read_text().split("\n")
    i, n = 0, len(lines)
    items, pending, head = [], None, None

    def read_comment(i):
        block = [lines[i]]
        while "*/" not in lines[i]:
            i += 1
            block.append(lines[i])
        return block, i + 1

    def read_decl(i):
        block, depth = [], 0
        if lines[i].lstrip().startswith("#"):
            while True:  # a macro, with its continuation lines
                block.append(lines[i])
                if not lines[i].rstrip().endswith("\\"):
                    return block, i + 1
                i += 1
        while i < n:
            block.append(lines[i])
            flat = strip_comments(lines[i])
            depth += flat.count("{") - flat.count("}")
            i += 1
            if depth == 0 and flat.rstrip().endswith(";"):
                break
        return block, i

    while i < n:
        s = lines[i].strip()
        if s.startswith("/*"):
            block, i = read_comment(i)
            if head is None:
                head = comment_text(block)
                continue
            if pending is not None:  # a comment on its own: a note
                items.append(([], "", pending))
            pending = comment_text(block)
            continue
        if not s:
            # A comment followed by a blank line documents no declaration of
            # its own: it is a note on what follows.
            if pending is not None:
                items.append(([], "", pending))
                pending = None
            i += 1
            continue
        if s.startswith(SKIP_PREFIXES) or re.match(r"#\s*define\s+KOP_\w+_H\s*$", s):
            i += 1
            continue
        # A group: consecutive declarations without a blank line between them.
        group = []
        while i < n and lines[i].strip() and not lines[i].strip().startswith("/*"):
            if lines[i].strip().startswith(SKIP_PREFIXES):
                i += 1
                continue
            block, i = read_decl(i)
            group.append("\n".join(block))
        names = [decl_name(c) for c in group]
        keep = [(nm, c) for nm, c in zip(names, group) if nm and not nm.lower().startswith("kop__")]
        if keep:
            items.append(([nm for nm, _ in keep], "\n".join(c for _, c in keep), pending or []))
        pending = None
    if pending is not None:
        items.append(([], "", pending))
    return head or [], items


def render():
    order = module_order()
    out = [
        "# libkop reference",
        "",
        "<!-- Generated by tools/gen-libkop-ref.py from the comments of include/kop/*.h;",
        "     edit the headers, then run it (a packaging test checks this file is current). -->",
        "",
        "Every public declaration of libkop, module by module, with the comment it has in its",
        "header. The guides come first: [libkop-client.md](libkop-client.md) (configuration and",
        "the REST client), [libkop-runtime.md](libkop-runtime.md) (informers, work queues,",
        "controllers, the manager) and the FlightTicket walkthrough",
        "([flightticket.md](flightticket.md)). Conventions that hold everywhere: fallible",
        "functions return `kop_err` (`KOP_OK` is 0) and are `KOP_NODISCARD`; API failures also",
        "fill a caller's `kop_status`; `_new`/`_free` pair for heap objects, `_init`/`_fini` for",
        "caller storage; destructors accept NULL; each comment says who owns what it returns.",
        "",
        "Include `<kop/kop.h>` for everything, or one module's header. Link with",
        "`pkg-config --cflags --libs kop` or CMake's `find_package(kop)` and `kop::kop`",
        "([install.md](install.md#libkop-for-your-own-operator)).",
        "",
        "| header | module |",
        "|---|---|",
    ]
    parsed = {}
    for m in order:
        head, items = parse(INCLUDE / f"{m}.h")
        parsed[m] = (head, items)
        para = " ".join(l.strip() for l in head[:head.index("")] if l.strip()) if "" in head \
            else " ".join(head)
        para = para.split(" - ", 1)[1] if " - " in para else para
        summary = re.split(r"(?<=[.:])\s", para, maxsplit=1)[0].rstrip(".:")
        out.append(f"| [`kop/{m}.h`](#kop{m}h) | {summary} |")
    out.append("")
    for m in order:
        head, items = parsed[m]
        out.append(f"## kop/{m}.h")
        out.append("")
        text = list(head)
        if text and text[0].startswith(f"kop/{m}.h - "):
            text[0] = text[0][len(f"kop/{m}.h - "):]
        out.append(to_markdown(text))
        out.append("")
        for names, code, comment in items:
            if names:
                out.append("### " + ", ".join(f"`{nm}`" for nm in dict.fromkeys(names)))
                out.append("")
                out.append("```c")
                out.append(re.sub(r"^KOP_API ", "", code, flags=re.M).rstrip())
                out.append("```")
                out.append("")
            if comment:
                out.append(to_markdown(comment))
                out.append("")
    text = "\n".join(out)
    text = re.sub(r"\n{3,}", "\n\n", text)  # one blank line between blocks
    # No blank lines were collapsed inside code: comments never hold two in a row.
    return text.rstrip() + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--check", action="store_true", help="fail if docs/libkop-reference.md is stale")
    g.add_argument("--stdout", action="store_true", help="print instead of writing")
    args = ap.parse_args()
    text = render()
    if args.stdout:
        sys.stdout.write(text)
    elif args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is not up to date with include/kop/*.h: "
                  "run tools/gen-libkop-ref.py", file=sys.stderr)
            return 1
        print(f"{OUT.relative_to(ROOT)} is up to date")
    else:
        OUT.write_text(text)
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
