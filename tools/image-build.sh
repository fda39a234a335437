#!/usr/bin/env bash
# image-build.sh - build the Dockerfiles for real, with no daemon and no
# public container registry: buildah runs the Dockerfile's steps as root in
# chroots (--isolation chroot) over storage of its own under build/image, on
# Debian base images made here by debootstrap from Debian's own packages.
#
#   tools/image-build.sh base              the base images (cached, see below)
#   tools/image-build.sh operator [REF]    ./Dockerfile, context the repo root
#                                          (REF default ghcr.io/kopc/ctf-operator:VERSION)
#   tools/image-build.sh project DIR [REF] DIR/Dockerfile of a project kop-gen made,
#                                          with --build-context kopc=<this repo>
#                                          (REF default localhost/<DIR's name>:0.1.0)
#   tools/image-build.sh verify REF BIN    the checks below on a built image
#   tools/image-build.sh push REF CLUSTER-DIR NAME
#                                          REF pushed to the registry of the devcluster
#                                          on CLUSTER-DIR as registry.devcluster.test/NAME
#   tools/image-build.sh check             base, both builds (a Website operator kop-gen
#                                          generates for the second) and verify of each
#                                          (`make image-check`; not part of `make test`)
#   tools/image-build.sh buildah ARGS...   buildah on this script's storage
#
# Why: docker.io cannot be reached from this machine or CI, and there is no
# container daemon; Debian's mirror can be reached. So the two bases the
# Dockerfiles name, debian:bookworm and debian:bookworm-slim, are made the
# way Debian's official images are (debuerreotype): a debootstrap minbase of
# bookworm from the mirror the host's apt sources name, brought up to date
# from bookworm-updates and bookworm-security, apt's lists and caches
# emptied; the slim one is the same file system without documentation, man
# pages and translations, and with dpkg told to leave them out of later
# installs. They are stored under the names docker.io/library/debian:TAG,
# which is what FROM debian:TAG means, so the Dockerfiles stay unchanged
# and build with docker elsewhere. The Debian release they come from is
# recorded on each as the label org.debian.release (the mirror's Release
# Version and Date): the host's apt sources name a snapshot in a comment,
# but snapshot.debian.org cannot be reached here, so the mirror's current
# bookworm point release is what gets built. `check` also compares the slim
# base's packages with the manifest of Debian's published image
# (test/packaging/debian-bookworm-slim.packages).
#
# Cache: everything lives in IMAGE_BUILD_DIR (default build/image, removed
# with the build): the debootstrap tree as a tar (debootstrap only when it is
# missing), buildah's storage (storage-DRIVER/, runroot run-DRIVER/) holding the bases and
# the builds' layers (--layers: an unchanged step is reused, so a second
# build only re-runs the steps from the first that changed; the layers no
# build leads to any more are pruned after each build).
# `base --refresh` (or removing build/image) makes the bases anew from
# today's mirror.
#
# Load: everything runs at nice 19 (the builds' steps inherit it) and the
# builds compile with one job (--build-arg CMAKE_BUILD_PARALLEL_LEVEL=1,
# JOBS overrides); buildah runs one stage at a time (--jobs 1).
#
# Needs root (chroots, mounts) and the Debian packages buildah and
# debootstrap: tools/install-deps.sh image installs them when missing.
#
# Env: IMAGE_BUILD_DIR, IMAGE_STORAGE_DRIVER (default: overlay where it
# mounts, else vfs), DEBIAN_MIRROR, DEBIAN_SECURITY_MIRROR (default: the
# URIs of the host's apt sources, else deb.debian.org), JOBS (default 1),
# KOPGEN (the kop-gen binary for `check`, default build/bin/kop-gen).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
D=${IMAGE_BUILD_DIR:-$here/build/image}
JOBS=${JOBS:-1}
SUITE=bookworm
VERSION=$(sed -n 's/^project(kopc VERSION \([0-9.]*\).*/\1/p' "$here/CMakeLists.txt")
BASE_FULL=docker.io/library/debian:$SUITE
BASE_SLIM=docker.io/library/debian:$SUITE-slim
NONROOT_UID=65532

