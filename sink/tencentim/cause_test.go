package tencentim_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/sink/tencentim"
)

// longID is the longest event ID the store keeps, in bytes: 255
// four-byte characters, longer than a stored last error.
var longID = strings.Repeat("😀", 255)

// TestStoredErrorsStartWithTheCause: the text the outbox stores as a
// record's last error (cut at MaxLastErrorBytes) starts with the class of
// the failure, so that a column cut at a width (outboxctl list, the
// dashboard's head view) shows what went wrong, not an API name or an
// event ID, and holds what explains it even for the longest event ID.
func TestStoredErrorsStartWithTheCause(t *testing.T) {
	f := newFake(t)
	s := newSink(t, f, nil)
	slow := newSink(t, f, func(c *tencentim.Config) { c.GroupRateLimit = 0.001 })
	notify := newSink(t, f, func(c *tencentim.Config) { c.Mode = tencentim.ModeSystemNotification })
	failing := newSink(t, f, func(c *tencentim.Config) {
		c.GroupID = func(outbox.Message) (string, error) { return "", errors.New("no room in the payload") }
	})
	msg := func() outbox.Message { return roomMsg(longID, "room-1", "RoomUserJoined") }
	f.RemoveGroup("room-gone")
	cases := []struct {
		name   string
		sink   *tencentim.Sink
		msg    outbox.Message
		before func()
		ctx    time.Duration // a deadline, if set
		prefix string        // the stored text starts with it
		holds  string        // and holds it
	}{
		{name: "permanent ErrorCode", sink: s, msg: roomMsg(longID, "room-gone", "RoomUserJoined"),
			prefix: "tencentim: ErrorCode 10010: ", holds: "(" + tencentim.APISendGroupMsg + ")"},
		{name: "retryable ErrorCode", sink: notify, before: func() { f.FailNext(1, 10002, "internal error") },
			prefix: "tencentim: ErrorCode 10002: internal error", holds: "(" + tencentim.APISendGroupSystemNotification + ")"},
		{name: "HTTP status", sink: s, before: func() { f.FailNextHTTP(1, http.StatusBadGateway) },
			prefix: "tencentim: HTTP 502: Bad Gateway", holds: tencentim.APISendGroupMsg},
		{name: "unparseable response", sink: s, before: func() { f.MalformNext(1) },
			prefix: "tencentim: HTTP 200: unparseable response", holds: tencentim.APISendGroupMsg},
		{name: "timed out", sink: s, before: func() { f.HangNext(1) }, ctx: 200 * time.Millisecond,
			prefix: "tencentim: timed out", holds: tencentim.APISendGroupMsg},
		{name: "rate limiter", sink: slow, before: func() { _ = slow.Publish(context.Background(), roomMsg("first", "room-1", "T")) },
			ctx: 200 * time.Millisecond, prefix: "tencentim: waiting for the rate limiter: ", holds: tencentim.APISendGroupMsg},
		{name: "no group", sink: s, msg: outbox.Message{ID: longID, Type: "T", Payload: []byte("{}")},
			prefix: "tencentim: no group ID (message ", holds: "tencentim: no group ID"},
		{name: "group mapping fails", sink: failing,
			prefix: "tencentim: group ID mapping failed: no room in the payload", holds: "no room in the payload"},
		{name: "not text", sink: s, msg: outbox.Message{ID: longID, Key: "room-1", Type: "T", Payload: []byte{0xff}},
			prefix: "tencentim: payload is not UTF-8 text", holds: "IM messages must be"},
		{name: "too large", sink: s, msg: outbox.Message{ID: longID, Key: "room-1", Type: "T", Payload: []byte(strings.Repeat("x", 13<<10))},
			prefix: "tencentim: message too large: body of ", holds: "exceeds MaxMessageBytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.msg.ID == "" {
				tc.msg = msg()
			}
			if tc.before != nil {
				tc.before()
			}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.ctx > 0 {
				ctx, cancel = context.WithTimeout(ctx, tc.ctx)
			}
			defer cancel()
			err := tc.sink.Publish(ctx, tc.msg)
			require.Error(t, err)
			text := backend.Truncate(err.Error(), backend.MaxLastErrorBytes)
			require.True(t, strings.HasPrefix(text, tc.prefix), "stored text %q\ndoes not start with %q", text, tc.prefix)
			require.Contains(t, text, tc.holds)
			require.NotContains(t, err.Error(), secret)
		})
	}
}
