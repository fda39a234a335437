# The CTF operator's image: a Debian build stage, and a slim runtime stage
# with the binary, the shared libraries it links and nothing else, run as a
# non-root user.
#
#   docker build -t ghcr.io/kopc/ctf-operator:0.2.0 .      (or: make image IMAGE=...)
#
# Verified by building it: `make image-check` (tools/image-build.sh) builds
# this file with buildah, no daemon, on debian:bookworm and bookworm-slim
# made from Debian's packages by debootstrap, then runs the image: user
# 65532, every library found, --help; `make image-e2e` deploys it on a
# devcluster with a real node (kubectl apply -k) and sees it Ready, leading
# and serving. test/packaging/image_libs_test.sh (in make test) reads the
# runtime stage's package list below and checks with no container engine
# that the binary needs no library those packages and the base image do not
# carry; keep the two stages on the same Debian release. docs/install.md
# says how to build, push and use the image.

# ---- build ------------------------------------------------------------------
FROM debian:bookworm AS build
# How many compile jobs cmake --build runs (--build-arg CMAKE_BUILD_PARALLEL_LEVEL=1
# on a shared machine); unset, the build tool's default.
ARG CMAKE_BUILD_PARALLEL_LEVEL
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libcurl4-openssl-dev libjansson-dev libfyaml-dev libmicrohttpd-dev libgnutls28-dev libssl-dev libcmocka-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DKOP_INTEGRATION=OFF -DKOP_E2E=OFF \
 && cmake --build /build --target ctf-operator \
 && cmake --install /build --component operator --prefix /out --strip

# ---- runtime ----------------------------------------------------------------
FROM debian:bookworm-slim AS runtime
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      libcurl4 libjansson4 libfyaml0 libmicrohttpd12 libgnutls30 libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/bin/ctf-operator /usr/local/bin/ctf-operator
# 65532 is the conventional "nonroot" user of distroless images; the
# Deployment (config/manager) runs as it too, with a read-only root.
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/ctf-operator"]
