package natsjs_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
)

// ownConn is a connection of the test's own, so that a message that
// closes it cannot take other tests down with it.
func ownConn(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc := testutil.NATS(t)
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
