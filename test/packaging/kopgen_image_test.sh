#!/usr/bin/env bash
# kopgen_image_test.sh - the image of a project kop-gen generates, checked
# without docker as image_libs_test.sh checks kopc's own: a Website operator
# generated from the sample CRD (owning a ConfigMap and a Deployment), then
# image_libs_test.sh on its Dockerfile:
#   - two stages on bookworm, the binary alone in a slim runtime stage run
#     as a non-root user, its ENTRYPOINT the binary;
#   - the build stage's commands run here as they run in the image: libkop
#     built from a copy of kopc's source (the build context named kopc,
#     without what kopc's .dockerignore leaves out) and installed into the
#     stage's /usr/local, then the project configured with find_package(kop)
#     from there, linked with libkop statically, installed stripped;
#   - every library ldd finds for that binary is in the runtime image (the
#     base's packages and what its apt-get install pulls in), every library
#     it names itself comes from a package the runtime stage lists, and no
#     listed library package is unused;
#   - the binary starts (--help) in a root holding only those packages'
#     libraries.
#
# Env: SRC (repo root), KOPGEN (the kop-gen binary), KOP_TEST_TMP.
set -euo pipefail
# shellcheck source=../e2e/lib.sh
source "$(dirname "$0")/../e2e/lib.sh"

SRC=${SRC:?}
KOPGEN=${KOPGEN:?}
mkdir -p "${KOP_TEST_TMP:-/tmp}"
GEN=$(mktemp -d "${KOP_TEST_TMP:-/tmp}/kopgen-image.XXXXXX")
trap 'rm -rf "$GEN"' EXIT

log "kop-gen init: the Website operator"
"$KOPGEN" init --crd "$SRC/tools/kop-gen/testdata/website.yaml" --dir "$GEN/website-operator" \
    --owns ConfigMap --owns Deployment >"$GEN/init.log" || { cat "$GEN/init.log"; printf 'FAIL: kop-gen init\n' >&2; exit 1; }
grep -q -- '--build-context kopc=' "$GEN/website-operator/Dockerfile" ||
    { printf 'FAIL: the Dockerfile no longer names its kopc build context\n' >&2; exit 1; }

IMAGE_DOCKERFILE=$GEN/website-operator/Dockerfile IMAGE_CONTEXT=$GEN/website-operator \
    IMAGE_BIN=website-operator IMAGE_NAMED_CONTEXT=kopc=$SRC \
    "$(dirname "$0")/image_libs_test.sh"
