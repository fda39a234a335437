# kopc - thin wrapper over CMake (C), Go (tools/devcluster) and npm (the page test).
#
#   make run     the demo: devcluster, CRDs, sample challenges, the CTF operator
#   make test    everything: unit, sanitizer, integration and e2e tests
#   make test-hog   make test on a fresh clone of HEAD, HOG_RUNS (3) times in a row, a CPU hog beside it (hours)
#   make stop    stop the demo cluster
#   make fuzz    run every fuzz target for FUZZ_SECONDS (default 600) each
#   make install PREFIX=DIR   libkop (static, shared), headers, kop.pc, CMake package
#   make helm    build/bin/helm, the Helm CLI pinned in tools/helm/go.mod
#   make cert-manager   build/bin/cert-manager-{controller,cainjector} and its CRDs, for e2e_install_certmanager
#   make image   the operator's container image IMAGE (docker, podman or, with no daemon, buildah; not in make test)
#   make image-check   both Dockerfiles (the operator's, a kop-gen project's) built with buildah and run (minutes; not in make test)
#   make image-e2e   the Dockerfile's image deployed with kubectl apply -k on a real-node devcluster (not in make test)
#   make bench   kopc against controller-runtime and kopf (3 interleaved trials: hours; writes docs/benchmarks.md)
#   make bench-quick   the same with a few objects, to see the harness work (BENCH_QUICK=1 too)
#   make soak    an hour (SOAK_SECONDS) of instance churn, RSS and open fds sampled (not in make test)
#
# Both install what is missing first (Debian packages through apt-get, Go
# modules through the Go proxy; for make test also the page test's npm packages,
# through npm ci).
# Go keeps its module and build caches in their default places, so a warm
# machine rebuilds the devcluster in seconds.

BUILD      := build
BIN        := $(BUILD)/bin
CMAKE_DIR  := $(BUILD)/cmake
ASAN_DIR   := $(BUILD)/asan
FUZZ_DIR   := $(BUILD)/fuzz
FUZZ_SECONDS ?= 600
RUN_DIR    := $(BUILD)/run/devcluster
PAGE_DIR   := test/e2e/page
DEVCLUSTER := $(BIN)/devcluster
KUBECTL    := $(BIN)/kubectl
JOBS       ?= $(shell nproc)
# Tests at once in the regular stage: two fake-node clusters side by side,
# whatever the machine's size (real-node and integration tests run alone).
TEST_JOBS  ?= 2
GO         ?= go
GO_MIN     := 1.26

# The Kubernetes version the devcluster is built from, read from its go.mod,
# goes into the version ldflags so /version reports it.
K8S_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" { print $$2; exit }' tools/devcluster/go.mod)
K8S_MAJOR   := $(word 1,$(subst ., ,$(K8S_VERSION:v%=%)))
K8S_MINOR   := $(word 2,$(subst ., ,$(K8S_VERSION:v%=%)))
VERSION_PKGS := k8s.io/component-base/version k8s.io/client-go/pkg/version
GO_LDFLAGS  := -s -w $(foreach p,$(VERSION_PKGS),-X $(p).gitVersion=$(K8S_VERSION) \
	-X $(p).gitMajor=$(K8S_MAJOR) -X $(p).gitMinor=$(K8S_MINOR) -X $(p).gitTreeState=clean)

.PHONY: all deps go-check devcluster page-deps build build-asan test test-unit test-e2e fuzz run stop clean help

all: build devcluster

help:
	@sed -n 's/^#   //p' Makefile

deps:
	@tools/install-deps.sh

go-check:
	@command -v $(GO) >/dev/null || { echo "make: Go $(GO_MIN)+ is required (https://go.dev/dl)"; exit 1; }
	@v=$$($(GO) env GOVERSION | sed 's/^go//'); \
	 if [ "$$(printf '%s\n%s\n' "$(GO_MIN)" "$$v" | sort -V | head -1)" != "$(GO_MIN)" ]; then \
	   echo "make: Go $(GO_MIN)+ is required, found $$v"; exit 1; fi

# Helm, for the chart's lint and template tests (charts/kopc-ctf), built from
# the version pinned in tools/helm/go.mod with the ldflags Helm's own Makefile
# sets, so `helm version` and the default Kubernetes version of `helm template`
# are right.
HELM          := $(BIN)/helm
HELM_VERSION  := $(shell awk '$$1 == "helm.sh/helm/v3" { print $$2; exit }' tools/helm/go.mod)
HELM_K8S      := $(shell awk '$$1 == "k8s.io/client-go" { print $$2; exit }' tools/helm/go.mod)
HELM_K8S_MINOR := $(word 2,$(subst ., ,$(HELM_K8S:v%=%)))
HELM_LDFLAGS  := -s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	-X helm.sh/helm/v3/internal/version.gitTreeState=clean \
	$(foreach p,helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil,\
	  -X $(p).k8sVersionMajor=1 -X $(p).k8sVersionMinor=$(HELM_K8S_MINOR))
