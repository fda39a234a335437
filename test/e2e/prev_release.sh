#!/usr/bin/env bash
# prev_release.sh SRC COMMIT OUT - the CTF operator of an earlier commit,
# built from its own tree, for the upgrade test (install_upgrade_test.sh).
#
# The tree of COMMIT (from SRC's git repository, `git archive`: nothing in
# SRC's work tree is checked out or touched) is unpacked into OUT/src and
# configured and built in OUT/build with the project's release settings, the
# ctf-operator target alone (no tests, no fuzzers). OUT/build is then what
# tools/images.sh takes as BUILD_DIR to make that release's image, and
# OUT/src holds that release's config/ and charts/. OUT/commit records what
# was built: a second run for the same commit builds nothing (the tree of a
# commit does not change), for another commit it starts again.
#
# Prints OUT. Fails loudly (non-zero, with the build's own output) when the
# commit is unknown or its tree does not build.
set -euo pipefail
src=${1:?usage: prev_release.sh SRC COMMIT OUT}
commit=${2:?usage: prev_release.sh SRC COMMIT OUT}
out=${3:?usage: prev_release.sh SRC COMMIT OUT}
full=$(git -C "$src" rev-parse --verify "$commit^{commit}") ||
    { echo "prev_release.sh: $commit is not a commit of $src" >&2; exit 1; }
# The project puts its programs in <source>/build/bin (CMAKE_RUNTIME_OUTPUT_DIRECTORY).
bin=$out/src/build/bin/ctf-operator
if [ "$(cat "$out/commit" 2>/dev/null)" = "$full" ] && [ -x "$bin" ]; then
    echo "$out"
    exit 0
fi
rm -rf "$out"
mkdir -p "$out/src"
git -C "$src" archive --format=tar "$full" | tar -x -C "$out/src"
log=$out/build.log
{
    cmake -S "$out/src" -B "$out/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DKOP_E2E=OFF -DKOP_INTEGRATION=OFF -DKOP_FUZZ=OFF -DKOP_SANITIZE=OFF &&
        nice -n 10 cmake --build "$out/build" -j2 --target ctf-operator
} >"$log" 2>&1 || { tail -40 "$log" >&2; echo "prev_release.sh: $full does not build" >&2; exit 1; }
[ -x "$bin" ] || { echo "prev_release.sh: $full built no $bin" >&2; exit 1; }
echo "$full" >"$out/commit"
echo "$out"
