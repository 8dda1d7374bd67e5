package natsjs_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
	"github.com/outboxrelay/outboxrelay/sink/natsjs/internal/natstest"
)

// ownConn is a connection of the test's own, so that a message that
// closes it cannot take other tests down with it.
func ownConn(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc := natstest.NATS(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// requireUsable checks that nc survived: still connected, and a normal
// message published through it reaches the stream.
func requireUsable(t *testing.T, nc *nats.Conn, js jetstream.JetStream, prefix string) {
	t.Helper()
	require.True(t, nc.IsConnected(), "connection status %v, last error %v", nc.Status(), nc.LastError())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok := newSink(t, natsjs.Config{JetStream: js, Prefix: prefix})
	require.NoError(t, ok.Publish(ctx, message("after-"+strconv.FormatInt(time.Now().UnixNano(), 36), "room-1")),
		"a normal message after the bad one")
	require.Equal(t, nats.CONNECTED, nc.Status())
}

func publish(t *testing.T, sink *natsjs.Sink, msg outbox.Message) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return sink.Publish(ctx, msg)
}

// TestUnmappableSubjectFailsAlone: a subject the server cannot take must
// fail its own message, permanently, before it reaches the server, which
// would close the connection (maximum control line exceeded) and with it
// every other delivery.
func TestUnmappableSubjectFailsAlone(t *testing.T) {
	emoji := strings.Repeat("😀", outbox.MaxTypeLength)
	cases := []struct {
		name    string
		subject func(prefix string) func(outbox.Message) (string, error)
		msg     outbox.Message
		want    []string
	}{
		{name: "255 emoji as Type and Key", msg: outbox.Message{ID: "emoji-1", Type: emoji, Key: emoji},
			want: []string{"MaxSubjectBytes (1024)"}},
		{name: "custom mapping returns 6 KB", subject: func(prefix string) func(outbox.Message) (string, error) {
			return func(outbox.Message) (string, error) { return prefix + "." + strings.Repeat("a", 6000), nil }
		}, want: []string{"MaxSubjectBytes (1024)"}},
		{name: "custom mapping returns a control character", subject: func(prefix string) func(outbox.Message) (string, error) {
			return func(outbox.Message) (string, error) { return prefix + ".a\x01b", nil }
		}, want: []string{"not a valid publish subject"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc, js := ownConn(t)
			_, prefix := stream(t, js, nil)
			cfg := natsjs.Config{JetStream: js, Prefix: prefix}
			if tc.msg.ID == "" {
				tc.msg = message("e-1", "room-1")
			}
			subject := prefix + "." + natsjs.Token(tc.msg.Type) + "." + natsjs.Token(tc.msg.Key)
			if tc.subject != nil {
				cfg.Subject = tc.subject(prefix)
				subject, _ = cfg.Subject(tc.msg)
			}
			if len(subject) > 1024 {
				tc.want = append(tc.want, fmt.Sprintf(" is %d bytes", len(subject)))
			}
			err := publish(t, newSink(t, cfg), tc.msg)
			require.Error(t, err)
			require.True(t, outbox.IsPermanent(err), "%v", err)
			require.ErrorContains(t, err, strconv.Quote(tc.msg.ID), "names the event")
			for _, want := range tc.want {
				require.ErrorContains(t, err, want)
			}
			requireUsable(t, nc, js, prefix)
		})
	}
}

// TestSubjectAtTheLimitIsPublished: the bound is not off by one.
func TestSubjectAtTheLimitIsPublished(t *testing.T) {
	nc, js := ownConn(t)
	str, prefix := stream(t, js, nil)
	subject := prefix + "." + strings.Repeat("a", 1024-len(prefix)-1)
	sink := newSink(t, natsjs.Config{JetStream: js, Subject: func(outbox.Message) (string, error) { return subject, nil }})
	require.NoError(t, publish(t, sink, message("e-1", "room-1")))
	raw, err := str.GetMsg(context.Background(), 1)
	require.NoError(t, err)
	require.Len(t, raw.Subject, 1024)
	requireUsable(t, nc, js, prefix)
}

// TestReservedHeadersAreNotForwarded: stored headers that JetStream reads
// as instructions (roll the subject up, expect a sequence, another
// message ID) are not forwarded: the message arrives, once, under its own
// event ID, and nothing else in the stream is touched.
func TestReservedHeadersAreNotForwarded(t *testing.T) {
	nc, js := ownConn(t)
	str, prefix := stream(t, js, func(c *jetstream.StreamConfig) { c.AllowRollup = true })
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sink := newSink(t, natsjs.Config{JetStream: js, Prefix: prefix, ExpectStream: str.CachedInfo().Config.Name, Logger: logger})
	for _, id := range []string{"e-1", "e-2"} {
		require.NoError(t, publish(t, sink, message(id, "room-1")))
	}
	hostile := message("e-3", "room-1")
	reserved := map[string]string{
		"Nats-Rollup":                         "all",
		"Nats-Expected-Stream":                "NOT_THIS_ONE",
		"Nats-Expected-Last-Sequence":         "999",
		"Nats-Expected-Last-Msg-Id":           "nope",
		"Nats-Expected-Last-Subject-Sequence": "999",
		"Nats-Msg-Id":                         "e-1", // an override naming another event
		"nats-msg-id":                         "e-2",
		"Nats-TTL":                            "1s",
		"NATS-ROLLUP":                         "sub",
		"Outbox-Event-Type":                   "Spoofed",
		"outbox-event-key":                    "spoofed",
	}
	for k, v := range reserved {
		hostile.Headers[k] = v
	}
	for range 2 {
		require.NoError(t, publish(t, sink, hostile), "the message is delivered, its reserved headers are not")
	}

	info, err := str.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(3), info.State.Msgs, "nothing rolled up, the repeat discarded as a duplicate")
	raw, err := str.GetMsg(context.Background(), 3)
	require.NoError(t, err)
	require.Equal(t, "e-3", raw.Header.Get(jetstream.MsgIDHeader))
	require.Equal(t, hostile.Type, raw.Header.Get(natsjs.HeaderEventType))
	require.Equal(t, hostile.Key, raw.Header.Get(natsjs.HeaderEventKey))
	require.Equal(t, hostile.Headers["traceparent"], raw.Header.Get("traceparent"), "ordinary headers travel on")
	require.Equal(t, str.CachedInfo().Config.Name, raw.Header.Get(jetstream.ExpectedStreamHeader))
	own := []string{jetstream.MsgIDHeader, jetstream.ExpectedStreamHeader, natsjs.HeaderEventType, natsjs.HeaderEventKey}
	for k, vs := range raw.Header {
		if slices.Contains(own, k) {
			require.Len(t, vs, 1, k)
			continue
		}
		_, isReserved := reserved[k]
		require.False(t, isReserved, "%s: %q was forwarded", k, vs)
	}
	require.Contains(t, logs.String(), "Nats-Rollup", "the dropped names are logged at debug")
	requireUsable(t, nc, js, prefix)
}

