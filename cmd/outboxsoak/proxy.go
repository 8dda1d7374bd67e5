package main

import (
	"net"
	"strconv"
	"sync"
)

// proxy forwards TCP connections from the worker processes to the
// database server, so that the run can stall their network (stall:
// nothing read is forwarded, either way, until thaw) and tell their
// sessions on the server by the proxy's ports (upstreamPorts). It is
// safe for concurrent use.
type proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cond    *sync.Cond
	stalled bool
	// conns are the open connections, each mapped to its peer.
	conns map[net.Conn]net.Conn
	// upstream are the connections to the server.
	upstream map[net.Conn]bool
	wg       sync.WaitGroup
}

// startProxy listens on a loopback port and forwards to target.
func startProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]net.Conn{}, upstream: map[net.Conn]bool{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// addr is the address that reaches the server through the proxy.
func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close() // the server is down: the client sees its connection end
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = s, c
		p.upstream[s] = true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

// pipe copies from src to dst, holding what it read while the proxy is
// stalled; it closes both when either side ends.
func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer p.drop(src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.stalled && p.conns[src] != nil {
				p.cond.Wait()
			}
			live := p.conns[src] != nil
			p.mu.Unlock()
			if !live {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// drop closes c and its peer.
func (p *proxy) drop(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	peer := p.conns[c]
	for _, x := range []net.Conn{c, peer} {
		if x != nil {
			delete(p.conns, x)
			delete(p.upstream, x)
			x.Close()
		}
	}
	p.cond.Broadcast()
}

// stall holds everything read from now on, on every connection, old and
// new, until thaw.
func (p *proxy) stall() {
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
}

// thaw forwards again, what was held first.
func (p *proxy) thaw() {
	p.mu.Lock()
	p.stalled = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// upstreamPorts returns the local ports of the connections to the
// server: the client ports the server sees for the worker processes'
// sessions.
func (p *proxy) upstreamPorts() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for s := range p.upstream {
		if _, port, err := net.SplitHostPort(s.LocalAddr().String()); err == nil {
			if n, err := strconv.Atoi(port); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// close stops listening, closes every connection and waits for the
// goroutines.
func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.stalled = false
	p.mu.Unlock()
	for _, c := range conns {
		p.drop(c)
	}
	p.wg.Wait()
}
