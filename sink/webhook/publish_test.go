package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/webhook"
)

// newSink is a sink to url that may connect to loopback, closed when t
// ends; mod adjusts its config.
func newSink(t *testing.T, url string, mod func(*webhook.Config)) *webhook.Sink {
	t.Helper()
	cfg := webhook.Config{URL: url, Secrets: []string{secret}, AllowNetworks: loopback, Logger: outboxtest.Logger(t)}
	if mod != nil {
		mod(&cfg)
	}
	s, err := webhook.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// server is an HTTP server on loopback, closed when t ends; it counts
// the requests it got.
func server(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func event(id string) outbox.Message {
	return outbox.Message{ID: id, Key: "room-1", Type: "RoomGiftSent", Payload: []byte(`{"id":"` + id + `"}`),
		Headers: map[string]string{outbox.HeaderTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
}

func publish(s *webhook.Sink, m outbox.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return s.Publish(ctx, m)
}

type class int

const (
	delivered class = iota
	retried
	permanent
	unavailable
)

func classOf(err error) class {
	switch {
	case err == nil:
		return delivered
	case outbox.IsUnavailable(err):
		return unavailable
	case outbox.IsPermanent(err):
		return permanent
	}
	return retried
}

func (c class) String() string {
	return [...]string{"delivered", "retried (plain)", "Permanent", "Unavailable"}[c]
}

// TestStatusClasses: what each answer's status makes of the message.
func TestStatusClasses(t *testing.T) {
	cases := []struct {
		status int
		want   class
	}{
		{200, delivered}, {201, delivered}, {202, delivered}, {204, delivered}, {299, delivered},
		{301, unavailable}, {302, unavailable}, {303, unavailable}, {307, unavailable}, {308, unavailable},
		{400, permanent}, {409, permanent}, {413, permanent}, {415, permanent}, {422, permanent}, {431, permanent},
		{401, unavailable}, {403, unavailable}, {404, unavailable}, {405, unavailable}, {410, unavailable},
		{408, retried}, {429, retried}, {500, retried}, {502, retried}, {503, retried}, {504, retried}, {599, retried},
	}
	srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("status"))
		if code >= 300 && code < 400 {
			w.Header().Set("Location", "https://elsewhere.example/new/"+urlToken)
		}
		w.WriteHeader(code)
	})
	for _, tc := range cases {
		s := newSink(t, srv.URL+"/hooks?status="+strconv.Itoa(tc.status), nil)
		err := publish(s, event("e-1"))
		require.Equal(t, tc.want, classOf(err), "HTTP %d: %v", tc.status, err)
		if err == nil {
			continue
		}
		var e *webhook.Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, tc.status, e.StatusCode)
		require.Regexp(t, `^webhook: (HTTP \d+|redirected \(HTTP \d+\))`, err.Error(), "the failure comes first")
		require.Contains(t, err.Error(), "(POST "+srv.URL+")", "the endpoint last, without path or query")
		require.NotContains(t, err.Error(), urlToken)
	}

	// With URLFor, the URL is the message's: a missing endpoint is its
	// own fault.
	s := newSink(t, "", func(c *webhook.Config) {
		c.URL = ""
		c.URLFor = func(outbox.Message) (string, error) { return srv.URL + "/tenant?status=404", nil }
	})
	require.Equal(t, permanent, classOf(publish(s, event("e-2"))))
}

// TestRetryAfter: the wait an endpoint asks for, in seconds or as a
// date, capped, and a policy that honours it.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		header string
		want   time.Duration
	}{
		{"30", 30 * time.Second},
		{"0", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"soon", 0},
		{"-5", 0},
		{"1.5", 0},
		{"99999999999999999999999", webhook.DefaultMaxRetryAfter},
		{"86400", webhook.DefaultMaxRetryAfter},
	}
	srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", r.Header.Get("X-Test-Retry-After"))
		w.WriteHeader(http.StatusTooManyRequests)
	})
	s := newSink(t, srv.URL, func(c *webhook.Config) { c.Now = func() time.Time { return now } })
	for _, tc := range cases {
		m := event("e-1")
		m.Headers = map[string]string{"X-Test-Retry-After": tc.header}
		err := publish(s, m)
		require.Equal(t, retried, classOf(err))
		got, ok := webhook.RetryAfter(err)
		require.Equal(t, tc.want, got, "Retry-After: %s", tc.header)
		require.Equal(t, tc.want > 0, ok)
	}
	capped := newSink(t, srv.URL, func(c *webhook.Config) { c.MaxRetryAfter = time.Minute })
	m := event("e-2")
	m.Headers = map[string]string{"X-Test-Retry-After": "600"}
	err := publish(capped, m)
	got, _ := webhook.RetryAfter(err)
	require.Equal(t, time.Minute, got, "MaxRetryAfter")
	require.Contains(t, err.Error(), "HTTP 429 Too Many Requests; retry after 1m0s")

	policy := webhook.RespectRetryAfter{Policy: outbox.FixedInterval{Interval: time.Second}}
	delay, retry := policy.NextRetry(1, err)
	require.True(t, retry)
	require.Equal(t, time.Minute, delay, "the endpoint's wait is longer than the policy's")
	delay, _ = policy.NextRetry(1, errors.New("no answer"))
	require.Equal(t, time.Second, delay, "without a Retry-After, the policy's wait")
	_, retry = policy.NextRetry(1, outbox.Permanent(err))
	require.False(t, retry, "what the policy gives up stays given up")
	delay, _ = webhook.RespectRetryAfter{}.NextRetry(1, errors.New("x"))
	require.Equal(t, outbox.DefaultPollInterval, delay)
}
