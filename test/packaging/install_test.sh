#!/usr/bin/env bash
# install_test.sh - libkop as another project sees it. Installs the build
# (cmake --install, what `make install PREFIX=...` runs) into a fresh prefix,
# checks what lands there (static and shared library with a versioned
# soname exporting only kop_ symbols, headers, kop.pc, the CMake package),
# then builds the FlightTicket example out of tree, from a copy of its
# source, against the installed library only:
#   - with pkg-config: cc main.c $(pkg-config --cflags --libs kop);
#   - with CMake: find_package(kop 0.2) and kop::kop (shared) and
#     kop::kop_static (static); installed with cmake --install, the shared
#     one runs with CMAKE_INSTALL_RPATH_USE_LINK_PATH on (and, without, fails
#     to find libkop, as docs/install.md says);
# and runs each binary: it prints the common flags' usage (a libkop
# function) and reports a missing kubeconfig the way libkop does.
#
# Env: BUILD_DIR (the configured and built CMake build directory), SRC (repo
# root), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=../e2e/lib.sh
source "$(dirname "$0")/../e2e/lib.sh"

BUILD_DIR=${BUILD_DIR:?}
SRC=${SRC:?}
mkdir -p "${KOP_TEST_TMP:-/tmp}"
WORK=$(mktemp -d "${KOP_TEST_TMP:-/tmp}/install.XXXXXX")
PREFIX=$WORK/prefix
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT

