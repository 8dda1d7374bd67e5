package webhook_test

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/webhook"
)

// TestWhatGoesOnTheWire: the raw request, read off the connection, for
// a message whose ID, type and key hold CR, LF, NUL and non-ASCII: one
// line per header, nothing injected, every value printable ASCII where
// the sink encodes it, and the message's fields back from the decoding.
func TestWhatGoesOnTheWire(t *testing.T) {
	var (
		mu  sync.Mutex
		raw []byte
	)
	addr := rawServer(t, func(c net.Conn, r *bufio.Reader) {
		var buf bytes.Buffer
		req, err := http.ReadRequest(bufio.NewReader(io.TeeReader(r, &buf)))
		if err == nil {
			_, _ = io.Copy(io.Discard, req.Body)
		}
		mu.Lock()
		raw = buf.Bytes()
		mu.Unlock()
		_, _ = c.Write([]byte("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"))
	})
	s := newSink(t, "http://"+addr+"/hooks", func(c *webhook.Config) { c.Headers = map[string]string{"Authorization": bearer} })
	m := outbox.Message{
		ID: "e-1\r\nX-Injected: 1\x00", Type: "T\typ\u00e9\n", Key: "k\r\n\r\nGET / HTTP/1.1",
		Payload: []byte("line 1\r\n\r\nX-Injected: 2\xff"),
		Headers: map[string]string{"Traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "X-Name": "Zoë"},
	}
	require.NoError(t, publish(s, m))

	mu.Lock()
	defer mu.Unlock()
	head, body, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
	require.True(t, ok)
	require.Equal(t, m.Payload, body, "the payload is the body, byte for byte")
	lines := strings.Split(string(head), "\r\n")
	require.Equal(t, "POST /hooks HTTP/1.1", lines[0])
	got := http.Header{}
	for _, line := range lines[1:] {
		require.NotContains(t, line, "\n")
		require.False(t, strings.HasPrefix(strings.ToLower(line), "x-injected"), "an injected header: %q", line)
		name, value, ok := strings.Cut(line, ": ")
		require.True(t, ok, "%q", line)
		got.Add(name, value)
	}
	for _, name := range []string{webhook.HeaderID, webhook.HeaderEventType, webhook.HeaderEventKey} {
		v := got.Get(name)
		for i := 0; i < len(v); i++ {
			require.True(t, v[i] > ' ' && v[i] < 0x7f, "%s: %q", name, v)
		}
	}
	for _, f := range []struct{ header, want string }{{webhook.HeaderID, m.ID}, {webhook.HeaderEventType, m.Type}, {webhook.HeaderEventKey, m.Key}} {
		v, err := webhook.DecodeHeaderValue(got.Get(f.header))
		require.NoError(t, err)
		require.Equal(t, f.want, v, f.header)
	}
	require.Equal(t, "Zoë", got.Get("X-Name"))
	require.Equal(t, bearer, got.Get("Authorization"))
	require.NoError(t, webhook.Verify([]string{secret}, got, body, 0))
}

// TestMessageHeaders: a header HTTP cannot carry unchanged fails its
// message permanently before any connection; reserved ones are left out.
func TestMessageHeaders(t *testing.T) {
	var (
		mu  sync.Mutex
		got http.Header
	)
	srv, hits := server(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	var logs outboxtest.LogBuffer
	s := newSink(t, srv.URL, func(c *webhook.Config) {
		c.Headers = map[string]string{"X-Api-Key": bearer}
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	for name, h := range map[string]map[string]string{
		"CR LF in a value":          {"X-Note": "a\r\nX-Injected: 1"},
		"LF alone":                  {"X-Note": "a\nb"},
		"NUL":                       {"X-Note": "a\x00b"},
		"DEL":                       {"X-Note": "a\x7fb"},
		"surrounding spaces":        {"X-Note": " a"},
		"a name with a space":       {"X Note": "a"},
		"a name with a colon":       {"X-Note:": "a"},
		"a name with CR LF":         {"X\r\nInjected": "a"},
		"an empty name":             {"": "a"},
		"names that differ in case": {"X-Twin": "1", "x-twin": "2", "X-Other": "3"},
		"too much":                  {"X-Big": strings.Repeat("b", webhook.MaxHeaderBytes)},
	} {
		m := event("e-" + name)
		m.Headers = h
		err := publish(s, m)
		require.Equal(t, permanent, classOf(err), "%s: %v", name, err)
		require.ErrorIs(t, err, webhook.ErrUnsendable, name)
		require.Regexp(t, `^webhook: message cannot be sent as stored: `, err.Error())
		require.NotContains(t, err.Error(), "Injected: 1", "a value is never quoted")
	}
	require.Zero(t, hits.Load(), "none of them was sent")

	m := event("e-reserved")
	m.Headers = map[string]string{"Webhook-Signature": "v1,forged", "Host": "evil.example", "Content-Length": "0",
		"Transfer-Encoding": "chunked", "Outbox-Event-Key": "other", "X-Api-Key": "mine", "Proxy-Authorization": "x", "X-Kept": "yes"}
	require.NoError(t, publish(s, m))
	mu.Lock()
	require.Equal(t, "yes", got.Get("X-Kept"))
	require.Equal(t, bearer, got.Get("X-Api-Key"), "Config.Headers win")
	require.Equal(t, "room-1", got.Get(webhook.HeaderEventKey))
	require.Empty(t, got.Get("Proxy-Authorization"))
	require.NoError(t, webhook.Verify([]string{secret}, got, m.Payload, 0), "the sink's signature, not the stored one")
	mu.Unlock()
	require.Contains(t, logs.String(), "reserved headers not forwarded")
	require.NotContains(t, logs.String(), "forged", "values are not logged")
}
