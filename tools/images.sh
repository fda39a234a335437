#!/usr/bin/env bash
# images.sh DIR [IMAGE...] - build the sample challenges' images and push them
# to the registry of the devcluster running on DIR (started with
# --real-nodes). No container engine is involved: `devcluster image` makes
# the layers from the static programs CMake built (examples/challenges) on
# Debian's busybox-static, and pushes them over TLS to the cluster's
# registry. Pods pull them as registry.devcluster.test/kopc/<name>:<version>.
#
# IMAGE is greeter or webflag (default: both). Prints one reference per
# image, with its digest. Building twice gives the same digests.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: images.sh DIR [greeter|webflag ...]}
shift
bin=${KOP_BIN:-$here/build/bin}
version=$(sed -n 's/^project(kopc VERSION \([0-9.]*\).*/\1/p' "$here/CMakeLists.txt")
images=("$@")
[ ${#images[@]} -gt 0 ] || images=(greeter webflag)

for name in "${images[@]}"; do
    case $name in
    greeter) port=1337 ;;
    webflag) port=8080 ;;
    *) echo "images.sh: unknown image $name (greeter, webflag)" >&2; exit 2 ;;
    esac
    prog=$bin/ctf-$name
    [ -x "$prog" ] || { echo "images.sh: $prog is missing: make build" >&2; exit 1; }
    "$bin/devcluster" image --dir "$dir" --name "kopc/ctf-$name:$version" \
        --file "$prog:/usr/local/bin/ctf-$name" --entrypoint "/usr/local/bin/ctf-$name" \
        --expose "$port" --env "PORT=$port" \
        --label "org.opencontainers.image.source=https://github.com/kopc/kopc" \
        --label "org.opencontainers.image.version=$version"
done
