#!/usr/bin/env bash
# image_libs_test.sh - the container image's promise, checked without docker:
# the operator runs with only the libraries the image carries.
#
#   1. The Dockerfile: a debian:bookworm build stage, a debian:bookworm-slim
#      runtime stage that copies in only the binary and runs as a non-root
#      user; its apt-get install list is read from the file.
#   2. The build stage's cmake commands run here, on a copy of the build
#      context without what .dockerignore leaves out, so the binary checked
#      is built the way the image builds it.
#   3. Every library ldd resolves for that binary belongs (dpkg -S) to a
#      package the image has: one of debian:bookworm-slim
#      (debian-bookworm-slim.packages, the published manifest of that image)
#      or one the runtime stage's apt-get install pulls in (the listed
#      packages and their Depends/Pre-Depends, recursively). Every library the
#      binary names itself (NEEDED) comes from a listed package or libc6, and
#      every listed library package is used.
#   4. When this user may chroot (root, or an unprivileged user namespace),
#      a root holding only the binary and the shared objects of those
#      packages is built, and the binary runs in it (--help prints the usage
#      and exits 0).
#
# Env: SRC (repo root), KOP_TEST_TMP. Runs on Debian bookworm (the release
# the image is built from), where the packages' files are known to dpkg.
# kopgen_image_test.sh runs the same checks on the Dockerfile of a project
# kop-gen generated: IMAGE_DOCKERFILE (default: SRC's), IMAGE_CONTEXT (its
# build context, default: SRC), IMAGE_BIN (the binary's name, default
# ctf-operator), IMAGE_NAMED_CONTEXT NAME=DIR (a build context the
# Dockerfile copies from with COPY --from=NAME, as docker build
# --build-context gives it).
set -euo pipefail
# shellcheck source=../e2e/lib.sh
source "$(dirname "$0")/../e2e/lib.sh"

SRC=${SRC:?}
HERE=$(cd "$(dirname "$0")" && pwd)
DOCKERFILE=${IMAGE_DOCKERFILE:-$SRC/Dockerfile}
CONTEXT=${IMAGE_CONTEXT:-$SRC}
BIN_NAME=${IMAGE_BIN:-ctf-operator}
mkdir -p "${KOP_TEST_TMP:-/tmp}"
WORK=$(mktemp -d "${KOP_TEST_TMP:-/tmp}/image.XXXXXX")
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT

. /etc/os-release
[ "${VERSION_CODENAME:-}" = bookworm ] || fail "this check maps libraries to bookworm's packages; this is ${PRETTY_NAME:-unknown}"

log "the Dockerfile"
# dockerfile.py prints shell assignments: BUILD_FROM, RUNTIME_FROM, RUNTIME_USER,
# ENTRYPOINT, COPIES (runtime stage COPY lines), PACKAGES, BUILD_RUN (the build
# stage's cmake commands, in order).
python3 - "$DOCKERFILE" >"$WORK/dockerfile.sh" <<'PY'
import re, shlex, sys
lines, cur = [], ""
for raw in open(sys.argv[1]):
    s = raw.rstrip("\n")
    if not cur and (not s.strip() or s.lstrip().startswith("#")):
        continue
    if s.endswith("\\"):
        cur += s[:-1] + " "
        continue
    lines.append(cur + s)
    cur = ""
stages = []
for l in lines:
    word, _, rest = l.strip().partition(" ")
    word = word.upper()
    if word == "FROM":
        stages.append({"from": rest.split()[0], "ins": []})
    elif stages:
        stages[-1]["ins"].append((word, rest.strip()))
build, runtime = stages[0], stages[-1]
pkgs = []
for w, rest in runtime["ins"]:
    if w == "RUN":
        for cmd in re.split(r"&&|;", rest):
            t = shlex.split(cmd)
            if "apt-get" in t and "install" in t:
                pkgs += [x for x in t[t.index("install") + 1:] if not x.startswith("-")]
users = [rest for w, rest in runtime["ins"] if w == "USER"]
entry = [rest for w, rest in runtime["ins"] if w == "ENTRYPOINT"]
copies = [rest for w, rest in runtime["ins"] if w == "COPY"]
runs = [rest for w, rest in build["ins"] if w == "RUN" and "cmake -S" in rest]
copies_from = [rest for w, rest in build["ins"] if w == "COPY" and rest.startswith("--from=")]
out = {"BUILD_FROM": build["from"], "RUNTIME_FROM": runtime["from"],
       "RUNTIME_USER": users[-1] if users else "", "ENTRYPOINT": entry[-1] if entry else "",
       "COPIES": "\n".join(copies), "PACKAGES": " ".join(pkgs), "BUILD_RUN": " && ".join(runs),
       "BUILD_COPIES_FROM": "\n".join(copies_from)}