// TestHeaderTextCannotHideTheMessageID: JetStream servers (2.9 at least)
// read a header by the first occurrence of its name anywhere in the
// header block, so a stored header whose name or value contains
// "Nats-Msg-Id" can hide the real one and with it the deduplication.
func TestHeaderTextCannotHideTheMessageID(t *testing.T) {
	nc, js := ownConn(t)
	str, prefix := stream(t, js, nil)
	sink := newSink(t, natsjs.Config{JetStream: js, Prefix: prefix})
	msg := message("e-1", "room-1")
	for _, k := range []string{"A", "B", "C", "D", "E"} {
		msg.Headers[k] = "copied from Nats-Msg-Id"
	}
	var errs []error
	for range 5 {
		if err := publish(t, sink, msg); err != nil {
			errs = append(errs, err)
		}
	}
	info, err := str.Info(context.Background())
	require.NoError(t, err)
	require.LessOrEqual(t, info.State.Msgs, uint64(1), "stored more than once: the deduplication was lost")
	require.Len(t, errs, 5, "refused every time, not delivered")
	require.True(t, outbox.IsPermanent(errs[0]), "%v", errs[0])
	require.ErrorContains(t, errs[0], `"Nats-Msg-Id"`)
	requireUsable(t, nc, js, prefix)
}

