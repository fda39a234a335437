module kopc.dev/tools/gateway-api

go 1.26.0

// The Gateway API release whose CRDs (config/crd/experimental in the
// module) the devcluster installs with --gateway (tools/devcluster,
// gateway.go); make devcluster copies them beside the binary. No code
// of it is built, so nothing else is required here.
require sigs.k8s.io/gateway-api v1.6.3
