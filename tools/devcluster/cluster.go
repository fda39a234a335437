// cluster.go: `devcluster run`, the control plane in one process.
//
// Start-up order is the dependency order: etcd, then the apiserver (wait for
// /readyz), then the controller manager, the scheduler and KWOK, then the
// fake Node objects; the cluster is ready once every node is Ready and the
// default namespace has its service account, i.e. once a pod can be created
// and will run. Shutdown is the reverse, on SIGINT or SIGTERM: cancel the
// components' context, give them time to return, close etcd last so that no
// write is lost.
//
// Every component is configured through its own flag set, exactly as its
// command line would be, so each flag below means what the Kubernetes docs
// say it means.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	apiserveroptions "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	schedapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	scheduleroptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
)

// state is what DIR remembers between runs (DIR/devcluster.json): the ports,
// so that kubeconfigs stay valid and etcd's membership keeps its peer URL,
// and the start flags, so that a later start without flags restarts the
// same cluster.
type state struct {
	APIServerPort int      `json:"apiserverPort"`
	EtcdPort      int      `json:"etcdPort"`
	EtcdPeerPort  int      `json:"etcdPeerPort"`
	Nodes         int      `json:"nodes"`
	Compaction    string   `json:"compactionInterval,omitempty"`
	APIServerArgs []string `json:"apiserverArgs,omitempty"`
	// Real nodes: how many, the address range they use (realnet.go), the
	// registry's port on the bridge and the cluster DNS addresses the
	// kubelets hand to pods (empty until CoreDNS runs).
	RealNodes    int      `json:"realNodes,omitempty"`
	NetIndex     int      `json:"netIndex,omitempty"`
	RegistryPort int      `json:"registryPort,omitempty"`
	ClusterDNS   []string `json:"clusterDNS,omitempty"`
	// The gateway (gateway.go): its domain (empty: none), and with real
	// nodes the port on 127.0.0.1 that reaches it.
	GatewayDomain string `json:"gatewayDomain,omitempty"`
	GatewayPort   int    `json:"gatewayPort,omitempty"`
}

// remembered fills the options not given on this command line from what
// DIR remembers of the previous start.
func remembered(o options, given map[string]bool) (options, error) {
	data, err := os.ReadFile(statePath(o.dir))
	if err != nil {
		return o, nil // a new DIR
	}
	var s state
	if err := json.Unmarshal(data, &s); err != nil {
		return o, fmt.Errorf("%s: %w", statePath(o.dir), err)
	}
	if !given["nodes"] && s.Nodes > 0 {
		o.nodes = s.Nodes
	}
	if !given["real-nodes"] {
		o.realNodes = s.RealNodes
	}
	if !given["compaction-interval"] && s.Compaction != "" {
		if d, err := time.ParseDuration(s.Compaction); err == nil {
			o.compaction = d
		}
	}
	if !given["apiserver-arg"] {
		o.apiserverArgs = s.APIServerArgs
	}
	if !given["gateway"] && !given["gateway-domain"] {
		o.gatewayDomain = s.GatewayDomain
	}
	return o, nil
}

func statePath(dir string) string { return filepath.Join(dir, "devcluster.json") }

