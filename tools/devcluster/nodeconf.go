// nodeconf.go: the configuration files of a real node's components.
//
// Each setting that departs from the component's default is here because
// this machine needs it, and says why (docs/devcluster.md has the longer
// story). Everything a node writes lives under DIR/nodes/<name>; its
// runtime state lives in the node's own tmpfs on /run, which vanishes with
// the node's mount namespace.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// registryHost is the name images are pulled by on real nodes. containerd
// maps it to the cluster's registry (hosts.toml below), so image references
// stay the same whatever address the registry got.
const registryHost = "registry.devcluster.test"

// pauseImage is the sandbox image, built from Kubernetes' own pause.c at the
// pinned version (Makefile) and pushed at start (registry.go).
const pauseVersion = "3.10.2"

func pauseImage() string { return registryHost + "/pause:" + pauseVersion }

// nodeLayout names the files and directories of real node i.
type nodeLayout struct {
	dir  string // DIR
	i    int
	root string // DIR/nodes/<name>
}

func newNodeLayout(dir string, i int) nodeLayout {
	return nodeLayout{dir: dir, i: i, root: filepath.Join(dir, "nodes", realNodeName(i))}
}

func (l nodeLayout) path(parts ...string) string {
	return filepath.Join(append([]string{l.root}, parts...)...)
}

// nodeMount is where the node's directory is bound inside its own mount
// namespace (node.go). Components are configured with paths under it: the
// kubelet and containerd make unix sockets below their directories, and a
// socket path must fit in 108 bytes, which DIR/nodes/<name>/... need not.
const nodeMount = "/run/node"

// in is path as the node's components see it.
func (l nodeLayout) in(parts ...string) string {
	return filepath.Join(append([]string{nodeMount}, parts...)...)
}

// nodeSettings is what the configuration files are made from.
type nodeSettings struct {
	plan         netplan
	layout       nodeLayout
	apiserver    string // https://gateway:port
	registryAddr string // gateway:port
	serviceCIDR  string
}

func writeFile(path, content string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), mode)
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(path, string(data)+"\n", 0o644)
}

