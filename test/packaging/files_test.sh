#!/usr/bin/env bash
# files_test.sh - the install files agree with their sources, no cluster needed:
#   - docs/libkop-reference.md is what tools/gen-libkop-ref.py makes of the
#     headers now;
#   - the chart's crds/ are config/crd/bases, its files/ are config/monitoring
#     and the Roles of config/rbac (the chart renders its RBAC from them);
#   - the alert rules and the dashboard are well formed and name only metrics
#     the code registers (check_monitoring.py --source; the e2e install test
#     checks them against a live scrape too);
#   - no public libkop call takes more than five arguments besides its
#     kop_status, and stats getters are named _read_stats (check_api_shape.py);
#   - every Markdown link that is not a web address, and every NAME.md a
#     Markdown file names, is a file of the repository: no design document
#     outside it (check_doc_links.py);
#   - every line count docs/flightticket.md gives of a shipped file (the
#     example, its generated header, its Go twin) is the file's today
#     (check_flightticket_counts.py);
#   - docs/reliability.md's RBAC table states what config/rbac grants
#     (check_rbac_doc.py);
#   - config/conversion and the chart's files/crds-v1beta1 are what
#     tools/crd-versions.py makes of config/crd/bases
#     (the v1beta1 schema cannot drift from v1alpha1's);
#   - the Challenge validating webhook as config/with-webhook and the chart
#     render it (check_webhook_install.py): CREATE only, Fail fast, never
#     the system namespaces, the path served, the certificate mounted and
#     verifying; none in config/default nor the chart's defaults;
#   - the chart passes every --gateway* flag of ctf-operator's usage text,
#     each with a value, the probe's CA mounted where --gateway-probe-ca
#     points (check_chart_flags.py);
#   - one version everywhere: CMake project, KOP_VERSION_STRING, kop.pc (via
#     CMake), the chart's version and appVersion, the image tag in
#     config/default, config/manager and the Makefile, the version of
#     CHANGELOG.md's first section, and the CTFd plugin's package version
#     (integrations/ctfd/pyproject.toml);
#   - the soname the docs and cmake/ name is this version's by the rule
#     (libkop.so.MAJOR.MINOR while 0.x, libkop.so.MAJOR from 1.0 on;
#     install_test.sh checks the built library's).
#
# Env: SRC (repo root).
set -euo pipefail
# shellcheck source=../e2e/lib.sh
source "$(dirname "$0")/../e2e/lib.sh"

SRC=${SRC:?}
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
cd "$SRC"

python3 tools/gen-libkop-ref.py --check || fail "docs/libkop-reference.md is stale"
ok "docs/libkop-reference.md is up to date with include/kop/*.h"

python3 test/packaging/check_api_shape.py --source "$SRC" || fail "libkop's public calls (see above)"
ok "no public libkop call takes more than five arguments; stats getters are _read_stats"

# same_dir A B: the same files with the same contents.
same_dir() {
    diff -r "$1" "$2" >/dev/null || fail "$2 differs from $1 (cp $1/* $2/): $(diff -rq "$1" "$2" | head -3)"
}
same_dir config/crd/bases charts/kopc-ctf/crds
# copied FROM TO: TO is a copy of FROM.
copied() { cmp -s "$1" "$2" || fail "$2 differs from $1: cp $1 $2"; }
for f in alerts.yaml grafana-dashboard.json; do copied "config/monitoring/$f" "charts/kopc-ctf/files/$f"; done
for f in role.yaml leader_election_role.yaml; do copied "config/rbac/$f" "charts/kopc-ctf/files/rbac/$f"; done
ok "the chart's CRDs, RBAC rules and monitoring files are copies of config/"

python3 tools/crd-versions.py --check || fail "config/conversion or the chart's files/crds-v1beta1 is stale: run tools/crd-versions.py"
ok "config/conversion and the chart's files/crds-v1beta1 (v1beta1 beside v1alpha1) are what tools/crd-versions.py makes of config/crd/bases"

python3 test/packaging/check_monitoring.py --source "$SRC" >/dev/null || fail "the alert rules or the dashboard"
ok "alert rules and dashboard are well formed and use only registered metrics"