for k, v in out.items():
    print(f"{k}={shlex.quote(v)}")
PY
# shellcheck disable=SC1091
source "$WORK/dockerfile.sh"
[ "$BUILD_FROM" = debian:bookworm ] || fail "build stage FROM $BUILD_FROM, want debian:bookworm"
[ "$RUNTIME_FROM" = debian:bookworm-slim ] || fail "runtime stage FROM $RUNTIME_FROM, want debian:bookworm-slim (the manifest this test knows)"
uid=${RUNTIME_USER%%:*}
[[ $uid =~ ^[0-9]+$ && $uid != 0 ]] || fail "runtime stage USER '$RUNTIME_USER' is not a numeric non-root user"
[ "$(wc -l <<<"$COPIES")" = 1 ] && [[ $COPIES == "--from=build "*"/$BIN_NAME "* ]] ||
    fail "the runtime stage should copy in the binary alone, copies: $COPIES"
[[ $ENTRYPOINT == *"\"/usr/local/bin/$BIN_NAME\""* ]] || fail "ENTRYPOINT is $ENTRYPOINT"
[ -n "$PACKAGES" ] && [ -n "$BUILD_RUN" ] || fail "no package list or no cmake build in the Dockerfile"
read -ra listed <<<"$PACKAGES"
for p in "${listed[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        fail "runtime package $p is not a bookworm package installed here (tools/install-deps.sh installs the -dev packages that pull it in)"
done
ok "two stages on bookworm, the binary alone in a slim non-root runtime with: ${listed[*]}"