version=$(sed -n 's/^project(kopc VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
[ -n "$version" ] || fail "no project version in CMakeLists.txt"
# The soname's ABI number, by the rule docs/install.md states: MAJOR.MINOR
# while the version is 0.x (a 0.x minor release may break the ABI), MAJOR
# from 1.0 on. Derived here from project(VERSION), apart from CMake's own
# computation, so that a version bump that forgets the rule fails.
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
if [ "$major" = 0 ]; then abi=$major.$minor; else abi=$major; fi

log "cmake --install into a fresh prefix"
cmake --install "$BUILD_DIR" --prefix "$PREFIX" >"$WORK/install.log" || { cat "$WORK/install.log"; fail "cmake --install"; }
lib=$PREFIX/lib
for f in libkop.a "libkop.so.$version" pkgconfig/kop.pc cmake/kop/kopConfig.cmake \
         cmake/kop/kopConfigVersion.cmake cmake/kop/kopTargets.cmake; do
    [ -f "$lib/$f" ] || fail "$lib/$f not installed"
done
soname=$(readelf -d "$lib/libkop.so.$version" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libkop.so.$abi" ] || fail "soname is '$soname', want libkop.so.$abi (version $version)"
[ "$(readlink "$lib/libkop.so")" = "libkop.so.$abi" ] || fail "libkop.so points at '$(readlink "$lib/libkop.so")', want libkop.so.$abi"
[ "$(readlink "$lib/libkop.so.$abi")" = "libkop.so.$version" ] || fail "libkop.so.$abi does not point at libkop.so.$version"
for h in "$SRC"/include/kop/*.h; do
    cmp -s "$h" "$PREFIX/include/kop/$(basename "$h")" || fail "header $(basename "$h") not installed as is"
done
ok "libkop.a, libkop.so.$version (soname libkop.so.$abi), headers, kop.pc and the CMake package installed"

others=$(nm -D --defined-only "$lib/libkop.so" | awk '$2 ~ /^[TDBR]$/ && $3 !~ /^kop_/ {print $3}')
[ -z "$others" ] || fail "the shared library exports symbols outside kop_: $others"
nsyms=$(nm -D --defined-only "$lib/libkop.so" | grep -c ' T kop_')
[ "$nsyms" -gt 100 ] || fail "only $nsyms kop_ functions exported"
ok "the shared library exports $nsyms kop_ functions and nothing else"

# The example's source, alone in a directory of its own: nothing of the
# source tree is on any include path.
mkdir -p "$WORK/ft"
cp "$SRC/examples/flightticket/main.c" "$SRC/examples/flightticket/webhook.c" \
    "$SRC/examples/flightticket/webhook.h" "$SRC/examples/flightticket/flight_ticket_types.h" "$WORK/ft/"

# run_example BINARY: it starts, prints libkop's usage for --help (kop_main:
# exit 0), and fails as libkop does on a kubeconfig that does not exist.
run_example() {
    local bin=$1 out
    out=$("$bin" --help 2>&1) || fail "$bin --help exited $?"
    grep -q -- '--metrics-bind ADDR' <<<"$out" || fail "$bin --help: $out"
    out=$("$bin" --kubeconfig "$WORK/no-such-kubeconfig" --metrics-bind 0 2>&1) && fail "$bin ran without a kubeconfig"
    grep -q 'no-such-kubeconfig' <<<"$out" || fail "$bin without a kubeconfig said: $out"
}

log "pkg-config"
export PKG_CONFIG_PATH=$lib/pkgconfig
[ "$(pkg-config --modversion kop)" = "$version" ] || fail "pkg-config --modversion kop"
cflags=$(pkg-config --cflags kop)
[[ $cflags == *"-I$PREFIX/include"* ]] || fail "pkg-config --cflags kop: $cflags"
# shellcheck disable=SC2046
cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -o "$WORK/ft/ft-pkgconfig" "$WORK/ft/main.c" "$WORK/ft/webhook.c" \
    $(pkg-config --cflags --libs kop) 2>"$WORK/cc.log" || { cat "$WORK/cc.log"; fail "cc with pkg-config"; }
readelf -d "$WORK/ft/ft-pkgconfig" | grep -q "NEEDED.*\[libkop.so.$abi\]" || fail "ft-pkgconfig does not need libkop.so.$abi"
LD_LIBRARY_PATH=$lib run_example "$WORK/ft/ft-pkgconfig"
# Under a prefix the loader does not search (docs/install.md): the run path
# recorded at link time is enough, with no LD_LIBRARY_PATH.
# shellcheck disable=SC2046
cc -std=c11 -D_GNU_SOURCE -o "$WORK/ft/ft-rpath" "$WORK/ft/main.c" "$WORK/ft/webhook.c" $(pkg-config --cflags --libs kop) \
    -Wl,-rpath,"$(pkg-config --variable=libdir kop)" 2>"$WORK/cc.log" || { cat "$WORK/cc.log"; fail "cc with an rpath"; }
(unset LD_LIBRARY_PATH; run_example "$WORK/ft/ft-rpath") || exit 1
# libkop linked statically, its dependencies (kop.pc's Requires.private)
# shared, as kop.pc's comment says.
# shellcheck disable=SC2046
cc -std=c11 -D_GNU_SOURCE -o "$WORK/ft/ft-pkgconfig-static" "$WORK/ft/main.c" "$WORK/ft/webhook.c" $(pkg-config --cflags kop) \
    -L"$lib" -Wl,-Bstatic -lkop -Wl,-Bdynamic \
    $(pkg-config --libs jansson $(pkg-config --print-requires-private kop)) -pthread \
    2>"$WORK/cc.log" || { cat "$WORK/cc.log"; fail "cc with pkg-config --static"; }
readelf -d "$WORK/ft/ft-pkgconfig-static" | grep -q 'NEEDED.*libkop' && fail "ft-pkgconfig-static needs libkop.so"
run_example "$WORK/ft/ft-pkgconfig-static"
ok "FlightTicket builds out of tree with pkg-config (shared, shared with an rpath, static) and runs"

log "CMake find_package(kop)"
cat >"$WORK/ft/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.22)
project(flightticket-outside LANGUAGES C)
find_package(kop 0.2 REQUIRED)
add_executable(ft-cmake main.c webhook.c)
target_link_libraries(ft-cmake PRIVATE kop::kop)
add_executable(ft-cmake-static main.c webhook.c)
target_link_libraries(ft-cmake-static PRIVATE kop::kop_static)
set_target_properties(ft-cmake ft-cmake-static PROPERTIES C_STANDARD 11 C_EXTENSIONS ON)
install(TARGETS ft-cmake)
CM
cmake -S "$WORK/ft" -B "$WORK/ft/build" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" >"$WORK/cmake.log" 2>&1 ||
    { cat "$WORK/cmake.log"; fail "cmake configure with find_package(kop)"; }
cmake --build "$WORK/ft/build" >"$WORK/cmake.log" 2>&1 || { cat "$WORK/cmake.log"; fail "cmake build"; }
readelf -d "$WORK/ft/build/ft-cmake" | grep -q "NEEDED.*\[libkop.so.$abi\]" || fail "ft-cmake does not need libkop.so.$abi"
readelf -d "$WORK/ft/build/ft-cmake-static" | grep -q 'NEEDED.*libkop' && fail "ft-cmake-static needs libkop.so"
run_example "$WORK/ft/build/ft-cmake" # CMake's build RPATH finds the prefix's libkop.so
run_example "$WORK/ft/build/ft-cmake-static"
# Installed (docs/install.md): CMake drops the build tree's run path, so the
# installed binary finds a libkop outside the loader's path only with
# CMAKE_INSTALL_RPATH_USE_LINK_PATH on.
for rp in OFF ON; do
    if ! { cmake -S "$WORK/ft" -B "$WORK/ft/build-rp$rp" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" \
               -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=$rp &&
           cmake --build "$WORK/ft/build-rp$rp" &&
           cmake --install "$WORK/ft/build-rp$rp" --prefix "$WORK/ft/inst-rp$rp"; } >"$WORK/cmake.log" 2>&1; then
        cat "$WORK/cmake.log"
        fail "cmake build and install with CMAKE_INSTALL_RPATH_USE_LINK_PATH=$rp"
    fi
done
out=$(env -u LD_LIBRARY_PATH "$WORK/ft/inst-rpOFF/bin/ft-cmake" --help 2>&1) &&
    fail "the installed binary found libkop without a run path (is libkop on the loader's path?)"
grep -q 'libkop.so' <<<"$out" || fail "the installed binary without a run path said: $out"
(unset LD_LIBRARY_PATH; run_example "$WORK/ft/inst-rpON/bin/ft-cmake") || exit 1
ok "installed with cmake --install: libkop found through CMAKE_INSTALL_RPATH_USE_LINK_PATH, not found without it"
sed -i 's/find_package(kop 0.2 REQUIRED)/find_package(kop 9.0 REQUIRED)/' "$WORK/ft/CMakeLists.txt"
if cmake -S "$WORK/ft" -B "$WORK/ft/build-v9" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null 2>&1; then
    fail "find_package(kop 9.0) accepted version $version"
fi
ok "FlightTicket builds out of tree with find_package(kop): kop::kop (shared) and kop::kop_static, and runs; kop 9.0 is refused"

echo "$passed passed, 0 failed"