PREFIX        ?= /usr/local
IMAGE         ?= ghcr.io/kopc/ctf-operator:0.2.0

.PHONY: helm install image image-check image-e2e
test test-e2e: helm

helm: go-check
	@mkdir -p $(BIN)
	cd tools/helm && $(GO) build -ldflags '$(HELM_LDFLAGS)' -o ../../$(HELM) helm.sh/helm/v3/cmd/helm

# libkop for other projects: pkg-config --cflags --libs kop, or
# find_package(kop) and kop::kop (docs/install.md). DESTDIR works too.
install: build
	cmake --install $(CMAKE_DIR) --prefix $(PREFIX)

# The operator's image (Dockerfile: a Debian build stage, a slim non-root
# runtime stage), with docker when its daemon answers, else podman, else
# buildah (tools/image-build.sh: as root, no daemon, the Debian bases made by
# debootstrap since docker.io may be out of reach; `tools/install-deps.sh
# image` installs buildah and debootstrap). test/packaging/image_libs_test.sh
# checks without any of them that the binary needs only the libraries the
# runtime stage installs; the e2e install tests deploy an image made without
# the Dockerfile (tools/images.sh operator).
ENGINE ?= $(shell { docker info >/dev/null 2>&1 && command -v docker; } || command -v podman 2>/dev/null || command -v buildah 2>/dev/null)
image:
	@[ -n "$(ENGINE)" ] || { echo "make image: needs docker (with its daemon), podman or buildah (tools/install-deps.sh image installs buildah)"; exit 1; }
	@if [ "$(notdir $(ENGINE))" = buildah ]; then \
	  set -x; tools/image-build.sh operator $(IMAGE) && tools/image-build.sh verify $(IMAGE) ctf-operator; \
	else \
	  set -x; $(ENGINE) build -t $(IMAGE) . && $(ENGINE) run --rm $(IMAGE) --help 2>&1 | grep -q 'usage: ctf-operator'; \
	fi

# Both Dockerfiles built for real with buildah, no daemon (tools/image-build.sh
# check): the operator's from the repo root, and the one kop-gen scaffolds,
# for a Website operator it generates, with kopc as its build context; then
# each image run: as user 65532, every library found, --help. Installs
# buildah and debootstrap when missing. Cold (bases made, packages fetched)
# a few minutes at nice 19 and one compile job; warm a few seconds per image
# (docs/install.md has the times).
image-check: build
	tools/image-build.sh check

# The Dockerfile's image deployed as users deploy it: e2e_install (kubectl
# apply -k, a devcluster with a real node) with the operator's image built
# from the Dockerfile by buildah and pushed to the cluster's registry instead
# of the one tools/images.sh assembles. Not in make test.
image-e2e: build devcluster
	OPERATOR_IMAGE_FROM=dockerfile ctest --test-dir $(CMAKE_DIR) -R '^e2e_install$$' --output-on-failure

