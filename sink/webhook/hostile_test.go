package webhook_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/webhook"
)

// rawServer accepts connections on loopback and hands each to serve,
// for answers no HTTP server would give. It returns the address and
// what each connection sent before serve returned.
func rawServer(t *testing.T, serve func(c net.Conn, r *bufio.Reader)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				serve(c, bufio.NewReader(c))
			})
		}
	})
	return ln.Addr().String()
}

// readRequest reads a request's head and body from r.
func readRequest(r *bufio.Reader) (*http.Request, error) {
	req, err := http.ReadRequest(r)
	if err == nil {
		_, err = req.Body.Read(make([]byte, 1<<20))
		if err != nil && err.Error() == "EOF" {
			err = nil
		}
	}
	return req, err
}

// TestHostileResponses: endpoints that answer slowly, hugely, wrongly or
// not at all cost a bounded read and an error the worker retries; each
// call returns (no test here waits on a clock: each hostile endpoint
// never gives in, and the bound that ends the call is the sink's).
func TestHostileResponses(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	// hang waits until the client goes away; it reads the body first, so
	// that the server notices when it does.
	hang := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}

	t.Run("headers never come", func(t *testing.T) {
		srv, _ := server(t, hang)
		s := newSink(t, srv.URL, func(c *webhook.Config) { c.ResponseHeaderTimeout = 100 * time.Millisecond })
		err := publish(s, event("e-1"))
		require.Equal(t, retried, classOf(err), "%v", err)
		require.ErrorContains(t, err, "webhook: timed out")
	})
	t.Run("the context ends first", func(t *testing.T) {
		srv, _ := server(t, hang)
		s := newSink(t, srv.URL, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := s.Publish(ctx, event("e-1"))
		require.Equal(t, retried, classOf(err))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		ctx, cancel = context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		err = s.Publish(ctx, event("e-2"))
		require.ErrorContains(t, err, "webhook: cancelled")
		require.Equal(t, retried, classOf(err))
	})
	t.Run("a 2xx whose body never ends is delivered", func(t *testing.T) {
		srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("partial"))
			w.(http.Flusher).Flush()
			hang(w, r)
		})
		s := newSink(t, srv.URL, func(c *webhook.Config) { c.BodyTimeout = 100 * time.Millisecond })
		require.NoError(t, publish(s, event("e-1")))
	})
	t.Run("a 503 whose body never ends", func(t *testing.T) {
		srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("down for maintenance"))
			w.(http.Flusher).Flush()
			hang(w, r)
		})
		// The excerpt was sent with the headers; a second is long enough
		// to read it, on any machine.
		s := newSink(t, srv.URL, func(c *webhook.Config) { c.BodyTimeout = time.Second })
		err := publish(s, event("e-1"))
		require.Equal(t, retried, classOf(err))
		require.EqualError(t, err, "webhook: HTTP 503 Service Unavailable: down for maintenance; retry after 7s (POST "+srv.URL+")")
	})
	t.Run("a huge body is read only in part", func(t *testing.T) {
		wrote := make(chan error, 1)
		srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			chunk := []byte(strings.Repeat("x", 64<<10))
			var err error
			for i := 0; i < 1024 && err == nil; i++ { // 64 MiB
				_, err = w.Write(chunk)
			}
			wrote <- err
		})
		s := newSink(t, srv.URL, nil)
		err := publish(s, event("e-1"))
		require.Equal(t, retried, classOf(err))
		require.Less(t, len(err.Error()), 300, "an excerpt, never the body")
		require.Error(t, <-wrote, "the sink stopped reading and closed the connection long before 64 MiB")
	})
	t.Run("a body with terminal escapes and invalid UTF-8 is escaped", func(t *testing.T) {
		srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte("\x1b[31mbad\xff\r\nHTTP/1.1 200 OK\u202e"))
		})
		err := publish(newSink(t, srv.URL, nil), event("e-1"))
		require.Equal(t, permanent, classOf(err))
		require.Contains(t, err.Error(), `HTTP 400 Bad Request: \u001b[31mbad`)
		require.NotContains(t, err.Error(), "\x1b")
		require.NotContains(t, err.Error(), "\r")
		require.NotContains(t, err.Error(), "\u202e")
	})
	t.Run("a body that echoes a credential is withheld", func(t *testing.T) {
		srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte("bad request: " + r.Header.Get("Authorization") + " for " + r.URL.RequestURI()))
		})
		for _, url := range []string{srv.URL + "/in/" + urlToken, srv.URL + "/in?token=" + urlToken} {
			s := newSink(t, url, func(c *webhook.Config) { c.Headers = map[string]string{"Authorization": bearer} })
			err := publish(s, event("e-1"))
			require.ErrorContains(t, err, "bytes withheld: they quote a credential or the URL")
			require.NotContains(t, err.Error(), bearer)
			require.NotContains(t, err.Error(), urlToken)
		}
	})
	t.Run("not HTTP at all", func(t *testing.T) {
		addr := rawServer(t, func(c net.Conn, r *bufio.Reader) {
			_, _ = readRequest(r)
			_, _ = c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n\r\n"))
		})
		err := publish(newSink(t, "http://"+addr, nil), event("e-1"))
		require.Equal(t, retried, classOf(err), "%v", err)
		require.ErrorContains(t, err, `webhook: request failed: net/http: HTTP/1.x transport connection broken: malformed HTTP response "SSH-2.0-OpenSSH_9.6"`)
	})
	t.Run("the connection is reset", func(t *testing.T) {
		addr := rawServer(t, func(c net.Conn, r *bufio.Reader) {
			_, _ = readRequest(r)
			_ = c.(*net.TCPConn).SetLinger(0) // close with RST
		})
		err := publish(newSink(t, "http://"+addr, nil), event("e-1"))
		require.Equal(t, retried, classOf(err), "%v", err)
		require.ErrorContains(t, err, "webhook: request failed")
	})
	t.Run("nobody listens", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		ln.Close()
		err = publish(newSink(t, "http://"+addr, nil), event("e-1"))
		require.Equal(t, retried, classOf(err))
		require.ErrorContains(t, err, "connection refused")
	})
}

