#!/usr/bin/env python3
"""check_rbac_doc.py SRC - the RBAC table of docs/reliability.md (its "after"
column) states exactly what config/rbac grants: every rule of the ClusterRole,
the leader-election Role (rows marked "(kopc-system)") and the optional CRD
installer role, and no grant the rules lack. A row whose after is "—" must
name a resource no rule grants."""
import pathlib
import re
import sys

import yaml

src = pathlib.Path(sys.argv[1])
rbac = src / "config/rbac"


def grants(path, kind):
    """{resource: set of verbs} of the first object of kind in path."""
    out = {}
    for doc in yaml.safe_load_all(open(path)):
        if doc and doc.get("kind") == kind:
            for rule in doc["rules"]:
                for res in rule["resources"]:
                    out.setdefault(res, set()).update(rule["verbs"])
            return out
    raise SystemExit(f"no {kind} in {path}")


rules = {
    "cluster": grants(rbac / "role.yaml", "ClusterRole"),
    "kopc-system": grants(rbac / "leader_election_role.yaml", "Role"),
    "optional installer role": grants(rbac / "crd_installer_role.yaml", "ClusterRole"),
}

doc = (src / "docs/reliability.md").read_text()
m = re.search(r"\| rule \| before \| after \|\n\|---\|---\|---\|\n((?:\|.*\n)+)", doc)
if not m:
    raise SystemExit("docs/reliability.md has no RBAC table (| rule | before | after |)")
stated = {scope: {} for scope in rules}
problems = []
for line in m.group(1).splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    name, after = cells[0], cells[2]
    scope = "cluster"
    q = re.match(r"^(.*?)\s*\((.*)\)$", name)
    if q:
        name, scope = q.group(1), q.group(2)
    if scope not in rules:
        problems.append(f"row {cells[0]!r}: unknown scope {scope!r}")
        continue
    verbs = set() if after.startswith("—") else {v.strip() for v in re.sub(r"\s*\(.*", "", after).split(",")}
    for res in (r.strip() for r in name.split(",")):
        stated[scope][res] = verbs
for scope, granted in rules.items():
    for res, verbs in granted.items():
        if stated[scope].get(res) != verbs:
            problems.append(f"{res} ({scope}): config/rbac grants {sorted(verbs)}, the table says "
                            f"{sorted(stated[scope].get(res, set())) or 'nothing'}")
    for res, verbs in stated[scope].items():
        if verbs and res not in granted:
            problems.append(f"{res} ({scope}): the table grants {sorted(verbs)}, config/rbac nothing")
if problems:
    print("docs/reliability.md's RBAC table differs from config/rbac:\n  " + "\n  ".join(problems))
    sys.exit(1)
print(f"the RBAC table names the {sum(len(g) for g in rules.values())} granted resources as config/rbac does")