// containerdConfig is containerd 1.6's configuration (format version 2).
//   - restrict_oom_score_adj: the node has no CAP_SYS_RESOURCE, so runc
//     cannot lower a container's oom_score_adj below its own; without it
//     every sandbox fails with "can't get final child's PID from pipe: EOF".
//   - sandbox_image: no public registry is reachable; the pause image is
//     built here and served by the cluster's registry.
//   - config_path: hosts.toml maps registryHost to the registry, over TLS
//     verified against the cluster's CA.
//   - snapshotters and plugins this machine has no use for are disabled, so
//     their start-up errors do not hide real ones in the log.
func containerdConfig(s nodeSettings) string {
	l := s.layout
	return fmt.Sprintf(`version = 2
root = %q
state = "/run/containerd"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, l.in("containerd"), pauseImage(), l.in("cni", "net.d"), l.in("certs.d"))
}

// registryHostsTOML points registryHost at the cluster's registry. The
// [host] entry is what containerd 1.6 reads; the top-level server is its
// fallback and gets the same CA, so that a missing image is reported as
// the registry's "not found" rather than as a failed fallback.
func registryHostsTOML(s nodeSettings) string {
	url := "https://" + s.registryAddr
	ca := filepath.Join(s.layout.dir, "pki", "ca.crt")
	return fmt.Sprintf(`server = %q
ca = %q

[host.%q]
  capabilities = ["pull", "resolve"]
  ca = %q
`, url, ca, url, ca)
}

// cniConfig is the node's pod network: a bridge with the node's pod range,
// the node as gateway, no masquerade (the host routes pod ranges back to
// the node, realnet.go), hairpin so a pod reaches itself through its own
// Service, and portmap for hostPort.
func cniConfig(s nodeSettings) any {
	return map[string]any{
		"cniVersion": "1.0.0",
		"name":       "devcluster",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      "cni0",
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": s.plan.podCIDR(s.layout.i).String()}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": s.layout.in("ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
}

// kubeletConfig is the KubeletConfiguration. What this machine needs:
//   - failCgroupV1 false, cgroupDriver cgroupfs: cgroups are v1 and no
//     systemd runs; cgroupRoot keeps every pod under one cgroup per node,
//     which stop removes;
//   - failSwapOn false: the VM may have swap;
//   - resolvConf "": pods get no host resolver (nothing off the machine
//     answers anyway); cluster DNS comes from CoreDNS when it runs;
//   - oomScoreAdj 0: lowering it needs CAP_SYS_RESOURCE, which we lack;
//   - evictionHard with one 0%% threshold, imageGC at 100%% and no local
//     storage isolation: the eviction manager and the image garbage collector
//     cannot read filesystem statistics of the VM's disk (cadvisor finds no
//     block device behind it), so they would act on zeros. Memory pressure is
//     not simulated here either.
func kubeletConfig(s nodeSettings, clusterDNS []string) any {
	l := s.layout
	cfg := map[string]any{
		"apiVersion":                    "kubelet.config.k8s.io/v1beta1",
		"kind":                          "KubeletConfiguration",
		"address":                       s.plan.nodeIP(l.i).String(),
		"port":                          10250,
		"readOnlyPort":                  0,
		"healthzBindAddress":            "127.0.0.1",
		"healthzPort":                   10248,
		"tlsCertFile":                   filepath.Join(l.dir, "pki", realNodeName(l.i)+"-serving.crt"),
		"tlsPrivateKeyFile":             filepath.Join(l.dir, "pki", realNodeName(l.i)+"-serving.key"),
		"containerRuntimeEndpoint":      "unix:///run/containerd/containerd.sock",
		"cgroupDriver":                  "cgroupfs",
		"cgroupRoot":                    s.plan.cgroupRoot(l.i),
		"cgroupsPerQOS":                 true,
		"enforceNodeAllocatable":        []string{"pods"},
		"failCgroupV1":                  false,
		"failSwapOn":                    false,
		"resolvConf":                    "",
		"oomScoreAdj":                   0,
		"evictionHard":                  map[string]string{"memory.available": "0%"},
		"imageGCHighThresholdPercent":   100,
		"imageGCLowThresholdPercent":    99,
		"localStorageCapacityIsolation": false,
		"serializeImagePulls":           false,
		"podLogsDir":                    "/var/log/pods",
		"maxPods":                       110,
		"syncFrequency":                 "10s",
		"nodeStatusReportFrequency":     "1m",
		"authentication": map[string]any{
			"anonymous": map[string]bool{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]string{"clientCAFile": filepath.Join(l.dir, "pki", "ca.crt")},
		},
		"authorization": map[string]string{"mode": "Webhook"},
	}
	if len(clusterDNS) > 0 {
		cfg["clusterDNS"] = clusterDNS
		cfg["clusterDomain"] = "cluster.local"
	}
	return cfg
}

// kubeProxyConfig is kube-proxy in iptables mode (Debian's iptables, the
// nf_tables backend). It proxies NodePorts on the node's address only and
// leaves the conntrack sysctls alone: they are global or read-only in a
// network namespace other than the host's.
func kubeProxyConfig(s nodeSettings) any {
	l := s.layout
	zero := 0
	return map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"clientConnection":   map[string]any{"kubeconfig": filepath.Join(l.dir, "pki", "kube-proxy.kubeconfig")},
		"hostnameOverride":   realNodeName(l.i),
		"bindAddress":        s.plan.nodeIP(l.i).String(),
		"healthzBindAddress": "127.0.0.1:10256",
		"metricsBindAddress": "127.0.0.1:10249",
		"mode":               "iptables",
		"clusterCIDR":        s.plan.clusterCIDR().String(),
		"nodePortAddresses":  []string{s.plan.nodeIP(l.i).String() + "/32"},
		"conntrack": map[string]any{
			"maxPerCore":            zero,
			"min":                   zero,
			"tcpEstablishedTimeout": "0s",
			"tcpCloseWaitTimeout":   "0s",
		},
	}
}

// writeNodeConfigs writes every configuration file of node i.
func writeNodeConfigs(s nodeSettings, clusterDNS []string) error {
	l := s.layout
	files := []struct {
		path string
		text string
	}{
		{l.path("containerd.toml"), containerdConfig(s)},
		{l.path("certs.d", registryHost, "hosts.toml"), registryHostsTOML(s)},
	}
	for _, f := range files {
		if err := writeFile(f.path, f.text, 0o644); err != nil {
			return err
		}
	}
	if err := writeJSON(l.path("cni", "net.d", "10-devcluster.conflist"), cniConfig(s)); err != nil {
		return err
	}
	if err := writeJSON(l.path("kubelet.json"), kubeletConfig(s, clusterDNS)); err != nil {
		return err
	}
	return writeJSON(l.path("kube-proxy.json"), kubeProxyConfig(s))
}

// kubeRouterArgs runs only kube-router's network-policy controller: pod
// routing is the CNI bridge's and services are kube-proxy's.
func kubeRouterArgs(s nodeSettings) []string {
	l := s.layout
	return []string{
		"--run-firewall=true",
		"--run-router=false",
		"--run-service-proxy=false",
		"--kubeconfig=" + filepath.Join(l.dir, "pki", "kube-router.kubeconfig"),
		"--hostname-override=" + realNodeName(l.i),
		"--service-cluster-ip-range=" + s.serviceCIDR,
		"--health-port=0",
		"--metrics-port=0",
		"--iptables-sync-period=1m",
	}
}

func kubeletArgs(s nodeSettings) []string {
	l := s.layout
	return []string{
		"--config=" + l.in("kubelet.json"),
		"--kubeconfig=" + filepath.Join(l.dir, "pki", realNodeName(l.i)+".kubeconfig"),
		"--hostname-override=" + realNodeName(l.i),
		"--node-ip=" + s.plan.nodeIP(l.i).String(),
		"--root-dir=" + l.in("kubelet"),
		"--node-labels=" + strings.Join([]string{"devcluster.kopc.dev/node=real"}, ","),
		"--v=1",
	}
}
