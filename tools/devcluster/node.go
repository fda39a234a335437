// node.go: `devcluster node`, the init process of one real node.
//
// A real node is a set of Linux namespaces, not a VM: the devcluster starts
// this process with new mount, PID, network, UTS and IPC namespaces
// (realnode.go), and it becomes PID 1 there. It then
//
//  1. makes every mount private (nothing it mounts reaches the host), mounts
//     its own /proc, a tmpfs on /run for runtime state (sockets, runc's
//     state, the pods' network-namespace files) and binds the node's
//     directories over /var/log and /var/lib/cni, the two paths containerd
//     and the kubelet do not let us move;
//  2. waits for the host to hand it its veth, names it eth0 and gives it the
//     node's address and the routes to the other nodes' pods;
//  3. starts containerd (Debian's, with runc and the CNI plugins from Debian
//     too), then the kubelet, kube-proxy and kube-router's network-policy
//     controller, all built from their Go modules at the pinned versions;
//  4. reaps every orphan (it is PID 1) and watches its children: if one of
//     them exits, the node fails loudly rather than limp on.
//
// Stopping is the namespaces' job: on SIGTERM the node asks its components
// to stop, waits a moment, and exits; the kernel then kills every process
// left in the PID namespace (containers included), and the mount and
// network namespaces, with every mount, link and firewall rule in them, go
// away with their last process. What the host keeps is only what the host
// side made (the bridge, the routes, the cgroup directories), and `stop`
// removes those (realnet.go).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeGoFD is the pipe on which the host says the veth is in place.
const nodeGoFD = 3

// nodeMain is `devcluster node --dir DIR --index I`.
func nodeMain(args []string) error {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	dir := fs.String("dir", "", "state directory")
	index := fs.Int("index", -1, "real node index")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *index < 0 || *index >= maxRealNodes {
		return errors.New("usage: devcluster node --dir DIR --index I (run by devcluster start)")
	}
	if os.Getpid() != 1 {
		return errors.New("devcluster node must run as PID 1 of its own namespaces; devcluster start does that")
	}
	st, err := readState(*dir)
	if err != nil {
		return err
	}
	s := settingsFor(*dir, st, *index)
	log := func(format string, a ...any) {
		fmt.Printf("%s node %s: %s\n", time.Now().Format(time.RFC3339), realNodeName(*index), fmt.Sprintf(format, a...))
	}

	if err := waitForHost(); err != nil {
		return err
	}
	if err := setupNodeMounts(s.layout); err != nil {
		return fmt.Errorf("mounts: %w", err)
	}
	if err := unix.Sethostname([]byte(realNodeName(*index))); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	if err := setupNodeNetwork(s.plan, *index, st.RealNodes); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	if err := setupNodeCgroups(s.plan, *index); err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	if err := writeNodeConfigs(s, st.ClusterDNS); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log("namespaces, network and configuration ready")
	return superviseNode(s, log)
}

// settingsFor derives node i's settings from what DIR remembers.
func settingsFor(dir string, st state, i int) nodeSettings {
	p := netplan{st.NetIndex}
	return nodeSettings{
		plan:         p,
		layout:       newNodeLayout(dir, i),
		apiserver:    fmt.Sprintf("https://%s:%d", p.gateway(), st.APIServerPort),
		registryAddr: fmt.Sprintf("%s:%d", p.gateway(), st.RegistryPort),
		serviceCIDR:  serviceCIDR,
	}
}

// waitForHost blocks until the host has moved the veth in (one line on fd
// 3) or has gone away (EOF).
func waitForHost() error {
	f := os.NewFile(nodeGoFD, "go")
	if f == nil {
		return errors.New("no start pipe on fd 3")
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil || line != "go\n" {
		return fmt.Errorf("the devcluster did not hand over the network (%q, %v)", line, err)
	}
	return nil
}

func setupNodeMounts(l nodeLayout) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if err := unix.Mount("tmpfs", "/run", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("mount /run: %w", err)
	}
	binds := []struct{ src, dst string }{
		{l.root, nodeMount},
		{l.path("log"), "/var/log"},
		{l.path("cni-cache"), "/var/lib/cni"},
	}
	for _, b := range binds {
		if err := os.MkdirAll(b.src, 0o755); err != nil {
			return err
		}
		// The mount point itself is on the host's filesystem.
		if err := os.MkdirAll(b.dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(b.src, b.dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", b.src, b.dst, err)
		}
	}
	// Shared inside the node (a new peer group, not the host's), so that
	// the kubelet's volume mounts propagate to the containers that ask.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make / shared: %w", err)
	}
	return nil
}

