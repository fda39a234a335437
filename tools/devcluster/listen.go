// listen.go: one net.Listener over several addresses, so that the
// in-process apiserver serves loopback clients and real nodes alike.
package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
)

// multiListener accepts from every listener it holds; Addr is the first's.
type multiListener struct {
	ls        []net.Listener
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

// listenBoth listens on 127.0.0.1:port and ip:port.
func listenBoth(port int, ip net.IP) (net.Listener, error) {
	m := &multiListener{conns: make(chan net.Conn), done: make(chan struct{})}
	for _, host := range []string{"127.0.0.1", ip.String()} {
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("listen on %s:%d: %w", host, port, err)
		}
		m.ls = append(m.ls, l)
	}
	for _, l := range m.ls {
		go m.serve(l)
	}
	return m, nil
}

func (m *multiListener) serve(l net.Listener) {
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
		case m.conns <- c:
		case <-m.done:
			c.Close()
			return
		}
	}
}

func (m *multiListener) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.done:
		return nil, net.ErrClosed
	}
}

func (m *multiListener) Close() error {
	m.closeOnce.Do(func() {
		close(m.done)
		for _, l := range m.ls {
			l.Close()
		}
	})
	return nil
}

func (m *multiListener) Addr() net.Addr { return m.ls[0].Addr() }
