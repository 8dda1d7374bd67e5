package natsjs_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
)

var errUnroutable = errors.New("unroutable")

// noServer is a JetStream for tests of what the sink does before it
// sends anything: any call to the server panics.
type noServer struct{ jetstream.JetStream }

func offlineSink(t testing.TB, cfg natsjs.Config) *natsjs.Sink {
	t.Helper()
	cfg.JetStream = noServer{}
	s, err := natsjs.New(cfg)
	require.NoError(t, err)
	return s
}

func TestMsgIsWhatPublishSends(t *testing.T) {
	sink := offlineSink(t, natsjs.Config{Prefix: "room", ExpectStream: "ROOM_EVENTS"})
	msg := message("e-1", "room-1")
	msg.Headers["Nats-Rollup"] = "all"
	msg.Headers["Baggage"] = "user=日本"
	m, err := sink.Msg(msg)
	require.NoError(t, err)
	require.Equal(t, "room.RoomGiftSent.room-1", m.Subject)
	require.Equal(t, msg.Payload, m.Data)
	require.Equal(t, nats.Header{
		"traceparent":                  {msg.Headers["traceparent"]},
		"Baggage":                      {"user=日本"},
		natsjs.HeaderEventType:         {"RoomGiftSent"},
		natsjs.HeaderEventKey:          {"room-1"},
		jetstream.MsgIDHeader:          {"e-1"},
		jetstream.ExpectedStreamHeader: {"ROOM_EVENTS"},
	}, m.Header)

	msg.Key = ""
	m, err = sink.Msg(msg)
	require.NoError(t, err)
	require.Equal(t, "room.RoomGiftSent.%", m.Subject)
	require.NotContains(t, m.Header, natsjs.HeaderEventKey, "no key, no key header")
}