// setupNodeNetwork brings up lo and eth0 with the node's address, routes
// the other nodes' pod ranges and the service range over eth0, and turns on
// forwarding and the bridge netfilter hooks (kube-proxy and kube-router see
// pod-to-pod traffic on cni0 only through them).
func setupNodeNetwork(p netplan, i, nodes int) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return err
	}
	link, err := netlink.LinkByName(p.peerVeth(i))
	if err != nil {
		return fmt.Errorf("veth %s not handed over: %w", p.peerVeth(i), err)
	}
	if err := netlink.LinkSetName(link, "eth0"); err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: p.nodeIP(i), Mask: net.CIDRMask(24, 32)}}
	if err := netlink.AddrAdd(link, addr); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return err
	}
	for j := 0; j < nodes; j++ {
		if j == i {
			continue
		}
		r := &netlink.Route{Dst: p.podCIDR(j), Gw: p.nodeIP(j), LinkIndex: link.Attrs().Index}
		if err := netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("route to %s: %w", realNodeName(j), err)
		}
	}
	_, svc, _ := net.ParseCIDR(serviceCIDR)
	if err := netlink.RouteAdd(&netlink.Route{Dst: svc, Gw: p.gateway(), LinkIndex: link.Attrs().Index}); err != nil {
		return fmt.Errorf("route to services: %w", err)
	}
	sysctls := map[string]string{
		"net/ipv4/ip_forward":                "1",
		"net/bridge/bridge-nf-call-iptables": "1",
	}
	for k, v := range sysctls {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			return fmt.Errorf("sysctl %s: %w", k, err)
		}
	}
	return nil
}

// setupNodeCgroups creates the node's cgroup root in every hierarchy; the
// kubelet requires it to exist.
func setupNodeCgroups(p netplan, i int) error {
	for _, h := range cgroupHierarchies() {
		if err := os.MkdirAll(filepath.Join(h, p.cgroupRoot(i)), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// child is a component the node started.
type child struct {
	name string
	pid  int
	done chan unix.WaitStatus
}

// reaper collects every exited process in the PID namespace and hands the
// status of the node's own children to whoever waits for them.
type reaper struct {
	mu       sync.Mutex
	children map[int]*child
	early    map[int]unix.WaitStatus // reaped before start() recorded them
}

func newReaper() *reaper {
	r := &reaper{children: map[int]*child{}, early: map[int]unix.WaitStatus{}}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD)
	go func() {
		for range sigs {
			r.reap()
		}
	}()
	return r
}

func (r *reaper) reap() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		r.mu.Lock()
		if c := r.children[pid]; c != nil {
			delete(r.children, pid)
			c.done <- ws
		} else {
			r.early[pid] = ws
		}
		r.mu.Unlock()
	}
}

// start runs a component with its output appended to logPath.
func (r *reaper) start(name, logPath, bin string, args ...string) (*child, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, pid: cmd.Process.Pid, done: make(chan unix.WaitStatus, 1)}
	if ws, ok := r.early[c.pid]; ok {
		delete(r.early, c.pid)
		c.done <- ws
	} else {
		r.children[c.pid] = c
	}
	return c, nil
}

// binPath finds a component built beside the devcluster binary.
func binPath(name string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(self), name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found beside %s (make devcluster builds it): %w", name, self, err)
	}
	return p, nil
}

