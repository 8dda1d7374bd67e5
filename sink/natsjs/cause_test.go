package natsjs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
	"github.com/outboxrelay/outboxrelay/sink/natsjs/internal/natstest"
)

// longID is the longest event ID the store keeps, in bytes: 255
// four-byte characters. With the subject it makes the text of an error
// that names both longer than a stored last error.
var longID = strings.Repeat("😀", 255)

// causeCase is a failure whose stored text must start with its class.
type causeCase struct {
	name   string
	sink   natsjs.Config // JetStream set by the test
	msg    outbox.Message
	ctx    func() (context.Context, context.CancelFunc)
	prefix string // the stored text starts with it
	cause  string // and holds the underlying error's text
}

// stored is the last error the outbox keeps for err.
func stored(err error) string {
	return backend.Truncate(err.Error(), backend.MaxLastErrorBytes)
}

// checkCause publishes tc.msg (a message with the longest ID and a long
// subject, by default) and checks the stored text of the error.
func checkCause(t *testing.T, js jetstream.JetStream, tc causeCase) {
	t.Helper()
	if tc.msg.ID == "" {
		tc.msg = message(longID, strings.Repeat("room", 50))
	}
	tc.sink.JetStream = js
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if tc.ctx != nil {
		ctx, cancel = tc.ctx()
	}
	defer cancel()
	err := newSink(t, tc.sink).Publish(ctx, tc.msg)
	require.Error(t, err)
	text := stored(err)
	require.True(t, strings.HasPrefix(text, tc.prefix), "stored text %q\ndoes not start with %q", text, tc.prefix)
	require.Contains(t, text, tc.cause, "the underlying error, within the stored text")
	require.Contains(t, err.Error(), longID[:40], "the whole text still names the event")
}

// TestStoredErrorsStartWithTheCause: the text the outbox stores as a
// record's last error (cut at MaxLastErrorBytes) starts with the class of
// the failure, so that a column cut at a width (outboxctl list, the
// dashboard's head view) shows what went wrong, and holds the underlying
// error even when the event ID and subject are as long as they can be.
func TestStoredErrorsStartWithTheCause(t *testing.T) {
	nc := natstest.NATS(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, prefix := stream(t, js, func(c *jetstream.StreamConfig) { c.MaxMsgSize = 4096 })
	other, _ := stream(t, js, nil)
	_, full := stream(t, js, func(c *jetstream.StreamConfig) { c.MaxMsgs, c.Discard = 1, jetstream.DiscardNew })
	require.NoError(t, newSink(t, natsjs.Config{JetStream: js, Prefix: full}).Publish(context.Background(), message("first", "room-1")))
	past := func() (context.Context, context.CancelFunc) {
		return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	}
	big := message(longID, "room-1")
	big.Payload = make([]byte, 8192)

	for _, tc := range []causeCase{
		{name: "no stream", sink: natsjs.Config{Prefix: "nostream" + prefix},
			prefix: "natsjs: no stream captures the subject: ", cause: "no response from stream"},
		{name: "not the expected stream", sink: natsjs.Config{Prefix: prefix, ExpectStream: other.CachedInfo().Config.Name},
			prefix: "natsjs: rejected by the stream (not the expected stream): ", cause: "err_code=10060"},
		{name: "too large for the stream", sink: natsjs.Config{Prefix: prefix}, msg: big,
			prefix: "natsjs: rejected by the stream (the stream's maximum message size): ", cause: "err_code=10054"},
		{name: "stream full", sink: natsjs.Config{Prefix: full},
			prefix: "natsjs: JetStream error: ", cause: "maximum messages exceeded"},
		{name: "out of time", sink: natsjs.Config{Prefix: prefix}, ctx: past,
			prefix: "natsjs: no acknowledgement in time: ", cause: "context deadline exceeded"},
		{name: "cancelled", sink: natsjs.Config{Prefix: prefix}, ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, prefix: "natsjs: cancelled before the acknowledgement: ", cause: "context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkCause(t, js, tc) })
	}

	t.Run("too large for the server", func(t *testing.T) {
		huge := message(longID, "room-1")
		huge.Payload = make([]byte, 2<<20)
		checkCause(t, js, causeCase{sink: natsjs.Config{Prefix: prefix}, msg: huge,
			prefix: "natsjs: larger than the server's maximum payload: ", cause: "maximum payload exceeded"})
	})
	t.Run("closed connection", func(t *testing.T) {
		nc2 := natstest.NATS(t)
		js2, err := jetstream.New(nc2)
		require.NoError(t, err)
		nc2.Close()
		checkCause(t, js2, causeCase{sink: natsjs.Config{Prefix: prefix},
			prefix: "natsjs: publish failed: ", cause: nats.ErrConnectionClosed.Error()})
	})
}

// TestStoredErrorsStartWithTheCauseOffline: the failures found before
// anything is sent start with their class too.
func TestStoredErrorsStartWithTheCauseOffline(t *testing.T) {
	bad := message(longID, "room-1")
	bad.Headers["X-Trace"] = "a\r\nb"
	for _, tc := range []causeCase{
		{name: "invalid subject from the mapping", sink: natsjs.Config{Subject: func(outbox.Message) (string, error) { return "a..b", nil }},
			prefix: "natsjs: message cannot be sent as stored: subject ", cause: "empty token"},
		{name: "subject over MaxSubjectBytes", sink: natsjs.Config{Subject: func(outbox.Message) (string, error) {
			return "a." + strings.Repeat("b", natsjs.MaxSubjectBytes), nil
		}}, prefix: "natsjs: message cannot be sent as stored: subject ", cause: "over MaxSubjectBytes"},
		{name: "header value", msg: bad,
			prefix: "natsjs: message cannot be sent as stored: header \"X-Trace\": value ", cause: "line break"},
		{name: "mapping fails", sink: natsjs.Config{Subject: func(outbox.Message) (string, error) { return "", errors.New("unroutable") }},
			prefix: "natsjs: subject mapping failed: unroutable", cause: "unroutable"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkCause(t, noServer{}, tc) })
	}
}

// TestStoredErrorsStartWithTheCauseServerSide: the failures that need a
// server of the test's own.
func TestStoredErrorsStartWithTheCauseServerSide(t *testing.T) {
	srv := natstest.StartNATSServer(t, `
jetstream {}
authorization {
  users = [
    {user: admin, password: "pw"}
    {user: narrow, password: "pw", permissions: {publish: {allow: ["$JS.API.>"]}, subscribe: {allow: ["_INBOX.>"]}}}
  ]
}`)
	connect := func(user string) jetstream.JetStream {
		nc, err := nats.Connect("nats://"+user+":pw@"+srv.Addr, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		return js
	}
	_, err := connect("admin").CreateStream(context.Background(), natsjs.StreamConfig("DENIED", "denied", time.Minute))
	require.NoError(t, err)
	t.Run("no permission", func(t *testing.T) {
		checkCause(t, connect("narrow"), causeCase{sink: natsjs.Config{Prefix: "denied"},
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 2*time.Second)
			},
			prefix: "natsjs: no permission to publish to the subject: ", cause: "Permissions Violation"})
	})
	t.Run("no JetStream", func(t *testing.T) {
		plain := natstest.StartNATSServer(t, "")
		nc, err := nats.Connect("nats://" + plain.Addr)
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		checkCause(t, js, causeCase{prefix: "natsjs: JetStream is not enabled or not answering: ", cause: "no response from stream"})
	})
}
