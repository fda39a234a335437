#!/usr/bin/env bash
# images.sh DIR [IMAGE...] - build the sample challenges' images and push them
# to the registry of the devcluster running on DIR (started with
# --real-nodes). No container engine is involved: `devcluster image` makes
# the layers from the static programs CMake built (examples/challenges) on
# Debian's busybox-static, and pushes them over TLS to the cluster's
# registry. Pods pull them as registry.devcluster.test/kopc/<name>:<version>.
#
# IMAGE is greeter, webflag (default: both) or operator: the CTF operator
# itself, stripped as `cmake --install --component operator --strip` makes
# it, with the shared libraries it links (the files of the Debian packages
# this machine has, at their own paths: what the Dockerfile's runtime stage
# installs) on the busybox base. TAG (default: the project's version) names
# the tag. Prints one reference per image, with its digest. Building twice
# gives the same digests.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: images.sh DIR [greeter|webflag ...]}
shift
bin=${KOP_BIN:-$here/build/bin}
version=${TAG:-$(sed -n 's/^project(kopc VERSION \([0-9.]*\).*/\1/p' "$here/CMakeLists.txt")}
images=("$@")
[ ${#images[@]} -gt 0 ] || images=(greeter webflag)

# operator_image: the operator and the libraries ldd finds for it.
operator_image() {
    local stage lib files=()
    stage=$(mktemp -d)
    trap 'rm -rf "$stage"' RETURN
    cmake --install "${BUILD_DIR:-$here/build/cmake}" --component operator --prefix "$stage" --strip >/dev/null
    files+=(--file "$stage/bin/ctf-operator:/usr/local/bin/ctf-operator")
    for lib in $(ldd "$stage/bin/ctf-operator" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
        files+=(--file "$(readlink -f "$lib"):$lib")
    done
    "$bin/devcluster" image --dir "$dir" --name "kopc/ctf-operator:$version" "${files[@]}" \
        --entrypoint /usr/local/bin/ctf-operator --expose 8080 --expose 9090 \
        --label "org.opencontainers.image.source=https://github.com/kopc/kopc" \
        --label "org.opencontainers.image.version=$version"
}

for name in "${images[@]}"; do
    case $name in
    greeter) port=1337 ;;
    webflag) port=8080 ;;
    operator) operator_image; continue ;;
    *) echo "images.sh: unknown image $name (greeter, webflag, operator)" >&2; exit 2 ;;
    esac
    prog=$bin/ctf-$name
    [ -x "$prog" ] || { echo "images.sh: $prog is missing: make build" >&2; exit 1; }
    "$bin/devcluster" image --dir "$dir" --name "kopc/ctf-$name:$version" \
        --file "$prog:/usr/local/bin/ctf-$name" --entrypoint "/usr/local/bin/ctf-$name" \
        --expose "$port" --env "PORT=$port" \
        --label "org.opencontainers.image.source=https://github.com/kopc/kopc" \
        --label "org.opencontainers.image.version=$version"
done
