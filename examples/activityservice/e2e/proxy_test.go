//go:build e2e

package e2e

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// proxy forwards TCP connections to a server and can be frozen: while
// frozen, nothing it has read is forwarded, in either direction. The test
// puts it between activity-service and NATS, to hold acks back.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// startProxy proxies to the NATS server at natsURL until the test ends.
func startProxy(t *testing.T, natsURL string) *proxy {
	t.Helper()
	u, err := url.Parse(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: u.Host, conns: map[net.Conn]bool{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL is the NATS URL that goes through the proxy.
func (p *proxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = true, true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

// pipe copies from src to dst, waiting while the proxy is frozen; it
// closes both when either side ends.
func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer p.drop(dst, src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.frozen && p.conns[src] {
				p.cond.Wait()
			}
			live := p.conns[src]
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

func (p *proxy) drop(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
		c.Close()
	}
	p.cond.Broadcast()
}

// freeze holds everything read from now on.
func (p *proxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

// cut closes every connection, dropping what the freeze held, and lets
// new connections through.
func (p *proxy) cut() {
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.frozen = false
	p.mu.Unlock()
	p.drop(conns...)
}

func (p *proxy) close() {
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}
