// ports.go: the TCP ports a new cluster listens on (the apiserver, etcd's
// client and peer ports, the registry), chosen once and kept in DIR's state.
//
// They are chosen outside the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), from which it takes the source port of
// every outgoing connection and the port of every bind to port 0. A port
// asked of the kernel (listen on :0, close, bind it later) stays in that
// range: between the close and etcd's or the apiserver's bind, which comes
// seconds later on a first start (the PKI is made in between), any process
// that connects, or binds a client socket before connecting, can take it,
// and the start fails with "address already in use". It happened in a
// `make test` beside a CPU hog. Outside the range only a process that names
// the port itself can take it; each candidate is probed (held open on every
// address until all are chosen, so the ports are also distinct) and a busy
// one skipped. The range 30000-39999 is also avoided: the devcluster gives
// it to NodePort Services.
//
// The same ports serve every later start of DIR, so kubeconfigs stay valid.
package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ephemeralRangeFile is where Linux says which ports it hands out itself.
const ephemeralRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// portSpan is an inclusive range of ports.
type portSpan struct{ lo, hi int }

// portPool is where cluster ports are drawn from before the ephemeral range
// is taken out: above the usual services' ports, and not the NodePort range
// (--service-node-port-range).
var portPool = []portSpan{{20000, 29999}, {40000, 65535}}

// portProbes is how many random candidates choosePorts tries per port before
// it gives up.
const portProbes = 500

// ephemeralRange reads the kernel's ephemeral port range.
func ephemeralRange() (portSpan, error) {
	data, err := os.ReadFile(ephemeralRangeFile)
	if err != nil {
		return portSpan{}, err
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return portSpan{}, fmt.Errorf("%s: want two numbers, got %q", ephemeralRangeFile, data)
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || lo > hi {
		return portSpan{}, fmt.Errorf("%s: want two numbers, got %q", ephemeralRangeFile, data)
	}
	return portSpan{lo, hi}, nil
}

// outside returns the parts of pool that do not meet eph.
func outside(pool []portSpan, eph portSpan) []portSpan {
	var out []portSpan
	for _, s := range pool {
		if s.lo < eph.lo {
			out = append(out, portSpan{s.lo, min(s.hi, eph.lo-1)})
		}
		if s.hi > eph.hi {
			out = append(out, portSpan{max(s.lo, eph.hi+1), s.hi})
		}
	}
	return out
}

// pick returns a random port of spans, each port equally likely.
func pick(spans []portSpan) int {
	n := 0
	for _, s := range spans {
		n += s.hi - s.lo + 1
	}
	i := rand.IntN(n)
	for _, s := range spans {
		if i <= s.hi-s.lo {
			return s.lo + i
		}
		i -= s.hi - s.lo + 1
	}
	panic("unreachable")
}

// holdPort listens on port on every address, which fails if any socket,
// listening or connected, on any address has it.
func holdPort(port int) (net.Listener, error) {
	return net.Listen("tcp4", net.JoinHostPort("0.0.0.0", strconv.Itoa(port)))
}

// choosePorts sets each zero port in ports to a distinct free port outside
// the ephemeral range. It fails only when it finds none (a machine whose
// ephemeral range covers the whole pool, or whose pool is all in use).
func choosePorts(ports []*int) error {
	eph, err := ephemeralRange()
	if err != nil {
		return err
	}
	spans := outside(portPool, eph)
	if len(spans) == 0 {
		return fmt.Errorf("the ephemeral port range %d-%d (%s) leaves no port of %v for the cluster",
			eph.lo, eph.hi, ephemeralRangeFile, portPool)
	}
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for _, p := range ports {
		if *p != 0 {
			continue
		}
		var lastErr error
		for try := 0; try < portProbes && *p == 0; try++ {
			port := pick(spans)
			l, err := holdPort(port)
			if err != nil {
				if !errors.Is(err, syscall.EADDRINUSE) {
					return fmt.Errorf("probing port %d: %w", port, err)
				}
				lastErr = err
				continue
			}
			held = append(held, l)
			*p = port
		}
		if *p == 0 {
			return fmt.Errorf("no free port outside the ephemeral range after %d tries: %w", portProbes, lastErr)
		}
	}
	return nil
}