die() { printf 'image-build: %s\n' "$*" >&2; exit 1; }
say() { printf 'image-build: %s\n' "$*" >&2; }

# The host's apt sources (deb822 or one-line), for the mirror to use.
host_uri() { # host_uri PATH-SUFFIX: the first URI of the host's sources ending in it
    local suffix=$1
    cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
        grep -oE 'https?://[^ ]+' | grep -E "/${suffix}/?\$" | grep -v snapshot | head -1 | sed 's:/*$::' || true
}
MIRROR=${DEBIAN_MIRROR:-$(host_uri debian)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=${DEBIAN_SECURITY_MIRROR:-$(host_uri debian-security)}
SECURITY=${SECURITY:-http://deb.debian.org/debian-security}

[ "$(id -u)" = 0 ] || die "needs root (buildah --isolation chroot and debootstrap mount and chroot)"
command -v buildah >/dev/null && command -v debootstrap >/dev/null || "$here/tools/install-deps.sh" image >&2

mkdir -p "$D"
# overlay_mounts: the kernel mounts overlayfs here (for root), as buildah's
# overlay driver needs; tried on an empty directory and unmounted at once.
overlay_mounts() {
    local t rc=1
    t=$(mktemp -d "$D/.overlay-probe.XXXXXX")
    mkdir -p "$t/lower" "$t/upper" "$t/work" "$t/merged"
    if mount -t overlay overlay -o "lowerdir=$t/lower,upperdir=$t/upper,workdir=$t/work" "$t/merged" 2>/dev/null; then
        umount "$t/merged" && rc=0
    fi
    rm -rf "$t"
    return $rc
}
# Our own storage, not /var/lib/containers, so it goes with build/. The
# driver: overlay where the kernel mounts overlayfs (layers share files;
# measured 8x smaller and, warm, 10x faster than vfs), else vfs, which
# works wherever buildah does at the price of a full copy of the file
# system per layer and per container. IMAGE_STORAGE_DRIVER=vfs|overlay
# chooses; each driver has a storage of its own.
DRIVER=${IMAGE_STORAGE_DRIVER:-auto}
if [ "$DRIVER" = auto ]; then
    if overlay_mounts; then DRIVER=overlay; else DRIVER=vfs; fi
fi
STORE=$D/storage-$DRIVER
BA=(nice -n 19 buildah --root "$STORE" --runroot "$D/run-$DRIVER" --storage-driver "$DRIVER")
# A registries.conf of our own, whatever the host's says: a short name
# means docker.io (FROM debian:bookworm finds the base stored as
# docker.io/library/debian:bookworm), and --pull=never on every build keeps
# buildah from asking a registry that cannot be reached.
cat >"$D/registries.conf" <<'EOF'
unqualified-search-registries = ["docker.io"]
short-name-mode = "permissive"
EOF
export CONTAINERS_REGISTRIES_CONF=$D/registries.conf
export BUILDAH_ISOLATION=chroot

have_image() { "${BA[@]}" inspect --type image "$1" >/dev/null 2>&1; }

# ---- the bases --------------------------------------------------------------

# rootfs_tar: the debootstrap minbase tree of bookworm as $D/base/rootfs.tar.
rootfs_tar() {
    local tree
    [ -s "$D/base/rootfs.tar" ] && return 0
    mkdir -p "$D/base"
    tree=$D/base/rootfs.tmp
    rm -rf "$tree"
    say "debootstrap --variant=minbase $SUITE from $MIRROR (once; cached in $D/base/rootfs.tar)"
    nice -n 19 debootstrap --variant=minbase --arch="$(dpkg --print-architecture)" \
        "$SUITE" "$tree" "$MIRROR" >"$D/base/debootstrap.log" 2>&1 ||
        { tail -20 "$D/base/debootstrap.log" >&2; die "debootstrap failed (log: $D/base/debootstrap.log)"; }
    # The debian:TAG images' apt sources: the suite, its updates and security.
    rm -f "$tree/etc/apt/sources.list"
    cat >"$tree/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    curl -fsS "$MIRROR/dists/$SUITE/Release" 2>/dev/null |
        sed -n 's/^Version: //p; s/^Date: //p' | paste -sd' ' >"$D/base/release" || true
    (cd "$tree" && tar --numeric-owner --xattrs -cf "$D/base/rootfs.tar.tmp" .)
    mv "$D/base/rootfs.tar.tmp" "$D/base/rootfs.tar"
    rm -rf "$tree"
}

# As Debian's images are cleaned: no apt lists or caches, no logs of the
# install, an empty machine-id, and services never started by an install
# (policy-rc.d), apt keeping no downloaded packages.
CLEAN_SCRIPT='
set -e
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old /var/lib/dpkg/*-old \
       /var/log/apt/* /var/log/dpkg.log /var/log/alternatives.log /var/log/bootstrap.log /tmp/* /var/tmp/*
: >/etc/machine-id
'
SETUP_SCRIPT='
set -e
printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d
chmod 0755 /usr/sbin/policy-rc.d
printf "DPkg::Post-Invoke { \"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb || true\"; };\nAPT::Update::Post-Invoke { \"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb || true\"; };\nAcquire::Languages \"none\";\n" >/etc/apt/apt.conf.d/docker-clean
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get -y -q dist-upgrade
'
# The slim variant: dpkg leaves documentation, man pages and translations
# out of every later install, and the ones already there go (copyright
# files and locale.alias stay).
SLIM_SCRIPT='
set -e
cat >/etc/dpkg/dpkg.cfg.d/docker <<EOF
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/man/*
EOF
find /usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete
find /usr/share/doc -mindepth 1 -type d -empty -delete
rm -rf /usr/share/groff/* /usr/share/info/* /usr/share/linda/* /usr/share/lintian/* /usr/share/man/*
find /usr/share/locale -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
'

# commit_base CONTAINER REF: CONTAINER as the image REF, one layer, the
# configuration of Debian's images.
commit_base() {
    local ctr=$1 ref=$2 release
    release=$(cat "$D/base/release" 2>/dev/null || true)
    "${BA[@]}" config --cmd bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --label "org.debian.release=Debian $SUITE ${release:-(unknown point release)} from $MIRROR" \
        --label "org.kopc.made-by=tools/image-build.sh (debootstrap --variant=minbase)" "$ctr"
    "${BA[@]}" commit -q --rm "$ctr" "$ref" >/dev/null
}

cmd_base() {
    local refresh=0 full slim src dst
    [ "${1:-}" = --refresh ] && refresh=1
    if [ $refresh = 1 ]; then
        rm -f "$D/base/rootfs.tar"
        "${BA[@]}" rmi -f "$BASE_FULL" "$BASE_SLIM" >/dev/null 2>&1 || true
    fi
    if have_image "$BASE_FULL" && have_image "$BASE_SLIM"; then
        say "bases present: $BASE_FULL, $BASE_SLIM ($(cat "$D/base/release" 2>/dev/null || echo 'release unknown'))"
        return 0
    fi
    rootfs_tar
    say "making $BASE_FULL"
    full=$("${BA[@]}" from --pull=false scratch)
    dst=$("${BA[@]}" mount "$full")
    tar --numeric-owner --xattrs -xpf "$D/base/rootfs.tar" -C "$dst"
    "${BA[@]}" run "$full" -- sh -c "$SETUP_SCRIPT" >"$D/base/upgrade.log" 2>&1 ||
        { tail -20 "$D/base/upgrade.log" >&2; die "updating the base failed"; }
    "${BA[@]}" run "$full" -- sh -c "$CLEAN_SCRIPT"
    say "making $BASE_SLIM"
    slim=$("${BA[@]}" from --pull=false scratch)
    src=$dst
    dst=$("${BA[@]}" mount "$slim")
    (cd "$src" && tar --numeric-owner --xattrs -cf - .) | tar --numeric-owner --xattrs -xpf - -C "$dst"
    "${BA[@]}" run "$slim" -- sh -c "$SLIM_SCRIPT"
    "${BA[@]}" umount "$full" "$slim" >/dev/null
    commit_base "$full" "$BASE_FULL"
    commit_base "$slim" "$BASE_SLIM"
    say "bases made: $(cat "$D/base/release" 2>/dev/null || echo 'release unknown')"
}

# ---- the builds -------------------------------------------------------------

# prune: the layers of builds since replaced would pile up (with vfs, each
# a full copy of the file system: ~650 MB a step of a build stage). After
# each build the images no tag leads to go; the bases,
# the built images and their build stages (tagged by bud) stay, so the next
# build reuses every step before the first that changed.
prune() {
    "${BA[@]}" rmi --prune >/dev/null 2>&1 || true
}

# bud REF CONTEXT [BUDFLAGS...]: build CONTEXT/Dockerfile as REF.
bud() {
    local ref=$1 ctx=$2 t0 log
    shift 2
    cmd_base
    log=$D/build-$(basename "${ref%%:*}").log
    say "buildah bud -t $ref $ctx (log: $log)"
    t0=$SECONDS
    local flags=(--isolation chroot --pull=never --layers --jobs 1
                 --build-arg "CMAKE_BUILD_PARALLEL_LEVEL=$JOBS" "$@")
    : >"$log"
    # The build stage first, under a tag of its own: its layers are then
    # kept by prune (nothing else leads to them: the runtime stage starts
    # from the slim base), and the full build below finds them cached.
    if grep -qiE '^FROM .* AS build$' "$ctx/Dockerfile"; then
        "${BA[@]}" bud "${flags[@]}" --target build -t "localhost/kopc-image-cache/$(basename "${ref%%:*}"):build" \
            "$ctx" >>"$log" 2>&1 || { tail -40 "$log" >&2; die "building $ref's build stage failed (log: $log)"; }
    fi
    "${BA[@]}" bud "${flags[@]}" -t "$ref" "$ctx" >>"$log" 2>&1 ||
        { tail -40 "$log" >&2; die "building $ref failed (log: $log)"; }
    prune
    say "built $ref in $((SECONDS - t0)) s"
}

cmd_operator() {
    bud "${1:-ghcr.io/kopc/ctf-operator:$VERSION}" "$here"
}

cmd_project() {
    local dir=${1:?usage: image-build.sh project DIR [REF]}
    dir=$(cd "$dir" && pwd)
    # buildah copies a named context without its .dockerignore: all of kopc
    # would take build/ along, this script's storage included (a copy into
    # itself that fills the disk).
    ! grep -qE '^COPY --from=kopc +(\.|\./|/) ' "$dir/Dockerfile" ||
        die "$dir/Dockerfile copies all of the kopc context; copy its CMakeLists.txt, cmake, include and src (see kop-gen's Dockerfile)"
    bud "${2:-localhost/$(basename "$dir"):0.1.0}" "$dir" --build-context "kopc=$here"
}

# ---- checks -----------------------------------------------------------------

# cmd_verify REF BIN: the image REF as its Dockerfile promises, and running:
#   - its configuration: user $NONROOT_UID, entrypoint /usr/local/bin/BIN;
#   - in a container of it, as the image's user (no --user given): the
#     process's uid is $NONROOT_UID, ldd finds every library the binary
#     needs, and the binary itself starts and prints its usage (--help),
#     so the runtime stage carries all it links.
cmd_verify() {
    local ref=${1:?usage: image-build.sh verify REF BIN} bin=${2:?usage: image-build.sh verify REF BIN}
    local user entry ctr out
    user=$("${BA[@]}" inspect --type image --format '{{.OCIv1.Config.User}}' "$ref")
    entry=$("${BA[@]}" inspect --type image --format '{{.OCIv1.Config.Entrypoint}}' "$ref")
    [ "$user" = "$NONROOT_UID:$NONROOT_UID" ] || die "$ref: USER is '$user', want $NONROOT_UID:$NONROOT_UID"
    [ "$entry" = "[/usr/local/bin/$bin]" ] || die "$ref: ENTRYPOINT is $entry"
    say "ok $ref: user $user, entrypoint $entry"
    ctr=$("${BA[@]}" from --pull=false "$ref")
    local rc=0
    out=$("${BA[@]}" run "$ctr" -- sh -c "id -u; id -g; ldd /usr/local/bin/$bin; /usr/local/bin/$bin --help" 2>&1) || rc=$?
    "${BA[@]}" rm "$ctr" >/dev/null
    [ $rc = 0 ] || die "$ref: the checks in the container failed (exit $rc): $out"
    [ "$(sed -n 1p <<<"$out")" = $NONROOT_UID ] && [ "$(sed -n 2p <<<"$out")" = $NONROOT_UID ] ||
        die "$ref: the container's process does not run as $NONROOT_UID: $out"
    ! grep -q 'not found' <<<"$out" || die "$ref: a library of $bin is missing: $(grep 'not found' <<<"$out")"
    grep -q "^usage: $bin" <<<"$out" || die "$ref: $bin --help did not print its usage: $out"
    say "ok $ref: runs as $NONROOT_UID:$NONROOT_UID, $(grep -c '=> /' <<<"$out") libraries found, $bin --help prints its usage"
}

# check_slim_packages: the slim base holds the packages of Debian's
# published debian:bookworm-slim (the manifest the packaging tests use).
check_slim_packages() {
    local ctr want got
    want=$(grep -v '^#' "$here/test/packaging/debian-bookworm-slim.packages" | sort)
    ctr=$("${BA[@]}" from --pull=false "$BASE_SLIM")
    got=$("${BA[@]}" run "$ctr" -- dpkg-query -W -f '${Package}\n' | sort)
    "${BA[@]}" rm "$ctr" >/dev/null
    [ "$want" = "$got" ] ||
        die "$BASE_SLIM's packages differ from Debian's published manifest: $(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | tr '\n' ' ')"
    say "ok $BASE_SLIM holds the $(wc -l <<<"$got") packages of Debian's published manifest"
}

cmd_check() {
    local kopgen=${KOPGEN:-$here/build/bin/kop-gen} gen t0
    [ -x "$kopgen" ] || die "no kop-gen at $kopgen: make build (or KOPGEN=...)"
    t0=$SECONDS
    cmd_base
    say "bases ready in $((SECONDS - t0)) s"
    check_slim_packages
    cmd_operator "ghcr.io/kopc/ctf-operator:$VERSION"
    cmd_verify "ghcr.io/kopc/ctf-operator:$VERSION" ctf-operator
    gen=$D/gen
    rm -rf "$gen"
    mkdir -p "$gen"
    "$kopgen" init --crd "$here/tools/kop-gen/testdata/website.yaml" --dir "$gen/website-operator" \
        --owns ConfigMap --owns Deployment >"$gen/init.log" || { cat "$gen/init.log" >&2; die "kop-gen init"; }
    cmd_project "$gen/website-operator" localhost/website-operator:0.1.0
    cmd_verify localhost/website-operator:0.1.0 website-operator
    say "check passed in $((SECONDS - t0)) s"
}

# cmd_push REF CLUSTER-DIR NAME: to the devcluster's registry over TLS,
# trusting the cluster's CA only; prints registry.devcluster.test/NAME@DIGEST
# as tools/images.sh does.
cmd_push() {
    local ref=${1:?} cdir=${2:?} name=${3:?} addr certs digest
    addr=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("10.%d.0.1:%d" % (224 + s.get("netIndex", 0), s["registryPort"]))' "$cdir/devcluster.json") ||
        die "$cdir/devcluster.json: no registry (a devcluster started with --real-nodes?)"
    certs=$(mktemp -d)
    # shellcheck disable=SC2064
    trap "rm -rf '$certs'" RETURN
    cp "$cdir/pki/ca.crt" "$certs/ca.crt"
    "${BA[@]}" push -q --cert-dir "$certs" --digestfile "$certs/digest" "$ref" "docker://$addr/$name" >&2 ||
        die "push $ref to $addr failed"
    digest=$(cat "$certs/digest")
    echo "registry.devcluster.test/${name%:*}@$digest"
}

case ${1:-} in
base) shift; cmd_base "$@" ;;
operator) shift; cmd_operator "$@" ;;
project) shift; cmd_project "$@" ;;
verify) shift; cmd_verify "$@" ;;
push) shift; cmd_push "$@" ;;
check) shift; cmd_check "$@" ;;
buildah) shift; exec "${BA[@]}" "$@" ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
