#!/usr/bin/env python3
"""check_doc_links.py SRC - every link of the repository's Markdown files
(git ls-files '*.md', and kop-gen's README template) that is not a web
address names a file or directory inside the repository that exists: no
link to a design document or any other file outside it (an absolute path,
file://, or a relative path climbing out of the tree), and none broken.
Fenced code blocks and `code spans` are skipped (they hold text, not links).
Anchors (#...) are not checked.

Also, in prose and code alike, every NAME.md the Markdown files mention is
the name of a file in the repository (or one of OUTPUTS, files a run
writes): a document the reader cannot open, such as a design guide kept
outside the repository, is not cited by name either."""
import pathlib
import re
import subprocess
import sys

src = pathlib.Path(sys.argv[1]).resolve()
files = subprocess.run(["git", "-C", str(src), "ls-files", "*.md", "*.md.in"], check=True,
                       capture_output=True, text=True).stdout.split()
if not files:  # not a git checkout: every Markdown file but build outputs
    files = [str(p.relative_to(src)) for p in src.rglob("*.md")
             if "build" not in p.relative_to(src).parts and "node_modules" not in p.parts]
# Markdown files that runs write, named in the docs as outputs.
OUTPUTS = {"table.md"}  # bench/run.sh's results table (docs/benchmarks.md)
known = {pathlib.PurePath(f).name for f in subprocess.run(
    ["git", "-C", str(src), "ls-files"], check=True, capture_output=True, text=True).stdout.split()}
if not known:
    known = {p.name for p in src.rglob("*.md")}
link = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
bad = []
for name in files:
    path = src / name
    text = path.read_text(errors="replace")
    for m in re.finditer(r"(?<![A-Za-z0-9_.-])([A-Za-z0-9_.-]+\.md)\b", text):
        if m.group(1) not in known and m.group(1) not in OUTPUTS:
            bad.append(f"{name}: mentions {m.group(1)}, which is not in the repository")
    text = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    for m in link.finditer(text):
        target = m.group(1)
        if re.match(r"(https?|mailto):", target) or target.startswith("#"):
            continue
        where = target.split("#", 1)[0]
        if target.startswith("file:") or where.startswith("/"):
            bad.append(f"{name}: {target}: outside the repository")
            continue
        if name.endswith(".md.in"):
            continue  # a generated project's README: its links are into that project
        resolved = (path.parent / where).resolve()
        if src not in resolved.parents and resolved != src:
            bad.append(f"{name}: {target}: outside the repository")
        elif not resolved.exists():
            bad.append(f"{name}: {target}: no such file")
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
