// realnet.go: the addresses of the real nodes and the host side of their
// network.
//
// Real nodes run in network namespaces of their own (node.go). On the host
// there is one Linux bridge per cluster, kdc<k>, and one veth per node whose
// other end is the node's eth0. Cluster k owns 10.(224+k).0.0/16:
//
//	10.(224+k).0.1/24        the bridge: the apiserver and the registry listen here
//	10.(224+k).0.(10+i)      node i's eth0 (NodePorts, the kubelet's port)
//	10.(224+k).(16+i).0/24   pods of node i (the CNI bridge cni0 inside the node)
//
// The host routes each node's pod range to that node, over the bridge, so
// pods can reach the apiserver and the host can reach pods. Nothing else is
// routed: the nodes have no default route and the host does no NAT, so pod
// and service addresses never leave the machine. Deleting the bridge
// removes the host's routes with it; the nodes' own links, addresses, rules
// and routes live in their namespaces and vanish with them.
//
// k is chosen once per DIR (devcluster.json) among 0..15, skipping ranges
// the host already routes and bridges another running cluster holds; the
// bridge's alias names the DIR that owns it, so a bridge left behind by a
// crashed cluster is recognised and replaced.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
)

const (
	maxNetIndex  = 16 // clusters with real nodes that can run at once
	maxRealNodes = 16 // real nodes per cluster: pod ranges 16..31
)

// netplan is the address plan of cluster k.
type netplan struct{ k int }

func (p netplan) octet() byte { return byte(224 + p.k) }

func (p netplan) block() *net.IPNet {
	return &net.IPNet{IP: net.IPv4(10, p.octet(), 0, 0).To4(), Mask: net.CIDRMask(16, 32)}
}

func (p netplan) subnet() *net.IPNet {
	return &net.IPNet{IP: net.IPv4(10, p.octet(), 0, 0).To4(), Mask: net.CIDRMask(24, 32)}
}

func (p netplan) gateway() net.IP     { return net.IPv4(10, p.octet(), 0, 1).To4() }
func (p netplan) nodeIP(i int) net.IP { return net.IPv4(10, p.octet(), 0, byte(10+i)).To4() }

func (p netplan) podCIDR(i int) *net.IPNet {
	return &net.IPNet{IP: net.IPv4(10, p.octet(), byte(16+i), 0).To4(), Mask: net.CIDRMask(24, 32)}
}

// clusterCIDR covers every real node's pod range.
func (p netplan) clusterCIDR() *net.IPNet {
	return &net.IPNet{IP: net.IPv4(10, p.octet(), 16, 0).To4(), Mask: net.CIDRMask(20, 32)}
}

func (p netplan) bridge() string        { return fmt.Sprintf("kdc%d", p.k) }
func (p netplan) hostVeth(i int) string { return fmt.Sprintf("kdc%dn%d", p.k, i) }
func (p netplan) peerVeth(i int) string { return fmt.Sprintf("kdc%dp%d", p.k, i) }

// realNodeName is the Node name of real node i.
func realNodeName(i int) string { return fmt.Sprintf("real-node-%d", i) }

// cgroupRoot is the cgroup every process of real node i lives under, in
// each cgroup hierarchy (kubelet --cgroup-root).
func (p netplan) cgroupRoot(i int) string {
	return fmt.Sprintf("/devcluster-%d-%s", p.k, realNodeName(i))
}

// chooseNetIndex returns the k this DIR keeps using if its range is still
// free (or its own bridge is there), else the first free one.
func chooseNetIndex(dir string, remembered int) (int, error) {
	if remembered >= 0 && remembered < maxNetIndex && netIndexFree(dir, remembered) {
		return remembered, nil
	}
	for k := 0; k < maxNetIndex; k++ {
		if netIndexFree(dir, k) {
			return k, nil
		}
	}
	return 0, fmt.Errorf("no free address range for real nodes: 10.224.0.0/16 to 10.239.0.0/16 are all in use (other devclusters or host routes)")
}

// netIndexFree reports whether cluster range k can be ours: no bridge of
// another DIR has it, and no host route or address other than our own
// bridge's falls inside it.
func netIndexFree(dir string, k int) bool {
	p := netplan{k}
	if br, err := netlink.LinkByName(p.bridge()); err == nil {
		if br.Attrs().Alias != dir {
			return false
		}
	}
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return false
	}
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		if link, err := netlink.LinkByIndex(r.LinkIndex); err == nil && link.Attrs().Name == p.bridge() {
			continue
		}
		// A route inside the block would compete with ours; a wider one
		// (a default route, a VPN's 10.0.0.0/8) loses to our more specific ones.
		if p.block().Contains(r.Dst.IP) {
			return false
		}
	}
	return true
}