// TestRedirects: not followed by default; with MaxRedirects only 307 and
// 308 are, within the bound, never to http from https, each target
// through the address guard, and the Headers stay with their host.
func TestRedirects(t *testing.T) {
	var got http.Header
	var mu sync.Mutex
	target, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	redirector, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusTemporaryRedirect
		if r.URL.Path == "/found" {
			code = http.StatusFound
		}
		to := map[string]string{"/loop": "/loop", "/metadata": "http://169.254.169.254/latest/meta-data/"}[r.URL.Path]
		if to == "" {
			to = target.URL + "/moved"
		}
		http.Redirect(w, r, to, code)
	})
	withRedirects := func(c *webhook.Config) {
		c.MaxRedirects = 3
		c.Headers = map[string]string{"X-Api-Key": bearer}
	}

	err := publish(newSink(t, redirector.URL+"/moved", nil), event("e-1"))
	require.Equal(t, unavailable, classOf(err))
	require.ErrorContains(t, err, "webhook: redirected (HTTP 307) to "+target.URL+", which is not followed (Config.MaxRedirects is 0: fix the URL)")

	s := newSink(t, redirector.URL+"/moved", withRedirects)
	require.NoError(t, publish(s, event("e-2")))
	mu.Lock()
	require.Empty(t, got.Get("X-Api-Key"), "Config.Headers are not sent to another host")
	require.NoError(t, webhook.Verify([]string{secret}, got, []byte(`{"id":"e-2"}`), 0), "the signature holds at the new host")
	mu.Unlock()

	err = publish(newSink(t, redirector.URL+"/loop", withRedirects), event("e-3"))
	require.Equal(t, unavailable, classOf(err))
	require.ErrorContains(t, err, "webhook: redirect not followed: more than Config.MaxRedirects (3) redirects")

	err = publish(newSink(t, redirector.URL+"/found", withRedirects), event("e-4"))
	require.Equal(t, unavailable, classOf(err))
	require.ErrorContains(t, err, "only 307 and 308 keep the POST and its body")

	err = publish(newSink(t, redirector.URL+"/metadata", withRedirects), event("e-5"))
	require.Equal(t, unavailable, classOf(err))
	require.ErrorIs(t, err, webhook.ErrForbiddenAddress, "a redirect's target passes the guard too")

	// From https to http: refused.
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusPermanentRedirect)
	}))
	t.Cleanup(tlsSrv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(tlsSrv.Certificate())
	err = publish(newSink(t, tlsSrv.URL, func(c *webhook.Config) {
		withRedirects(c)
		c.TLSConfig = &tls.Config{RootCAs: pool}
	}), event("e-6"))
	require.Equal(t, unavailable, classOf(err))
	require.ErrorContains(t, err, "a redirect from https to http")

	// A certificate the sink does not trust: the set-up's fault.
	err = publish(newSink(t, tlsSrv.URL, nil), event("e-7"))
	require.Equal(t, unavailable, classOf(err), "%v", err)
	require.ErrorContains(t, err, "webhook: TLS certificate not accepted")
}

// TestAddressGuard: the sink connects to no special address unless
// allowed, whether the URL names it, resolves to it or a function of the
// message returns it; and refuses before connecting.
func TestAddressGuard(t *testing.T) {
	srv, hits := server(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]

	// A name that resolves to loopback: caught when connecting.
	s := newSink(t, "http://localhost:"+port+"/hooks", func(c *webhook.Config) { c.AllowNetworks = nil })
	err := publish(s, event("e-1"))
	require.Equal(t, unavailable, classOf(err), "%v", err)
	require.ErrorIs(t, err, webhook.ErrForbiddenAddress)
	require.Regexp(t, `^webhook: refused to connect: .*address (127\.0\.0\.1|::1) is loopback, which Config.AllowNetworks does not allow`, err.Error())

	// A message's URL: its own fault.
	s = newSink(t, "", func(c *webhook.Config) {
		c.URL, c.AllowNetworks = "", nil
		c.URLFor = func(m outbox.Message) (string, error) { return m.Headers["X-Target"], nil }
	})
	for _, target := range []string{"http://localhost:" + port, "http://127.0.0.1:" + port, "http://[::ffff:127.0.0.1]:" + port, "http://169.254.169.254/"} {
		m := event("e-2")
		m.Headers = map[string]string{"X-Target": target}
		err := publish(s, m)
		require.Equal(t, permanent, classOf(err), "%s: %v", target, err)
		require.ErrorIs(t, err, webhook.ErrForbiddenAddress, target)
	}
	require.Zero(t, hits.Load(), "no request reached the server")

	// Allowed: only the networks listed.
	s = newSink(t, "http://localhost:"+port+"/hooks", func(c *webhook.Config) {
		c.AllowNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}
	})
	require.NoError(t, publish(s, event("e-3")))
}
