package webhook_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/sinktest"
	"github.com/outboxrelay/outboxrelay/sink/webhook"
)

// Secrets of the tests: the signing secret, another one (a rotated-away
// secret, for a sink the receiver does not trust), a bearer token sent
// in a header and a token in the URL's query.
const (
	secret      = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	otherSecret = "whsec_bm90LXRoZS1yZWNlaXZlcnMtc2VjcmV0LWtleQ=="
	bearer      = "Bearer tok-1c9e5b7f3a2d4e6f8091"
	urlToken    = "url-token-7f3a9c1e5b2d4e6f"
)

// TestConformance runs the sink suite against receivers on loopback
// that verify every signature (a real HTTP server each, net/http's),
// refuse a sink signing with a secret they do not know (401:
// Unavailable) and messages of type "Rejected" (422: Permanent). The
// peer goes away as an endpoint whose listener closed: connections
// refused, those in flight cut.
func TestConformance(t *testing.T) {
	var (
		mu        sync.Mutex
		receivers []*receiver
	)
	each := func(f func(*receiver)) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range receivers {
			f(r)
		}
	}
	newTarget := func(t *testing.T, secrets ...string) (*receiver, *webhook.Sink) {
		r := newReceiver(t, secret)
		mu.Lock()
		receivers = append(receivers, r)
		mu.Unlock()
		s, err := webhook.New(webhook.Config{
			URL: r.url() + "?token=" + urlToken, Secrets: secrets, AllowNetworks: loopback,
			Headers: map[string]string{"Authorization": bearer}, Logger: outboxtest.Logger(t),
		})
		require.NoError(t, err)
		return r, s
	}
	sinktest.Run(t, sinktest.Peer{
		NewSink: func(t *testing.T) sinktest.Target {
			r, s := newTarget(t, secret)
			return sinktest.Target{Sink: s, Received: r.received}
		},
		Stop:  func(*testing.T) { each((*receiver).stop) },
		Start: func(t *testing.T) { each(func(r *receiver) { r.start(t) }) },
		Unacceptable: []outbox.Message{
			{ID: "rejected-by-the-receiver", Type: "Rejected", Payload: []byte("{}")},
			{ID: "over-max-payload", Type: "T", Payload: []byte(strings.Repeat("x", webhook.DefaultMaxPayloadBytes+1))},
			{ID: "header-with-a-line-break", Type: "T", Headers: map[string]string{"X-Note": "a\r\nX-Injected: 1"}},
			{ID: "headers-too-large", Type: "T", Headers: map[string]string{"X-Big": strings.Repeat("b", webhook.MaxHeaderBytes)}},
		},
		Misconfigured: func(t *testing.T) outbox.Sink {
			_, s := newTarget(t, otherSecret)
			return s
		},
		Secrets:      []string{secret, otherSecret, bearer, urlToken},
		KeepsHeaders: true,
	})
}