// readState reads what DIR remembers, without changing it.
func readState(dir string) (state, error) {
	var s state
	data, err := os.ReadFile(statePath(dir))
	if err != nil {
		return s, fmt.Errorf("no cluster state in %s: %w", dir, err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("%s: %w", statePath(dir), err)
	}
	return s, nil
}

func saveState(dir string, s state) error {
	data, _ := json.MarshalIndent(s, "", "  ")
	return os.WriteFile(statePath(dir), append(data, '\n'), 0o644)
}

func loadState(o options) (state, error) {
	var s state
	if data, err := os.ReadFile(statePath(o.dir)); err == nil {
		if err := json.Unmarshal(data, &s); err != nil {
			return s, fmt.Errorf("%s: %w", statePath(o.dir), err)
		}
	}
	if o.port != 0 {
		s.APIServerPort = o.port
	}
	s.Nodes, s.Compaction, s.APIServerArgs = o.nodes, o.compaction.String(), o.apiserverArgs
	s.RealNodes = o.realNodes
	s.GatewayDomain = o.gatewayDomain
	ports := []*int{&s.APIServerPort, &s.EtcdPort, &s.EtcdPeerPort}
	if o.realNodes > 0 {
		k, err := chooseNetIndex(o.dir, s.NetIndex)
		if err != nil {
			return s, err
		}
		s.NetIndex = k
		s.ClusterDNS = []string{clusterDNSIP}
		ports = append(ports, &s.RegistryPort)
		if s.GatewayDomain != "" {
			ports = append(ports, &s.GatewayPort)
		}
	}
	if err := choosePorts(ports); err != nil { // ports.go: outside the ephemeral range
		return s, err
	}
	return s, saveState(o.dir, s)
}

// component is a running part of the control plane: done yields its error
// (nil on a clean exit) once it has stopped.
type component struct {
	name string
	done chan error
}

func goComponent(name string, fn func() error) component {
	c := component{name: name, done: make(chan error, 1)}
	go func() {
		err := fn()
		if err != nil {
			err = fmt.Errorf("%s: %w", name, err)
		}
		c.done <- err
	}()
	return c
}

// run is `devcluster run`. ready, when not nil, is told the outcome of
// start-up (see daemon.go); the process then serves until signalled.
func run(o options, ready *readySignal) error {
	if ready == nil {
		ready = readySignalFromEnv()
	}
	err := serve(o, ready)
	if err != nil {
		ready.send("error: " + err.Error())
	}
	return err
}

func serve(o options, ready *readySignal) error {
	lock, err := lockDir(o.dir)
	if errors.Is(err, errRunning) {
		_, pid := running(o.dir)
		return fmt.Errorf("a cluster is already running in %s (pid %d)", o.dir, pid)
	}
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := os.WriteFile(pidPath(o.dir), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(pidPath(o.dir))

	st, err := loadState(o)
	if err != nil {
		return err
	}
	var plan *netplan
	if o.realNodes > 0 {
		plan = &netplan{st.NetIndex}
		// What a crashed run left (the bridge, cgroups) goes first.
		if err := cleanupRealNodes(*plan, o.dir); err != nil {
			return err
		}
		if err := setupBridge(o.dir, *plan); err != nil {
			return err
		}
		defer func() {
			if err := cleanupRealNodes(*plan, o.dir); err != nil {
				klog.Warningf("devcluster: %v", err)
			}
		}()
	}
	p := pki{dir: o.dir}
	if err := p.ensure(plan, o.realNodes); err != nil {
		return err
	}
	server := "https://127.0.0.1:" + strconv.Itoa(st.APIServerPort)
	for _, id := range identities {
		if err := p.writeKubeconfig(p.path(id.file+".kubeconfig"), server, id); err != nil {
			return err
		}
	}
	if plan != nil {
		// Real nodes reach the apiserver on the bridge.
		nodeServer := fmt.Sprintf("https://%s:%d", plan.gateway(), st.APIServerPort)
		for _, id := range realNodeIdentities(o.realNodes) {
			if err := p.writeKubeconfig(p.path(id.file+".kubeconfig"), nodeServer, id); err != nil {
				return err
			}
		}
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()

	etcd, err := startEtcd(o.dir, st)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer etcd.Close()

	// The components run under their own context so that they can be
	// stopped, and waited for, before etcd closes. Real nodes and the
	// registry stop first, while the apiserver still answers their last
	// requests.
	compCtx, compCancel := context.WithCancel(context.Background())
	defer compCancel()
	var comps []component
	defer func() { compCancel(); waitAll(comps, 30*time.Second) }()
	nodeCtx, nodeCancel := context.WithCancel(context.Background())
	defer nodeCancel()
	var nodeComps []component
	defer func() { nodeCancel(); waitAll(nodeComps, nodeStopTimeout+10*time.Second) }()

	apiserver, gate, err := startAPIServer(compCtx, o, st, p, plan)
	if err != nil {
		return err
	}
	comps = append(comps, apiserver)
	private, err := privateClientFor(p.path("admin.kubeconfig"), gate.privateAddr())
	if err != nil {
		return err
	}
	if err := waitAPIServer(ctx, private, apiserver, etcd); err != nil {
		return err
	}
	if err := gate.open(); err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	admin, err := clientFor(p.path("admin.kubeconfig"))
	if err != nil {
		return err
	}
	klog.Infof("devcluster: apiserver ready on %s", server)

	kcm, err := startControllerManager(compCtx, p)
	if err != nil {
		return err
	}
	comps = append(comps, kcm)
	sched, err := startScheduler(compCtx, p)
	if err != nil {
		return err
	}
	comps = append(comps, sched)
	kwok, err := startKWOK(compCtx, p)
	if err != nil {
		return err
	}
	comps = append(comps, kwok)

	if err := ensureNodes(ctx, admin, o.nodes, o.realNodes > 0); err != nil {
		return err
	}
	if plan != nil {
		nodeComps, err = startRealNodes(ctx, nodeCtx, o.dir, st, *plan, admin)
		if err != nil {
			return err
		}
	}
	all := append(append([]component{}, comps...), nodeComps...)
	if err := waitClusterReady(ctx, admin, o.nodes+o.realNodes, all); err != nil {
		return err
	}
	if plan != nil {
		if err := startClusterDNS(ctx, admin, all); err != nil {
			return err
		}
	}
	if st.GatewayDomain != "" {
		gw, err := startGateway(ctx, compCtx, o.dir, st, admin, all)
		comps = append(comps, gw...)
		all = append(all, gw...)
		if err != nil {
			return err
		}
	}
	if err := p.writeKubeconfig(filepath.Join(o.dir, "kubeconfig"), server, identities[0]); err != nil {
		return err
	}
	klog.Infof("devcluster: ready with %d fake and %d real node(s); kubeconfig %s", o.nodes, o.realNodes, filepath.Join(o.dir, "kubeconfig"))
	ready.send("ok")

	return waitForEnd(ctx, all, etcd)
}

// startRealNodes starts the registry, pushes the pause image, grants
// kube-router its role and starts every real node.
func startRealNodes(ctx, nodeCtx context.Context, dir string, st state, plan netplan, admin *kubernetes.Clientset) ([]component, error) {
	var comps []component
	reg, err := startRegistry(nodeCtx, dir, st)
	if reg.done != nil {
		comps = append(comps, reg)
	}
	if err != nil {
		return comps, err
	}
	if err := pushPause(dir, st); err != nil {
		return comps, fmt.Errorf("pause image: %w", err)
	}
	if err := pushCoreDNS(dir, st); err != nil {
		return comps, fmt.Errorf("coredns image: %w", err)
	}
	if err := ensureNodeRBAC(ctx, admin); err != nil {
		return comps, err
	}
	for i := 0; i < st.RealNodes; i++ {
		c, err := startRealNode(nodeCtx, dir, plan, i)
		if err != nil {
			return comps, err
		}
		comps = append(comps, c)
	}
	return comps, nil
}

// waitForEnd blocks until a signal arrives (a clean stop) or a component or
// etcd fails (an error, after which the rest are stopped too).
func waitForEnd(ctx context.Context, comps []component, etcd *embed.Etcd) error {
	failed := make(chan error, len(comps)+1)
	for _, c := range comps {
		go func(c component) {
			err := <-c.done
			if err == nil {
				err = fmt.Errorf("%s stopped unexpectedly", c.name)
			}
			failed <- err
			c.done <- nil // let waitAll see it stopped
		}(c)
	}
	select {
	case <-ctx.Done():
		klog.Infof("devcluster: shutting down")
		return nil
	case err := <-etcd.Err():
		return fmt.Errorf("etcd: %w", err)
	case err := <-failed:
		return err
	}
}

// waitAll waits for every component to return, at most timeout in all.
func waitAll(comps []component, timeout time.Duration) {
	deadline := time.After(timeout)
	for _, c := range comps {
		select {
		case err := <-c.done:
			if err != nil && !errors.Is(err, context.Canceled) {
				klog.Warningf("devcluster: %v", err)
			}
		case <-deadline:
			klog.Warningf("devcluster: %s did not stop within %s", c.name, timeout)
			return
		}
	}
}

func clientFor(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// privateClientFor is clientFor, talking to the apiserver's private address
// (listen.go) and verifying its certificate as 127.0.0.1's.
func privateClientFor(kubeconfig, hostport string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Host = "https://" + hostport
	cfg.TLSClientConfig.ServerName = "127.0.0.1"
	return kubernetes.NewForConfig(cfg)
}

// startEtcd starts a single-member etcd whose data lives in DIR/etcd.
// fsync is off: this is a disposable development cluster, a clean stop
// still flushes everything, and it triples the write rate on slow disks.
func startEtcd(dir string, st state) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "devcluster"
	cfg.Dir = filepath.Join(dir, "etcd")
	client := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(st.EtcdPort)}
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(st.EtcdPeerPort)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}
	// No auto-compaction here: the apiserver compacts (--etcd-compaction-interval).
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, errors.New("not ready after 60s (see etcd.log)")
	}
}

