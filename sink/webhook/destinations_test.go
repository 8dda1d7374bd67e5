package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/webhook"
)

// goneHost is a name that never resolves (RFC 6761 reserves .invalid).
const goneHost = "tenant-gone.invalid"

// resolverSaysNoSuchHost reports whether this machine's resolver answers
// that goneHost does not exist, as resolvers do; without one that
// answers, a lookup fails otherwise (a timeout), which the sink retries.
func resolverSaysNoSuchHost(t *testing.T) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := net.DefaultResolver.LookupHost(ctx, goneHost)
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return true
	}
	t.Logf("the resolver does not say %s does not exist (%v): that target is left out", goneHost, err)
	return false
}

// tenants are endpoints of a URLFor sink, by the message's key: one
// that takes every message, and some whose set-up refuses them.
func tenants(t *testing.T) map[string]string {
	ok, _ := server(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	status, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			w.Header().Set("Location", "https://elsewhere.example/hooks")
			w.WriteHeader(http.StatusMovedPermanently)
		case "/unauthorized":
			w.WriteHeader(http.StatusUnauthorized)
		case "/forbidden":
			w.WriteHeader(http.StatusForbidden)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	untrusted := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	untrusted.StartTLS()
	t.Cleanup(untrusted.Close)
	ts := map[string]string{
		"ok":           ok.URL + "/hooks",
		"moved":        status.URL + "/moved",
		"unauthorized": status.URL + "/unauthorized",
		"forbidden":    status.URL + "/forbidden",
		"missing":      status.URL + "/missing",
		"bad-cert":     untrusted.URL + "/hooks",
	}
	if resolverSaysNoSuchHost(t) {
		ts["gone"] = "http://" + goneHost + "/hooks"
	}
	return ts
}

// urlForSink is a sink whose URLFor sends each message to the tenant
// its key names.
func urlForSink(t *testing.T, ts map[string]string) *webhook.Sink {
	return newSink(t, "", func(c *webhook.Config) {
		c.URL = ""
		c.URLFor = func(m outbox.Message) (string, error) { return ts[m.Key], nil }
	})
}

// TestURLForEndpointFailuresAreTheMessages (issue 37, defect 8): with
// URLFor, an endpoint whose set-up refuses the message (a host that does
// not resolve, a certificate not trusted, a redirect not followed, 401,
// 403, 404) fails that message permanently, naming it: never
// Unavailable, which would hold off the sink, and so every other
// endpoint. (d72aedb: all but 404 were Unavailable.)
func TestURLForEndpointFailuresAreTheMessages(t *testing.T) {
	ts := tenants(t)
	s := urlForSink(t, ts)
	for key := range ts {
		m := event("e-" + key)
		m.Key = key
		err := publish(s, m)
		if key == "ok" {
			require.NoError(t, err)
			continue
		}
		require.Equal(t, permanent, classOf(err), "%s: %v", key, err)
		require.ErrorContains(t, err, `(message "e-`+key+`"`, key)
	}
}

// TestOneEndpointDoesNotHoldOffTheOthers (issue 37, defect 8): a worker
// on a URLFor sink delivers every message of the endpoint that works,
// never holds the sink off, and dead-letters the messages whose
// endpoints refuse them (d72aedb: the first of those held the sink off
// for every endpoint).
func TestOneEndpointDoesNotHoldOffTheOthers(t *testing.T) {
	ts := tenants(t)
	store := outboxtest.NewStore()
	var heldOff atomic.Int64
	w, err := outbox.NewWorker(store, urlForSink(t, ts), outbox.WorkerOptions{
		PollInterval: 20 * time.Millisecond, Logger: outboxtest.Logger(t),
		// Probes at every poll: a hold-off, if any, is counted, and does
		// not slow the test down.
		Breaker: outbox.SinkBreaker{MaxProbeInterval: 20 * time.Millisecond},
		Observer: outbox.ObserverFunc(func(_ context.Context, e outbox.Event) {
			if e.Kind == outbox.EventSinkDown {
				heldOff.Add(1)
			}
		}),
	})
	require.NoError(t, err)
	var ms []outbox.Message
	for i := range 5 {
		for key := range ts {
			m := event(fmt.Sprintf("%s-%d", key, i))
			m.Key = key
			ms = append(ms, m)
		}
	}
	tx := store.Begin()
	require.NoError(t, store.Enqueue(context.Background(), tx, nil, ms...))
	require.NoError(t, tx.Commit())

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		stop()
		require.NoError(t, <-done)
	}()
	settled := func(key string) func() bool {
		return func() bool {
			for _, m := range ms {
				if r, err := store.Get(context.Background(), m.ID); (key == "" || m.Key == key) && (err != nil || r.Status == outbox.StatusPending) {
					return false
				}
			}
			return true
		}
	}
	outboxtest.Eventually(t, "the working endpoint's messages published", settled("ok"))
	require.Zero(t, heldOff.Load(), "one endpoint's refusal held off the sink for every endpoint")
	outboxtest.Eventually(t, "every message published or dead", settled(""))
	for _, m := range ms {
		r, err := store.Get(context.Background(), m.ID)
		require.NoError(t, err)
		want := outbox.StatusDead
		if m.Key == "ok" {
			want = outbox.StatusPublished
		}
		require.Equal(t, want, r.Status, "%s: %s", m.ID, r.LastError)
	}
}

// TestLiteralForbiddenAddressFailsNew (issue 37, defect 8): a URL whose
// host is an address the guard refuses fails New, which says why with
// an error that wraps ErrForbiddenAddress (d72aedb: it did not); a name
// is checked when the sink connects, after it is resolved.
func TestLiteralForbiddenAddressFailsNew(t *testing.T) {
	for _, url := range []string{"http://127.0.0.1:8080/hooks", "http://[::1]/hooks", "http://169.254.169.254/latest", "http://[::ffff:10.0.0.1]/x"} {
		cfg := validConfig()
		cfg.URL = url
		_, err := webhook.New(cfg)
		require.ErrorIs(t, err, webhook.ErrForbiddenAddress, url)
	}
	cfg := validConfig()
	cfg.URL = "http://localhost:8080/hooks"
	_, err := webhook.New(cfg)
	require.NoError(t, err, "a name is checked at connect time")
}