// TestUnsendableHeadersArePermanent: a header NATS cannot carry as it is
// stored (a line break would end it early or be replaced, a name with a
// colon or a space does not parse, surrounding spaces are stripped, the
// block is too large) fails its message permanently, naming the header,
// instead of being retried forever or arriving altered.
func TestUnsendableHeadersArePermanent(t *testing.T) {
	cases := []struct {
		name    string
		headers map[string]string
		mutate  func(*outbox.Message)
		want    string
	}{
		{name: "CR LF in a value", headers: map[string]string{"X-Note": "a\r\nNats-Rollup: all"}, want: `"X-Note"`},
		{name: "LF in a value", headers: map[string]string{"X-Note": "a\nb"}, want: `"X-Note"`},
		{name: "NUL in a value", headers: map[string]string{"X-Note": "a\x00b"}, want: `"X-Note"`},
		{name: "leading space in a value", headers: map[string]string{"X-Note": " a"}, want: `"X-Note"`},
		{name: "trailing tab in a value", headers: map[string]string{"X-Note": "a\t"}, want: `"X-Note"`},
		{name: "invalid UTF-8 in a value", headers: map[string]string{"X-Note": "a\xffb"}, want: `"X-Note"`},
		{name: "colon in a name", headers: map[string]string{"X:Y": "a"}, want: `"X:Y"`},
		{name: "space in a name", headers: map[string]string{"X Y": "a"}, want: `"X Y"`},
		{name: "CR LF in a name", headers: map[string]string{"X\r\nY": "a"}, want: `"X\r\nY"`},
		{name: "empty name", headers: map[string]string{"": "a"}, want: `""`},
		{name: "non-ASCII name", headers: map[string]string{"Schlüssel": "a"}, want: `"Schlüssel"`},
		{name: "header block over JetStream's 64 KiB", headers: map[string]string{"X-Big": strings.Repeat("v", 70<<10)}, want: "MaxHeaderBytes"},
		{name: "line break in the Type", mutate: func(m *outbox.Message) { m.Type = "Gift\nSent" }, want: natsjs.HeaderEventType},
		{name: "CR at the end of the event ID", mutate: func(m *outbox.Message) { m.ID = "e-1\r" }, want: jetstream.MsgIDHeader},
	}
	nc, js := ownConn(t)
	_, prefix := stream(t, js, nil)
	sink := newSink(t, natsjs.Config{JetStream: js, Prefix: prefix})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := message("e-1", "room-1")
			for k, v := range tc.headers {
				msg.Headers[k] = v
			}
			if tc.mutate != nil {
				tc.mutate(&msg)
			}
			err := publish(t, sink, msg)
			require.Error(t, err)
			require.True(t, outbox.IsPermanent(err), "%v", err)
			require.ErrorContains(t, err, strconv.Quote(msg.ID), "names the event")
			require.ErrorContains(t, err, tc.want, "names the header")
			requireUsable(t, nc, js, prefix)
		})
	}
}

// TestHostileTokensAreEscaped: dots, wildcards, spaces, percent signs,
// tabs and emoji in the Type and Key reach the stream on one escaped
// subject per (type, key), and arrive unchanged in the headers.
func TestHostileTokensAreEscaped(t *testing.T) {
	nc, js := ownConn(t)
	str, prefix := stream(t, js, nil)
	sink := newSink(t, natsjs.Config{JetStream: js, Prefix: prefix})
	msgs := []outbox.Message{
		{ID: "h-1", Type: "a\tb", Key: "x.y *> %", Payload: []byte("1")},
		{ID: "h-2", Type: "a.b", Key: "*", Payload: []byte("2")},
		{ID: "h-3", Type: "😀", Key: ">", Payload: []byte("3")},
		{ID: "h-4", Type: "%", Payload: []byte("4")},
	}
	for i, m := range msgs {
		require.NoError(t, publish(t, sink, m))
		raw, err := str.GetMsg(context.Background(), uint64(i+1))
		require.NoError(t, err)
		require.Equal(t, prefix+"."+natsjs.Token(m.Type)+"."+natsjs.Token(m.Key), raw.Subject)
		require.Equal(t, m.Type, raw.Header.Get(natsjs.HeaderEventType))
		require.Equal(t, m.Key, raw.Header.Get(natsjs.HeaderEventKey))
		require.Equal(t, m.Payload, raw.Data)
	}
	requireUsable(t, nc, js, prefix)
}

// TestOversizedPayloadFailsAlone: a payload over the server's maximum is
// refused by the client before it is sent, so the connection survives.
func TestOversizedPayloadFailsAlone(t *testing.T) {
	nc, js := ownConn(t)
	_, prefix := stream(t, js, nil)
	sink := newSink(t, natsjs.Config{JetStream: js, Prefix: prefix})
	msg := message("big-1", "room-1")
	msg.Payload = make([]byte, nc.MaxPayload()+1)
	err := publish(t, sink, msg)
	require.Error(t, err)
	require.True(t, outbox.IsPermanent(err), "%v", err)
	require.ErrorContains(t, err, "maximum payload")
	requireUsable(t, nc, js, prefix)
}