// parseFlags applies args to a flag set built from the component's own
// named flag sets, as its cobra command would.
func parseFlags(name string, sets map[string]*pflag.FlagSet, args []string) error {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	for _, s := range sets {
		fs.AddFlagSet(s)
	}
	return fs.Parse(args)
}

func startAPIServer(ctx context.Context, o options, st state, p pki, plan *netplan) (component, *gatedListener, error) {
	s := apiserveroptions.NewServerRunOptions()
	dir := o.dir
	args := []string{
		"--etcd-compaction-interval=" + o.compaction.String(),
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(st.EtcdPort),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(st.APIServerPort),
		"--cert-dir=" + filepath.Join(dir, "pki"),
		"--tls-cert-file=" + p.path("apiserver.crt"),
		"--tls-private-key-file=" + p.path("apiserver.key"),
		"--client-ca-file=" + p.path("ca.crt"),
		"--token-auth-file=" + p.path("tokens.csv"),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.path("sa.pub"),
		"--service-account-signing-key-file=" + p.path("sa.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		// 10,000 NodePorts, not the default 2,768: a CTF of 5,000 instances
		// (bench/, the 5,000-Challenge cell) exposes one each.
		"--service-node-port-range=30000-39999",
		"--allow-privileged=true",
		"--profiling=false",
		"--event-ttl=1h",
		"--enable-admission-plugins=NodeRestriction",
		// On stop, end the open watches at once (the server's shutdown
		// signal reaches each watch's loop) and wait at most 5 s for them:
		// a watch left open (a test's informers, an operator still running)
		// otherwise kept the HTTP server's shutdown waiting until run's
		// 30 s bound. Requests in flight still drain as before.
		"--shutdown-watch-termination-grace-period=5s",
	}
	if plan == nil {
		// The "kubernetes" Service cannot have a loopback endpoint (Endpoints
		// validation refuses 127.0.0.0/8) and no pod runs to use it, so the
		// apiserver does not publish one.
		args = append(args, "--endpoint-reconciler-type=none")
	} else {
		// Pods on real nodes reach the apiserver through the "kubernetes"
		// Service, whose endpoint is the bridge address; the apiserver
		// verifies the kubelets' serving certificates against the CA.
		args = append(args,
			"--advertise-address="+plan.gateway().String(),
			"--kubelet-client-certificate="+p.path("apiserver-kubelet-client.crt"),
			"--kubelet-client-key="+p.path("apiserver-kubelet-client.key"),
			"--kubelet-certificate-authority="+p.path("ca.crt"),
			"--kubelet-preferred-address-types=InternalIP",
		)
	}
	args = append(args, o.apiserverArgs...)
	if err := parseFlags("kube-apiserver", s.Flags().FlagSets, args); err != nil {
		return component{}, nil, fmt.Errorf("kube-apiserver flags: %w", err)
	}
	// The apiserver starts on its private address; run opens the public
	// ones (loopback for this machine's clients, the bridge for the nodes
	// and pods) once it is ready. See listen.go.
	public := []net.IP{net.IPv4(127, 0, 0, 1)}
	if plan != nil {
		public = append(public, plan.gateway())
	}
	gate, err := newGatedListener(st.APIServerPort, public...)
	if err != nil {
		return component{}, nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	s.SecureServing.Listener = gate
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		gate.Close()
		return component{}, nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	completed, err := s.Complete(ctx)
	if err != nil {
		gate.Close()
		return component{}, nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		gate.Close()
		return component{}, nil, fmt.Errorf("kube-apiserver: %w", utilerrors.NewAggregate(errs))
	}
	return goComponent("kube-apiserver", func() error { return apiserverapp.Run(ctx, completed) }), gate, nil
}

// waitAPIServer polls /readyz until it answers ok, the apiserver or etcd
// fails, or start-up is interrupted.
func waitAPIServer(ctx context.Context, admin *kubernetes.Clientset, apiserver component, etcd *embed.Etcd) error {
	deadline := time.Now().Add(3 * time.Minute)
	var last error
	for time.Now().Before(deadline) {
		select {
		case err := <-apiserver.done:
			apiserver.done <- err
			if err == nil {
				err = errors.New("kube-apiserver exited")
			}
			return err
		case err := <-etcd.Err():
			return fmt.Errorf("etcd: %w", err)
		case <-ctx.Done():
			return errors.New("interrupted during start-up")
		case <-time.After(200 * time.Millisecond):
		}
		body, err := admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return nil
		}
		last = err
	}
	return fmt.Errorf("kube-apiserver not ready after 3m: %v", last)
}

func startControllerManager(ctx context.Context, p pki) (component, error) {
	s, err := kcmoptions.NewKubeControllerManagerOptions()
	if err != nil {
		return component{}, err
	}
	all, disabled, aliases := kcmapp.KnownControllers(), kcmapp.ControllersDisabledByDefault(), kcmapp.ControllerAliases()
	sets := s.Flags(all, disabled, aliases)
	args := []string{
		"--kubeconfig=" + p.path("controller-manager.kubeconfig"),
		"--authentication-kubeconfig=" + p.path("controller-manager.kubeconfig"),
		"--authorization-kubeconfig=" + p.path("controller-manager.kubeconfig"),
		"--secure-port=0",
		"--leader-elect=false",
		"--controllers=*",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p.path("sa.key"),
		"--root-ca-file=" + p.path("ca.crt"),
		"--cluster-signing-cert-file=" + p.path("ca.crt"),
		"--cluster-signing-key-file=" + p.path("ca.key"),
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	}
	if err := parseFlags("kube-controller-manager", sets.FlagSets, args); err != nil {
		return component{}, fmt.Errorf("kube-controller-manager flags: %w", err)
	}
	s.ParsedFlags = &sets
	cfg, err := s.Config(ctx, all, disabled, aliases)
	if err != nil {
		return component{}, fmt.Errorf("kube-controller-manager: %w", err)
	}
	completed := cfg.Complete()
	return goComponent("kube-controller-manager", func() error { return kcmapp.Run(ctx, completed) }), nil
}

func startScheduler(ctx context.Context, p pki) (component, error) {
	opts := scheduleroptions.NewOptions()
	args := []string{
		"--kubeconfig=" + p.path("scheduler.kubeconfig"),
		"--authentication-kubeconfig=" + p.path("scheduler.kubeconfig"),
		"--authorization-kubeconfig=" + p.path("scheduler.kubeconfig"),
		"--secure-port=0",
		"--leader-elect=false",
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	}
	if err := parseFlags("kube-scheduler", opts.Flags.FlagSets, args); err != nil {
		return component{}, fmt.Errorf("kube-scheduler flags: %w", err)
	}
	cc, sched, err := schedapp.Setup(ctx, opts)
	if err != nil {
		return component{}, fmt.Errorf("kube-scheduler: %w", err)
	}
	return goComponent("kube-scheduler", func() error { return schedapp.Run(ctx, cc, sched) }), nil
}
