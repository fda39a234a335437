// listen.go: the apiserver's listener. It accepts on several addresses, and
// opens its public ones only once the apiserver is ready.
//
// A kube-apiserver serves requests before its readiness checks pass; until
// its RBAC informers have synced it answers 403 to requests its roles allow.
// In production a load balancer that health-checks /readyz keeps clients
// away from it until then. The devcluster does the same without a load
// balancer: the apiserver starts on a private loopback address (the same
// port on 127.0.0.2), which its own loopback client and the devcluster's
// readiness wait use; the addresses in the kubeconfigs (127.0.0.1, and the
// bridge when there are real nodes) refuse connections, as a stopped
// apiserver does, until /readyz says ok. A client that outlives a restart
// thus never meets a half-started apiserver.
package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
)

// privateHost is where the apiserver listens from its start: loopback, not
// in any kubeconfig. Its serving certificate is for 127.0.0.1, which clients
// of the private address name as the TLS server name.
const privateHost = "127.0.0.2"

// gatedListener accepts from the private listener at once and from the
// public ones after open. Addr is the private address: the apiserver's
// loopback client uses it, and its port is the "kubernetes" Service's.
type gatedListener struct {
	port      int
	public    []net.IP
	mu        sync.Mutex
	ls        []net.Listener
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

// newGatedListener listens on privateHost:port now; open adds public:port.
func newGatedListener(port int, public ...net.IP) (*gatedListener, error) {
	g := &gatedListener{port: port, public: public, conns: make(chan net.Conn), done: make(chan struct{})}
	if err := g.listen(privateHost); err != nil {
		return nil, err
	}
	return g, nil
}

// privateAddr is host:port of the private listener.
func (g *gatedListener) privateAddr() string {
	return net.JoinHostPort(privateHost, strconv.Itoa(g.port))
}

// open starts accepting on the public addresses.
func (g *gatedListener) open() error {
	for _, ip := range g.public {
		if err := g.listen(ip.String()); err != nil {
			return err
		}
	}
	return nil
}

func (g *gatedListener) listen(host string) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(g.port)))
	if err != nil {
		return fmt.Errorf("listen on %s:%d: %w", host, g.port, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.done:
		l.Close()
		return net.ErrClosed
	default:
	}
	g.ls = append(g.ls, l)
	go g.serve(l)
	return nil
}

func (g *gatedListener) serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		select {
		case g.conns <- c:
		case <-g.done:
			c.Close()
			return
		}
	}
}

func (g *gatedListener) Accept() (net.Conn, error) {
	select {
	case c := <-g.conns:
		return c, nil
	case <-g.done:
		return nil, net.ErrClosed
	}
}

func (g *gatedListener) Close() error {
	g.closeOnce.Do(func() {
		close(g.done)
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, l := range g.ls {
			l.Close()
		}
	})
	return nil
}

func (g *gatedListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.ParseIP(privateHost), Port: g.port}
}