// netlinkBridgeAlias returns the alias (the owning DIR) of cluster p's
// bridge, or an error if there is no such bridge.
func netlinkBridgeAlias(p netplan) (string, error) {
	br, err := netlink.LinkByName(p.bridge())
	if err != nil {
		return "", err
	}
	return br.Attrs().Alias, nil
}

// setupBridge (re)creates the cluster's bridge with the gateway address.
// A bridge left by an earlier run of this DIR is deleted first, with every
// route through it.
func setupBridge(dir string, p netplan) error {
	if err := deleteBridge(p); err != nil {
		return err
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: p.bridge()}}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("create bridge %s: %w", p.bridge(), err)
	}
	link, err := netlink.LinkByName(p.bridge())
	if err != nil {
		return err
	}
	if err := netlink.LinkSetAlias(link, dir); err != nil {
		return fmt.Errorf("bridge %s: %w", p.bridge(), err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: p.gateway(), Mask: net.CIDRMask(24, 32)}}
	if err := netlink.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("bridge %s address: %w", p.bridge(), err)
	}
	return netlink.LinkSetUp(link)
}

// deleteBridge removes the cluster's bridge and, with it, the host routes
// and the host ends of the nodes' veths; a missing bridge is not an error.
func deleteBridge(p netplan) error {
	for i := 0; i < maxRealNodes; i++ {
		if veth, err := netlink.LinkByName(p.hostVeth(i)); err == nil {
			_ = netlink.LinkDel(veth)
		}
	}
	link, err := netlink.LinkByName(p.bridge())
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return nil
		}
		return err
	}
	if err := netlink.LinkDel(link); err != nil {
		return fmt.Errorf("delete bridge %s: %w", p.bridge(), err)
	}
	return nil
}

// plugNode creates node i's veth pair on the bridge, moves the peer into
// the namespace of process pid (the node's init) and routes the node's pod
// range to it. The node names and addresses its end itself (node.go).
func plugNode(p netplan, i, pid int) error {
	br, err := netlink.LinkByName(p.bridge())
	if err != nil {
		return fmt.Errorf("bridge %s: %w", p.bridge(), err)
	}
	if old, err := netlink.LinkByName(p.hostVeth(i)); err == nil {
		_ = netlink.LinkDel(old)
	}
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{Name: p.hostVeth(i), MasterIndex: br.Attrs().Index},
		PeerName:  p.peerVeth(i),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("veth for %s: %w", realNodeName(i), err)
	}
	peer, err := netlink.LinkByName(p.peerVeth(i))
	if err != nil {
		return err
	}
	if err := netlink.LinkSetNsPid(peer, pid); err != nil {
		return fmt.Errorf("move veth into %s: %w", realNodeName(i), err)
	}
	host, err := netlink.LinkByName(p.hostVeth(i))
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return err
	}
	route := &netlink.Route{Dst: p.podCIDR(i), Gw: p.nodeIP(i), LinkIndex: br.Attrs().Index}
	if err := netlink.RouteReplace(route); err != nil {
		return fmt.Errorf("route %s via %s: %w", p.podCIDR(i), p.nodeIP(i), err)
	}
	return nil
}

// cgroupHierarchies lists the mounted cgroup hierarchies (v1 controllers,
// named ones, or the v2 root) under /sys/fs/cgroup.
func cgroupHierarchies() []string {
	var out []string
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		// ... mountpoint(4) ... " - " fstype source options
		sep := -1
		for j, w := range f {
			if w == "-" {
				sep = j
				break
			}
		}
		if sep < 0 || sep+1 >= len(f) || len(f) < 5 {
			continue
		}
		if fs := f[sep+1]; (fs == "cgroup" || fs == "cgroup2") && strings.HasPrefix(f[4], "/sys/fs/cgroup") {
			out = append(out, f[4])
		}
	}
	return out
}

// removeCgroups deletes the cgroups of real node i in every hierarchy,
// deepest first. It fails if a cgroup still has processes.
func removeCgroups(p netplan, i int) error {
	var errs []string
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, p.cgroupRoot(i))
		if _, err := os.Stat(root); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for j := len(dirs) - 1; j >= 0; j-- {
			if err := syscall.Rmdir(dirs[j]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Sprintf("%s: %v", dirs[j], err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cgroups left: %s", strings.Join(errs, "; "))
	}
	return nil
}
