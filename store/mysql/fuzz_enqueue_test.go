package mysql_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// FuzzEnqueueRoundTrip sends whatever a writer might hand Enqueue through
// a real store: the message is either refused with ErrInvalidMessage (or
// ErrDuplicateID) and nothing is written, or it comes back from Get and
// from a claim exactly as it went in.
func FuzzEnqueueRoundTrip(f *testing.F) {
	seeds := []struct{ id, key, typ, name, value string }{
		{"e-1", "room-1", "RoomUserJoined", "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"\x00", "\x01a", "T\t", "h\r\n", "\x00"},
		{"a ", "a ", "T", "", "v"},
		{"id", " \t", "T ", "x", "\xff"},
		{strings.Repeat("😀", 255), strings.Repeat("😀", 255), strings.Repeat("t", 255), "Nats-Msg-Id", "override"},
		{strings.Repeat("i", 256), "", "T", "n", ""},
		{"e\u0301", "\u202e", "\ufeff", "\u2028", "'; DROP TABLE x; --"},
		{"", "k", "T", "n", "v"},
		{"x", "\xc3", "T", "n", "v"},
	}
	for _, s := range seeds {
		f.Add(s.id, s.key, s.typ, s.name, s.value, []byte(s.value))
	}
	d := testutil.NewDatabase(f)
	s, err := mysql.New(d.DB, mysql.Options{Table: testTable})
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id, key, typ, name, value string, payload []byte) {
		m := outbox.Message{ID: id, Key: key, Type: typ, Payload: payload, Headers: map[string]string{name: value},
			CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)}
		err := s.Enqueue(ctx, d.DB, nil, m)
		if err != nil {
			if !errors.Is(err, outbox.ErrInvalidMessage) {
				t.Fatalf("Enqueue(%+q): %v, want nil or ErrInvalidMessage", m, err)
			}
			if _, gerr := s.Get(ctx, id); !errors.Is(gerr, outbox.ErrNotFound) && gerr != nil {
				t.Fatalf("a refused message left something behind: %v", gerr)
			}
			return
		}
		defer func() {
			if _, err := d.DB.ExecContext(ctx, "DELETE FROM "+testTable+" WHERE event_id = ?", id); err != nil {
				t.Fatal(err)
			}
		}()
		got, err := s.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get(%q) after Enqueue: %v", id, err)
		}
		requireSame(t, m, got.Message)
		b, err := s.Claim(ctx, backend.ClaimParams{Owner: "fuzz", Limit: 1, LeaseFor: time.Minute, IDs: []string{id}, Ordered: key != ""})
		if err != nil || len(b.Records) != 1 {
			t.Fatalf("claim of %q: %v, %d records", id, err, len(b.Records))
		}
		requireSame(t, m, b.Records[0].Message)
	})
}

func requireSame(t *testing.T, want, got outbox.Message) {
	t.Helper()
	if got.ID != want.ID || got.Key != want.Key || got.Type != want.Type || string(got.Payload) != string(want.Payload) ||
		!maps.Equal(got.Headers, want.Headers) || !got.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("round trip changed the message:\n sent %+q\n  got %+q", want, got)
	}
}