// TestMsgBounds: the limits hold to the byte, and every refusal is
// permanent, wraps ErrUnsendable, and names the event.
func TestMsgBounds(t *testing.T) {
	// headerBlock is the size of the headers message("e-1", "room-1")
	// gets besides extra; MaxHeaderBytes-fill of padding reaches the bound.
	base := len("NATS/1.0\r\n\r\n") + len("traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n") +
		len("Outbox-Event-Type: RoomGiftSent\r\n") + len("Outbox-Event-Key: room-1\r\n") + len("Nats-Msg-Id: e-1\r\n")
	pad := func(n int) map[string]string {
		return map[string]string{"X-Pad": strings.Repeat("p", n-base-len("X-Pad: \r\n"))}
	}
	cases := []struct {
		name         string
		subject      string
		headers      map[string]string
		expectStream string
		mutate       func(*outbox.Message)
		want         string // "" means accepted
	}{
		{name: "subject at MaxSubjectBytes", subject: "a." + strings.Repeat("b", natsjs.MaxSubjectBytes-2)},
		{name: "subject one byte over", subject: "a." + strings.Repeat("b", natsjs.MaxSubjectBytes-1), want: "is 1025 bytes, over MaxSubjectBytes (1024)"},
		{name: "header block at MaxHeaderBytes", headers: pad(natsjs.MaxHeaderBytes)},
		{name: "header block one byte over", headers: pad(natsjs.MaxHeaderBytes + 1), want: "header block is 32769 bytes, over MaxHeaderBytes (32768)"},
		{name: "empty token", subject: "a..b", want: "empty token"},
		{name: "wildcard", subject: "a.*", want: "wildcard"},
		{name: "DEL in the subject", subject: "a.b\x7f", want: "control character 0x7F"},
		{name: "invalid UTF-8 in the subject", subject: "a.\xff", want: "not valid UTF-8"},
		{name: "name containing Nats-Msg-Id", headers: map[string]string{"X-Nats-Msg-Id": "1"}, want: `header "X-Nats-Msg-Id" contains "Nats-Msg-Id"`},
		{name: "value containing Nats-Msg-Id", headers: map[string]string{"X-Was": "Nats-Msg-Id"}, want: `header "X-Was" contains "Nats-Msg-Id"`},
		{name: "Type containing Nats-Msg-Id", mutate: func(m *outbox.Message) { m.Type = "Nats-Msg-Id" }, want: `header "Outbox-Event-Type" contains`},
		{name: "ID containing Nats-Msg-Id is its own line", mutate: func(m *outbox.Message) { m.ID = "Nats-Msg-Id-1" }},
		{name: "value containing Nats-Expected-Stream, no ExpectStream", headers: map[string]string{"X-Was": "Nats-Expected-Stream"}},
		{name: "value containing Nats-Expected-Stream, with ExpectStream", expectStream: "S", headers: map[string]string{"X-Was": "Nats-Expected-Stream"}, want: `contains "Nats-Expected-Stream"`},
		{name: "tab inside a value", headers: map[string]string{"X-Tab": "a\tb"}},
		{name: "empty value", headers: map[string]string{"X-Empty": ""}},
		{name: "name of 64 bytes and more is cut in the error", headers: map[string]string{strings.Repeat("n", 100) + ":": "a"}, want: strconv.Quote(strings.Repeat("n", 64)) + "…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := natsjs.Config{ExpectStream: tc.expectStream}
			if tc.subject != "" {
				cfg.Subject = func(outbox.Message) (string, error) { return tc.subject, nil }
			}
			msg := message("e-1", "room-1")
			for k, v := range tc.headers {
				msg.Headers[k] = v
			}
			if tc.mutate != nil {
				tc.mutate(&msg)
			}
			m, err := offlineSink(t, cfg).Msg(msg)
			if tc.want == "" {
				require.NoError(t, err)
				require.NotNil(t, m)
				return
			}
			require.Error(t, err)
			require.True(t, outbox.IsPermanent(err), "%v", err)
			require.ErrorIs(t, err, natsjs.ErrUnsendable)
			require.ErrorContains(t, err, strconv.Quote(msg.ID))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestReservedHeader(t *testing.T) {
	for name, want := range map[string]bool{
		"Nats-Rollup": true, "nats-msg-id": true, "NATS-EXPECTED-STREAM": true, "Nats-TTL": true, "Nats-": true,
		"Outbox-Event-Type": true, "outbox-event-key": true, "Outbox-Event-Anything": true,
		"Nats": false, "NatsRollup": false, "X-Nats-Rollup": false, "traceparent": false, "Outbox-Event": false, "": false,
	} {
		require.Equal(t, want, natsjs.ReservedHeader(name), name)
	}
}

func TestConfigIsValidatedOffline(t *testing.T) {
	cases := []struct {
		name string
		cfg  natsjs.Config
		want string
	}{
		{name: "prefix over MaxPrefixBytes", cfg: natsjs.Config{Prefix: strings.Repeat("p", natsjs.MaxPrefixBytes+1)}, want: "Prefix"},
		{name: "control character in the prefix", cfg: natsjs.Config{Prefix: "a\x01b"}, want: "Prefix"},
		{name: "dot in the expected stream", cfg: natsjs.Config{ExpectStream: "A.B"}, want: "ExpectStream"},
		{name: "line break in the expected stream", cfg: natsjs.Config{ExpectStream: "A\nB"}, want: "ExpectStream"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.JetStream = noServer{}
			_, err := natsjs.New(tc.cfg)
			require.ErrorContains(t, err, "natsjs: "+tc.want)
		})
	}
	_, err := natsjs.New(natsjs.Config{JetStream: noServer{}, Prefix: strings.Repeat("p", natsjs.MaxPrefixBytes)})
	require.NoError(t, err, "a prefix of MaxPrefixBytes is fine")
}

// A mapping error is permanent and wrapped, not ErrUnsendable: the
// mapping, not NATS, refused the message.
func TestMappingErrorIsWrapped(t *testing.T) {
	sink := offlineSink(t, natsjs.Config{Subject: func(outbox.Message) (string, error) { return "", errUnroutable }})
	_, err := sink.Msg(message("e-1", "room-1"))
	require.True(t, outbox.IsPermanent(err))
	require.ErrorIs(t, err, errUnroutable)
	require.False(t, errors.Is(err, natsjs.ErrUnsendable))
}