python3 test/packaging/check_doc_links.py "$SRC" || fail "links or names of documents outside the repository (see above)"
ok "every Markdown link and every NAME.md named is a file in the repository"

counts=$(python3 test/packaging/check_flightticket_counts.py "$SRC") || fail "docs/flightticket.md's line counts (see above)"
ok "docs/flightticket.md's line counts are the files' ($counts)"

python3 test/packaging/check_rbac_doc.py "$SRC" >/dev/null || { python3 test/packaging/check_rbac_doc.py "$SRC"; fail "docs/reliability.md's RBAC table"; }
ok "docs/reliability.md's RBAC table states what config/rbac grants"

if [ -x build/bin/kubectl ] && [ -x build/bin/helm ]; then
    python3 test/packaging/check_webhook_install.py "$SRC" build/bin/kubectl build/bin/helm ||
        fail "the webhook's install files (see above)"
    ok "config/with-webhook and the chart install the Challenge webhook as docs/operations.md says"
    gw=$(python3 test/packaging/check_chart_flags.py "$SRC" build/bin/helm) || { echo "$gw"; fail "the chart's gateway flags (see above)"; }
    ok "$gw"
else
    echo "skip: the webhook's install files and the chart's gateway flags need build/bin/kubectl and build/bin/helm (make helm)"
fi

v=$(sed -n 's/^project(kopc VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ -n "$v" ] || fail "no version in CMakeLists.txt"
check() { [ "$2" = "$v" ] || fail "$1 says '$2', CMakeLists.txt $v"; }
check include/kop/common.h "$(sed -n 's/^#define KOP_VERSION_STRING "\(.*\)"/\1/p' include/kop/common.h)"
check "Chart.yaml version" "$(sed -n 's/^version: *//p' charts/kopc-ctf/Chart.yaml)"
check "Chart.yaml appVersion" "$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/kopc-ctf/Chart.yaml)"
check "config/default newTag" "$(sed -n 's/^ *newTag: *//p' config/default/kustomization.yaml)"
check "config/migrate-storage newTag" "$(sed -n 's/^ *newTag: *//p' config/migrate-storage/kustomization.yaml)"
check "config/manager image" "$(sed -n 's#^ *image: ghcr.io/kopc/ctf-operator:\([^ ]*\).*#\1#p' config/manager/manager.yaml)"
check "Makefile IMAGE" "$(sed -n 's#^IMAGE *?= *ghcr.io/kopc/ctf-operator:##p' Makefile)"
check "CHANGELOG.md's first section" "$(grep -m1 '^## ' CHANGELOG.md | grep -o '[0-9][0-9.]*[0-9]' | head -1)"
check "integrations/ctfd/pyproject.toml version" "$(sed -n 's/^version *= *"\(.*\)"$/\1/p' integrations/ctfd/pyproject.toml)"
ok "version $v in CMake, the headers, the chart, the kustomize image, the Makefile, CHANGELOG.md and the CTFd plugin"
# What the docs tell users to write: find_package(kop MAJOR.MINOR) of this version
# (the package's version file accepts the same minor version only).
mm=${v%.*}
stale=$(grep -rnoE 'find_package\(kop [0-9][0-9.]*' docs cmake examples README.md | grep -v "find_package(kop $mm\$" || true)
[ -z "$stale" ] || fail "docs name another version than $mm: $stale"
ok "docs say find_package(kop $mm)"
# The soname they name follows the rule install_test.sh checks on the built
# library: libkop.so.MAJOR.MINOR while 0.x, libkop.so.MAJOR from 1.0 on
# (CHANGELOG.md and docs/reliability.md, which name past sonames, aside).
if [ "${v%%.*}" = 0 ]; then abi=$mm; else abi=${v%%.*}; fi
stale=$(grep -rnoE --exclude=reliability.md 'libkop\.so\.[0-9]([0-9.]*[0-9])?' docs cmake examples tools README.md |
        grep -vE "libkop\.so\.($abi|$v)\$" || true)
[ -z "$stale" ] || fail "docs name another soname than libkop.so.$abi: $stale"
ok "docs and install files name the soname libkop.so.$abi"

echo "$passed passed, 0 failed"