# go build is a no-op when nothing changed; the cold build takes a while
# (see docs/devcluster.md), so say so. Beside the devcluster and kubectl it
# builds what real nodes run (devcluster start --real-nodes N): the kubelet
# and kube-proxy from the same Kubernetes module; kube-router, distribution's
# registry and CoreDNS from modules of their own (tools/*/go.mod); and the
# pause image's program from the pause.c of the pinned Kubernetes module.
# The gateway (devcluster start --gateway) comes from the `gateway` target.
KUBE_ROUTER_VERSION := $(shell awk '$$1 == "github.com/cloudnativelabs/kube-router/v2" { print $$2; exit }' tools/kube-router/go.mod)
PAUSE_VERSION := $(shell sed -n 's/^const pauseVersion = "\(.*\)"/\1/p' tools/devcluster/nodeconf.go)
devcluster: go-check gateway
	@mkdir -p $(BIN)
	@[ -x $(DEVCLUSTER) ] || echo "make: building devcluster, kubectl and the real nodes' components $(K8S_VERSION) (cold: tens of minutes on 2 cores)"
	cd tools/devcluster && $(GO) build -ldflags '$(GO_LDFLAGS)' -o ../../$(DEVCLUSTER) .
	cd tools/devcluster && $(GO) build -ldflags '$(GO_LDFLAGS)' -o ../../$(KUBECTL) k8s.io/kubernetes/cmd/kubectl
	cd tools/devcluster && $(GO) build -ldflags '$(GO_LDFLAGS)' -o ../../$(BIN)/kubelet k8s.io/kubernetes/cmd/kubelet
	cd tools/devcluster && $(GO) build -ldflags '$(GO_LDFLAGS)' -o ../../$(BIN)/kube-proxy k8s.io/kubernetes/cmd/kube-proxy
	cd tools/kube-router && $(GO) build -ldflags '-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$(KUBE_ROUTER_VERSION)' \
	    -o ../../$(BIN)/kube-router github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
	cd tools/registry && $(GO) build -ldflags '-s -w' -o ../../$(BIN)/registry github.com/distribution/distribution/v3/cmd/registry
	cd tools/coredns && CGO_ENABLED=0 $(GO) build -ldflags '-s -w' -o ../../$(BIN)/coredns github.com/coredns/coredns
	@pause_c=$$(cd tools/devcluster && $(GO) list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c; \
	 [ $(BIN)/pause -nt $$pause_c ] || { echo "cc -static $$pause_c"; \
	   cc -Os -Wall -Werror -static -DVERSION=v$(PAUSE_VERSION) -o $(BIN)/pause $$pause_c; }

# The devcluster's gateway (--gateway, docs/devcluster.md): Traefik, pinned in
# tools/traefik/go.mod (cold: 14 min at nice 19 beside a CPU hog on 2 cores,
# 7.5 min of CPU; warm: seconds), and the Gateway API CRDs of the release
# pinned in tools/gateway-api/go.mod, copied from the module
# (config/crd/experimental) beside the devcluster. No code of that module is
# built, so it is downloaded first: before, `go list -m` names no directory
# (a cold machine failed here).
TRAEFIK_VERSION := $(shell awk '$$1 == "github.com/traefik/traefik/v3" { print $$2; exit }' tools/traefik/go.mod)
.PHONY: gateway
gateway: go-check
	@mkdir -p $(BIN)
	cd tools/traefik && CGO_ENABLED=0 $(GO) build -ldflags '-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=$(TRAEFIK_VERSION)' \
	    -o ../../$(BIN)/traefik github.com/traefik/traefik/v3/cmd/traefik
	cd tools/gateway-api && $(GO) mod download sigs.k8s.io/gateway-api
	@crds=$$(cd tools/gateway-api && $(GO) list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)/config/crd/experimental; \
	 [ -f $$crds/gateway.networking.k8s.io_tlsroutes.yaml ] || { echo "make: no Gateway API CRDs in $$crds"; exit 1; }; \
	 rm -rf $(BIN)/gateway-api-crds && mkdir -p $(BIN)/gateway-api-crds && \
	 cp $$crds/gateway.networking*.yaml $(BIN)/gateway-api-crds/ && \
	 rm -f $(BIN)/gateway-api-crds/*_vap_*.yaml

# cert-manager for the webhook certificate's e2e test (e2e_install_certmanager,
# docs/operations.md): its controller and cainjector built from the release
# pinned in tools/cert-manager/go.mod (the programs there run the main
# module's controllers: the release's cmd/ modules are not on the Go proxy),
# and its CRDs rendered from that module's chart by build/bin/helm
# (crds.enabled). First build about a minute on 2 cores once the devcluster's
# are in Go's caches (measured at nice 19); then seconds.
CERT_MANAGER_VERSION := $(shell awk '$$1 == "require" && $$2 == "github.com/cert-manager/cert-manager" { print $$3; exit }' tools/cert-manager/go.mod)
CERT_MANAGER_LDFLAGS := -s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$(CERT_MANAGER_VERSION)
.PHONY: cert-manager
test test-e2e: cert-manager
cert-manager: go-check helm
	@mkdir -p $(BIN)
	cd tools/cert-manager && $(GO) build -ldflags '$(CERT_MANAGER_LDFLAGS)' -o ../../$(BIN)/cert-manager-controller ./controller
	cd tools/cert-manager && $(GO) build -ldflags '$(CERT_MANAGER_LDFLAGS)' -o ../../$(BIN)/cert-manager-cainjector ./cainjector
	@chart=$$(cd tools/cert-manager && $(GO) list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)/deploy/charts/cert-manager; \
	 [ -f $$chart/templates/crd-cert-manager.io_certificates.yaml ] || { echo "make: no cert-manager CRDs in $$chart"; exit 1; }; \
	 $(HELM) template cert-manager $$chart --namespace cert-manager --set crds.enabled=true \
	   $$(cd $$chart && printf -- '--show-only %s ' templates/crd-*.yaml) >$(BIN)/cert-manager-crds.yaml.tmp && \
	 mv $(BIN)/cert-manager-crds.yaml.tmp $(BIN)/cert-manager-crds.yaml

# The browser test's npm packages (playwright-core; the browser is Debian's
# chromium), installed again whenever package-lock.json changes.
page-deps: $(PAGE_DIR)/node_modules/.package-lock.json

$(PAGE_DIR)/node_modules/.package-lock.json: $(PAGE_DIR)/package-lock.json
	npm ci --prefix $(PAGE_DIR) --no-audit --no-fund
	@touch $@

build: deps
	cmake -S . -B $(CMAKE_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(CMAKE_DIR) -j $(JOBS)

# The sanitizer build (clang, ASan + UBSan, leaks fatal) also builds the
# libFuzzer targets; its ctest runs each for a bounded time.
build-asan: deps
	cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
	      -DKOP_SANITIZE=ON -DKOP_FUZZ=ON -DKOP_E2E=OFF
	cmake --build $(ASAN_DIR) -j $(JOBS)

fuzz: deps
	cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
	      -DKOP_SANITIZE=ON -DKOP_FUZZ=ON -DKOP_E2E=OFF -DKOP_FUZZ_SECONDS=$(FUZZ_SECONDS)
	cmake --build $(FUZZ_DIR) -j $(JOBS)
	ctest --test-dir $(FUZZ_DIR) -L fuzz --output-on-failure

test-unit: build build-asan
	ctest --test-dir $(CMAKE_DIR) -L unit --output-on-failure
	@echo "make: unit tests again under ASan + UBSan"
	ctest --test-dir $(ASAN_DIR) -j $(JOBS) --output-on-failure

test-e2e: build devcluster page-deps
	ctest --test-dir $(CMAKE_DIR) -j $(TEST_JOBS) -L 'integration|e2e' --output-on-failure

# The sanitizer stage runs JOBS tests at once: its fuzz targets are each
# bounded by time (KOP_FUZZ_SECONDS), so side by side they take half the wall
# time for the same seconds each. The regular stage runs TEST_JOBS at once:
# fake-node e2e tests two at a time. Integration and real-node tests are
# RUN_SERIAL (test/CMakeLists.txt) and run alone in both.
test: deps devcluster build build-asan page-deps
	@echo "make: sanitizer build (ASan + UBSan): unit tests and bounded fuzz runs"
	ctest --test-dir $(ASAN_DIR) -j $(JOBS) --output-on-failure
	@echo "make: regular build: unit, integration and e2e tests"
	ctest --test-dir $(CMAKE_DIR) -j $(TEST_JOBS) --output-on-failure

# The suite under load (tools/test-hog.sh, docs/reliability.md): make test on
# a fresh clone of HEAD, HOG_RUNS times in a row with stress-ng --cpu 1 (or a
# busy loop) beside it; stops at the first failure, prints a table of the
# runs, fails when one failed. HOG_DRY=1 only says what it would do.
HOG_RUNS ?= 3
.PHONY: test-hog
test-hog:
	HOG_DRY=$(HOG_DRY) tools/test-hog.sh $(HOG_RUNS)

# The soak (test/soak/soak.sh, docs/reliability.md): the operator under
# create/renew/expire churn for SOAK_SECONDS, its RSS and open descriptors
# sampled into build/soak/<time>/samples.csv; fails when they grow.
SOAK_SECONDS ?= 3600
.PHONY: soak
soak: deps devcluster build
	SOAK_SECONDS=$(SOAK_SECONDS) test/soak/soak.sh

# The demo: devcluster, CRDs, RBAC, sample challenges, the CTF operator;
# instances behind the gateway (TLS, a host each), or by NodePort with
# make run GATEWAY=0 (tools/demo.sh).
GATEWAY ?= 1
run: deps devcluster build
	@GATEWAY=$(GATEWAY) tools/demo.sh start

stop:
	@tools/demo.sh stop

clean: stop
	rm -rf $(BUILD)

# Benchmarks (bench/, docs/benchmarks.md): the full run rewrites the results
# in docs/benchmarks.md; the quick one only proves the harness works (it is
# also the e2e test e2e_bench_smoke).
.PHONY: bench bench-quick
bench: deps devcluster build
	@if [ -n "$(BENCH_QUICK)" ]; then bench/run.sh --quick; else bench/run.sh --write-doc; fi

bench-quick: deps devcluster build
	bench/run.sh --quick