log "the build stage, here"
# copy_context DIR DEST: DIR as a build context, without what its .dockerignore leaves out.
copy_context() {
    local excludes=() pat
    if [ -f "$1/.dockerignore" ]; then
        while read -r pat; do
            pat=${pat%/}
            case $pat in '' | '#'*) continue ;; '**/'*) excludes+=("--exclude=${pat#\*\*/}") ;; *) excludes+=("--exclude=./$pat") ;; esac
        done <"$1/.dockerignore"
    fi
    mkdir -p "$2"
    (cd "$1" && tar "${excludes[@]}" -cf - .) | tar -xf - -C "$2"
}
# The build stage's file system is $WORK/stage: its absolute paths (/build,
# /out, a named context's /kopc, /usr/local) move there, and CMake searches
# $WORK/stage/usr/local as the image's cmake searches /usr/local.
STAGE=$WORK/stage
copy_context "$CONTEXT" "$WORK/context"
while read -r from_name from_src from_dest; do
    [ -n "$from_name" ] || continue
    from_name=${from_name#--from=}
    [ "$from_name" != build ] || continue
    [ "${IMAGE_NAMED_CONTEXT%%=*}" = "$from_name" ] || fail "COPY --from=$from_name: no build context $from_name given"
    if [ -d "${IMAGE_NAMED_CONTEXT#*=}/$from_src" ]; then
        copy_context "${IMAGE_NAMED_CONTEXT#*=}/$from_src" "$STAGE$from_dest"
    else
        install -D -m 0644 "${IMAGE_NAMED_CONTEXT#*=}/$from_src" "$STAGE$from_dest" ||
            fail "COPY --from=$from_name $from_src: no such file in ${IMAGE_NAMED_CONTEXT#*=}"
    fi
done <<<"$BUILD_COPIES_FROM"
run=$(python3 -c 'import re, sys; print(re.sub(r"(?<=[\s=])/(?=[A-Za-z])", sys.argv[2] + "/", sys.argv[1]))' "$BUILD_RUN" "$STAGE")
(cd "$WORK/context" && CMAKE_PREFIX_PATH=$STAGE/usr/local nice -n 10 bash -euc "$run") >"$WORK/build.log" 2>&1 ||
    { tail -30 "$WORK/build.log"; fail "the build stage's cmake commands failed"; }
BIN=$STAGE/out/bin/$BIN_NAME
[ -x "$BIN" ] || fail "the build stage did not install bin/$BIN_NAME"
ok "the build stage's cmake commands build and install bin/$BIN_NAME from the build context"

log "every library from a package of the image"
# pkg_of FILE: the package that owns FILE (usr-merged paths tried both ways).
pkg_of() {
    local f=$1 r c
    r=$(readlink -f "$f")
    for c in "$f" "$r" "${f#/usr}" "${r#/usr}" "/usr$f" "/usr$r"; do
        dpkg -S "$c" 2>/dev/null | head -1 | cut -d: -f1 && return 0
    done
    return 1
}
# The image's packages: the base, and the listed ones with their dependencies.
declare -A image=() seen=()
while read -r p; do image[$p]=base; done < <(grep -v '^#' "$HERE/debian-bookworm-slim.packages")
queue=("${listed[@]}")
while [ ${#queue[@]} -gt 0 ]; do
    p=${queue[0]}
    queue=("${queue[@]:1}")
    [ -n "${seen[$p]:-}" ] && continue
    seen[$p]=1
    image[$p]=${image[$p]:-apt}
    deps=$(dpkg-query -W -f='${Depends}, ${Pre-Depends}' "$p" 2>/dev/null || true)
    # "a (>= 1) | b, c" -> each installed alternative (apt takes one of them).
    for d in $(tr ',|' '\n\n' <<<"$deps" | sed 's/([^)]*)//g; s/:any//g; s/[[:space:]]//g' | sort -u); do
        dpkg-query -W -f='${Status}' "$d" 2>/dev/null | grep -q 'install ok installed' && queue+=("$d")
    done
done
declare -A used=()
missing=()
while read -r lib path; do
    p=$(pkg_of "$path") || fail "no package owns $path ($lib)"
    used[$p]=1
    [ -n "${image[$p]:-}" ] || missing+=("$lib ($p)")
    printf '  %-24s %-20s %s\n' "$lib" "$p" "${image[$p]:-NOT IN THE IMAGE}"
done < <(ldd "$BIN" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3} $1 ~ /^\// {print $1, $1}')
[ ${#missing[@]} -eq 0 ] || fail "libraries the image lacks: ${missing[*]}"
for lib in $(readelf -d "$BIN" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    path=$(ldd "$BIN" | awk -v l="$lib" '$1 == l {print $3} $1 ~ ("/" l "$") {print $1}' | head -1)
    [ -n "$path" ] && p=$(pkg_of "$path") || fail "ldd does not resolve $lib"
    [[ " ${listed[*]} " == *" $p "* || $p == libc6 ]] ||
        fail "the binary links $lib of $p itself: list $p in the runtime stage"
done
for p in "${listed[@]}"; do
    [[ $p != lib* || -n "${used[$p]:-}" ]] || fail "runtime package $p is listed but no library of it is used"
done
ok "ldd's ${#used[@]} packages are all in the image; each NEEDED library is listed; no listed library is unused"

log "the binary in a root of only those libraries"
chroot_cmd=()
if [ "$(id -u)" = 0 ]; then
    chroot_cmd=(chroot)
elif unshare -r true 2>/dev/null; then
    chroot_cmd=(unshare -r chroot)
fi
if [ ${#chroot_cmd[@]} -eq 0 ]; then
    echo "# skipped: chroot needs root or unprivileged user namespaces"
else
    root=$WORK/root
    mkdir -p "$root/usr/local/bin" "$root/usr/lib" "$root/usr/bin" "$root/tmp"
    ln -s usr/lib "$root/lib"
    ln -s usr/lib64 "$root/lib64"
    ln -s usr/bin "$root/bin"
    cp "$BIN" "$root/usr/local/bin/$BIN_NAME"
    for p in "${!image[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || continue
        dpkg -L "$p" | { grep -E '^(/usr)?/lib(64|/x86_64-linux-gnu)?/[^/]*\.so(\.[0-9.]+)?$' || true; } | while read -r f; do
            [ -e "$f" ] || continue
            d=$root/usr${f#/usr}
            mkdir -p "$(dirname "$d")"
            cp -L "$f" "$d"
        done
    done
    # --help prints the usage and exits 0 (a wrong flag would exit 2).
    out=$("${chroot_cmd[@]}" "$root" "/usr/local/bin/$BIN_NAME" --help 2>&1) ||
        fail "$BIN_NAME --help exited $? in a root of the image's libraries: $out"
    grep -q "usage: $BIN_NAME" <<<"$out" || fail "the binary does not start in a root of the image's libraries: $out"
    ok "the binary starts in a root holding only the image's shared libraries ($(find "$root" -name '*.so*' | wc -l) files)"
fi

echo "$passed passed, 0 failed"
