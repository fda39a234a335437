#!/usr/bin/env bash
# install-deps.sh — install the Debian packages kopc builds and tests with,
# but only those that are missing, and say what it does. Called by `make`.
#
#   tools/install-deps.sh          the packages every build and test needs
#   tools/install-deps.sh image    only those that build the images from the
#                                  Dockerfiles without a daemon (tools/image-build.sh)
set -euo pipefail
group=${1:-base}
case "$group" in
  base|image) ;;
  *) echo "install-deps: unknown group '$group' (base or image)" >&2; exit 2 ;;
esac
pkgs=(build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev llvm
      libcurl4-openssl-dev libjansson-dev libfyaml-dev libmicrohttpd-dev libgnutls28-dev libssl-dev
      libcmocka-dev valgrind curl ca-certificates openssl chromium)
# The install tests read the rules, chart and kustomize YAML with Python;
# e2e_ctfd runs CTFd in a virtual environment (tools/ctfd.sh).
pkgs+=(python3 python3-yaml python3-venv)
# The devcluster's real nodes (devcluster start --real-nodes N): the container
# runtime, its OCI runtime and CNI plugins, what kube-proxy and kube-router
# program packets with, and busybox-static, the base of the images built here.
pkgs+=(containerd runc containernetworking-plugins iptables ipset nftables conntrack
       iproute2 busybox-static)
# The image group: buildah builds a Dockerfile as root with no daemon (chroot
# isolation, storage of its own), debootstrap makes the Debian base images that
# cannot be pulled here. Not part of the base group: only `make image` and
# `make image-check` need them.
[ "$group" = base ] || pkgs=(buildah debootstrap)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all Debian packages present"
  exit 0
fi
echo "install-deps: installing missing Debian packages: ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