// superviseNode starts the components in dependency order and returns when
// one of them fails (an error) or SIGTERM arrives (nil, after stopping them).
func superviseNode(s nodeSettings, log func(string, ...any)) error {
	r := newReaper()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	l := s.layout

	var running []*child
	stopAll := func() {
		for j := len(running) - 1; j >= 0; j-- {
			_ = unix.Kill(running[j].pid, unix.SIGTERM)
		}
		deadline := time.After(10 * time.Second)
		for j := len(running) - 1; j >= 0; j-- {
			select {
			case <-running[j].done:
			case <-deadline:
				return
			}
		}
	}

	containerd, err := r.start("containerd", l.path("containerd.log"), "/usr/bin/containerd", "--config", l.in("containerd.toml"))
	if err != nil {
		return err
	}
	running = append(running, containerd)
	if err := waitSocket("/run/containerd/containerd.sock", containerd, 60*time.Second); err != nil {
		stopAll()
		return fmt.Errorf("containerd: %w (see %s)", err, l.path("containerd.log"))
	}
	log("containerd ready")

	type comp struct {
		name, bin string
		args      []string
	}
	kubelet, err := binPath("kubelet")
	if err != nil {
		stopAll()
		return err
	}
	proxy, err := binPath("kube-proxy")
	if err != nil {
		stopAll()
		return err
	}
	router, err := binPath("kube-router")
	if err != nil {
		stopAll()
		return err
	}
	for _, c := range []comp{
		{"kubelet", kubelet, kubeletArgs(s)},
		{"kube-proxy", proxy, []string{"--config=" + l.in("kube-proxy.json"), "--v=1"}},
	} {
		ch, err := r.start(c.name, l.path(c.name+".log"), c.bin, c.args...)
		if err != nil {
			stopAll()
			return err
		}
		running = append(running, ch)
	}
	// kube-router reads its node's address from the Node object, which
	// exists once the kubelet has registered.
	if err := waitRegistered(s, running[1], 2*time.Minute); err != nil {
		stopAll()
		return fmt.Errorf("kubelet: %w (see %s)", err, l.path("kubelet.log"))
	}
	ch, err := r.start("kube-router", l.path("kube-router.log"), router, kubeRouterArgs(s)...)
	if err != nil {
		stopAll()
		return err
	}
	running = append(running, ch)
	log("kubelet registered; kube-proxy and kube-router started")

	failed := make(chan error, len(running))
	for _, c := range running {
		go func(c *child) {
			ws := <-c.done
			c.done <- ws // for stopAll
			failed <- fmt.Errorf("%s exited (%s); see %s", c.name, describeWait(ws), l.path(c.name+".log"))
		}(c)
	}
	select {
	case <-term:
		log("stopping")
		stopAll()
		return nil
	case err := <-failed:
		log("%v", err)
		stopAll()
		return err
	}
}

func describeWait(ws unix.WaitStatus) string {
	switch {
	case ws.Exited():
		return fmt.Sprintf("exit status %d", ws.ExitStatus())
	case ws.Signaled():
		return "killed by " + ws.Signal().String()
	}
	return fmt.Sprintf("status %#x", uint32(ws))
}

// waitSocket waits until a unix socket accepts connections, or the process
// that should serve it exits.
func waitSocket(path string, c *child, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case ws := <-c.done:
			c.done <- ws
			return fmt.Errorf("exited during start-up (%s)", describeWait(ws))
		default:
		}
		if conn, err := net.Dial("unix", path); err == nil {
			conn.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s", path, timeout)
}

// waitRegistered waits until the kubelet has registered its Node, asking
// the apiserver as the kubelet itself (the Node authorizer lets it read its
// own Node).
func waitRegistered(s nodeSettings, kubelet *child, timeout time.Duration) error {
	c, err := clientFor(filepath.Join(s.layout.dir, "pki", realNodeName(s.layout.i)+".kubeconfig"))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case ws := <-kubelet.done:
			kubelet.done <- ws
			return fmt.Errorf("exited during start-up (%s)", describeWait(ws))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, last = c.CoreV1().Nodes().Get(ctx, realNodeName(s.layout.i), metav1.GetOptions{})
		cancel()
		if last == nil {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("node not registered after %s: %v", timeout, last)
}
