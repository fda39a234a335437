// Command devcluster runs a real Kubernetes control plane on loopback for
// kopc's tests, benchmarks and demo.
//
// It is one binary built from the official Kubernetes Go modules: embedded
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK's
// node and pod controllers, all in one process. KWOK turns Node objects into
// fake nodes that report Ready and moves pods scheduled on them to Running,
// so Deployments, Services and namespaces behave as on a real cluster while
// no container ever runs.
//
// Usage:
//
//	devcluster start --dir DIR [--nodes N] [--port P] [--gateway]   start in the background, return when ready
//	devcluster run   --dir DIR [--nodes N] [--port P]   run in the foreground until SIGINT/SIGTERM
//	devcluster stop  --dir DIR                           stop a cluster started on DIR
//	devcluster status --dir DIR                          exit 0 when a cluster runs on DIR
//	devcluster image --dir DIR --name REPO:TAG ...       build an image, push it to DIR's registry
//
// Everything lives in DIR: the CA and certificates, etcd's data, the admin
// kubeconfig, the log, the pid file. Stopping and starting on the same DIR
// keeps every object.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// options are the command-line settings shared by every subcommand.
type options struct {
	dir   string // state directory, absolute
	nodes int    // fake nodes to keep registered
	// realNodes are nodes whose containers run (node.go); they need root.
	realNodes int
	port      int // apiserver port; 0 means the one DIR remembers, or a free one
	// compaction is how often the apiserver compacts etcd's history, which
	// decides how old a resourceVersion may be before a watch gets 410 Gone.
	compaction time.Duration
	// apiserverArgs are extra kube-apiserver flags, applied after ours.
	apiserverArgs []string
	// gatewayDomain, when set, makes the Gateway API gateway for *.domain
	// (gateway.go).
	gatewayDomain string
}

func usage() {
	fmt.Fprintf(os.Stderr, `usage: devcluster COMMAND --dir DIR [flags]

commands:
  start    start a cluster in the background and return once it is ready
  run      run a cluster in the foreground until interrupted
  stop     stop the cluster running on DIR
  status   exit 0 if a cluster runs on DIR, 1 otherwise
  image    build an OCI image from local files and push it to the cluster's
           registry (devcluster image --help)

flags:
  --dir DIR     state directory (certificates, etcd data, kubeconfig, log)
  --nodes N     number of fake KWOK nodes (default 1)
  --real-nodes N
                number of real nodes (default 0): kubelet, containerd, runc, CNI,
                kube-proxy and kube-router in namespaces of their own, with a
                registry on the cluster's bridge (needs root; docs/devcluster.md)
  --port P      apiserver port on 127.0.0.1 (default: the one DIR used before, else a free one)
  --compaction-interval D
                how often etcd history is compacted (default 5m, as kube-apiserver);
                tests shorten it to see resourceVersions expire (410 Gone)
  --apiserver-arg=--FLAG=VALUE
                an extra kube-apiserver flag (repeatable), applied after devcluster's own
  --gateway     the Gateway API gateway for *.%s: the CRDs, a wildcard certificate,
                the Gateway kopc-gateway/ctf, and with real nodes Traefik serving it
                on 127.0.0.1:P (docs/devcluster.md); --gateway=false turns it off
  --gateway-domain D
                the same for *.D

A start without --nodes, --real-nodes, --compaction-interval, --apiserver-arg or --gateway
reuses the values DIR was last started with.
`, defaultGatewayDomain)
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" {
		usage()
		os.Exit(2)
	}
	cmd := os.Args[1]
	switch cmd {
	case "node": // internal: the init of a real node, started by `run`
		if err := nodeMain(os.Args[2:]); err != nil {
			fatal(err)
		}
		return
	case "image":
		if err := imageMain(os.Args[2:]); err != nil {
			fatal(err)
		}
		return
	}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	var o options
	fs.StringVar(&o.dir, "dir", "", "state directory")
	fs.IntVar(&o.nodes, "nodes", 1, "number of fake nodes")
	fs.IntVar(&o.realNodes, "real-nodes", 0, "number of real nodes (kubelet, containerd, runc; needs root)")
	fs.IntVar(&o.port, "port", 0, "apiserver port")
	fs.DurationVar(&o.compaction, "compaction-interval", 5*time.Minute, "etcd compaction interval")
	fs.BoolFunc("gateway", "the Gateway API gateway for *."+defaultGatewayDomain, func(v string) error {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return err
		}
		if !on {
			o.gatewayDomain = ""
		} else if o.gatewayDomain == "" {
			o.gatewayDomain = defaultGatewayDomain
		}
		return nil
	})
	fs.Func("gateway-domain", "the gateway's domain", func(v string) error {
		if err := checkGatewayDomain(v); err != nil {
			return err
		}
		o.gatewayDomain = v
		return nil
	})
	fs.Func("apiserver-arg", "extra kube-apiserver flag", func(v string) error {
		if !strings.HasPrefix(v, "--") {
			return fmt.Errorf("%q: give the flag as --name=value", v)
		}
		o.apiserverArgs = append(o.apiserverArgs, v)
		return nil
	})
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	if o.dir == "" || fs.NArg() != 0 {
		usage()
		os.Exit(2)
	}
	if o.nodes < 0 || o.nodes > 1000 || o.realNodes < 0 || o.realNodes > maxRealNodes ||
		o.port < 0 || o.port > 65535 || o.compaction < time.Second {
		fmt.Fprintf(os.Stderr, "devcluster: --nodes must be 0..1000, --real-nodes 0..%d, --port 0..65535, --compaction-interval at least 1s\n", maxRealNodes)
		os.Exit(2)
	}
	abs, err := filepath.Abs(o.dir)
	if err != nil {
		fatal(err)
	}
	o.dir = abs
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if cmd == "start" || cmd == "run" {
		if o, err = remembered(o, given); err != nil {
			fatal(err)
		}
		if o.realNodes > 0 && os.Geteuid() != 0 {
			fatal(fmt.Errorf("--real-nodes needs root: the nodes create network namespaces, a bridge, mounts and cgroups"))
		}
	}

	switch cmd {
	case "start":
		err = start(o)
	case "run":
		err = run(o, nil)
	case "stop":
		err = stop(o)
	case "status":
		err = status(o)
	default:
		usage()
		os.Exit(2)
	}
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "devcluster: %v\n", err)
	os.Exit(1)
}
