package inboxtest

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox"
)

// process calls Process and requires it to succeed with want.
func process(t *testing.T, ib inbox.Inbox, id string, h inbox.Handler, want inbox.Result) {
	t.Helper()
	res, err := ib.Process(context.Background(), id, h)
	require.NoError(t, err, "id %q", id)
	require.Equal(t, want, res, "id %q", id)
}

// newInstanceOf returns the effects of ids and an instance of consumer
// "orders" that reports to a new counter.
func newInstanceOf(t *testing.T, h Harness, ids ...string) (*effects, *counter, inbox.Inbox) {
	fx, obs := newEffects(t, h, ids...), newCounter()
	return fx, obs, h.New(t, "orders", obs)
}

func testProcessOnce(t *testing.T, h Harness) {
	fx, obs, ib := newInstanceOf(t, h, "m-1")
	require.False(t, contains(t, ib, "m-1"))

	process(t, ib, "m-1", fx.handler("m-1"), inbox.Processed)
	require.Equal(t, 1, fx.count(t, "m-1"))
	require.Equal(t, 1, fx.callsOf("m-1"))
	require.True(t, contains(t, ib, "m-1"))
	require.Equal(t, 1, obs.get(inbox.EventProcessed))
	require.Equal(t, "processed", inbox.Processed.String())
}

func testDuplicateSkipsHandler(t *testing.T, h Harness) {
	fx, obs, ib := newInstanceOf(t, h, "m-1")
	process(t, ib, "m-1", fx.handler("m-1"), inbox.Processed)
	for range 3 {
		process(t, ib, "m-1", fx.handler("m-1"), inbox.Duplicate)
	}
	// Another instance sees the record too.
	process(t, h.New(t, "orders", obs), "m-1", fx.handler("m-1"), inbox.Duplicate)

	require.Equal(t, 1, fx.callsOf("m-1"), "a duplicate must not run the handler")
	require.Equal(t, 1, fx.count(t, "m-1"))
	require.Equal(t, 4, obs.get(inbox.EventDuplicate))
	require.Equal(t, "duplicate", inbox.Duplicate.String())
}

func testHandlerErrorRollsBack(t *testing.T, h Harness) {
	fx, obs, ib := newInstanceOf(t, h, "m-1")
	boom := errors.New("boom")
	res, err := ib.Process(context.Background(), "m-1", func(ctx context.Context, tx *sql.Tx) error {
		if err := fx.increment(ctx, tx, "m-1"); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Zero(t, res)
	require.Zero(t, fx.count(t, "m-1"), "the handler's writes must roll back")
	require.False(t, contains(t, ib, "m-1"), "the record must roll back")
	require.Equal(t, 1, obs.get(inbox.EventHandlerFailed))

	process(t, ib, "m-1", fx.handler("m-1"), inbox.Processed)
	require.Equal(t, 1, fx.count(t, "m-1"))
	process(t, ib, "m-1", fx.handler("m-1"), inbox.Duplicate)
}

func testPanicRollsBack(t *testing.T, h Harness) {
	fx := newEffects(t, h, "m-1", "m-2")
	ib := h.New(t, "orders", nil)
	res, err := ib.Process(context.Background(), "m-1", func(ctx context.Context, tx *sql.Tx) error {
		if err := fx.increment(ctx, tx, "m-1"); err != nil {
			return err
		}
		panic("hostile handler")
	})
	require.Zero(t, res)
	var pe *inbox.PanicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "hostile handler", pe.Value)
	require.NotEmpty(t, pe.Stack)
	require.Zero(t, fx.count(t, "m-1"))
	require.False(t, contains(t, ib, "m-1"))
	process(t, ib, "m-1", fx.handler("m-1"), inbox.Processed)

	// A panic with an error is seen by errors.Is.
	sentinel := errors.New("sentinel")
	_, err = ib.Process(context.Background(), "m-2", func(context.Context, *sql.Tx) error { panic(sentinel) })
	require.ErrorIs(t, err, sentinel)
	require.ErrorAs(t, err, &pe)
	process(t, ib, "m-2", fx.handler("m-2"), inbox.Processed)
	require.Equal(t, 1, fx.count(t, "m-2"))
}

func testCanceledContext(t *testing.T, h Harness) {
	fx := newEffects(t, h, "m-1")
	ib := h.New(t, "orders", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := ib.Process(ctx, "m-1", fx.handler("m-1"))
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, res)
	require.Zero(t, fx.callsOf("m-1"))
	require.False(t, contains(t, ib, "m-1"))
}

func testInvalidIDs(t *testing.T, h Harness) {
	fx := newEffects(t, h)
	ib := h.New(t, "orders", nil)
	for name, id := range map[string]string{
		"empty":                  "",
		"invalid UTF-8":          "evt-\xff\xfe",
		"truncated UTF-8":        "evt-\xe2\x82",
		"256 characters":         strings.Repeat("x", inbox.MaxIDLength+1),
		"256 4-byte characters":  strings.Repeat("😀", inbox.MaxIDLength+1),
		"a megabyte":             strings.Repeat("y", 1<<20),
		"invalid after 255 good": strings.Repeat("z", 255) + "\xff",
	} {
		t.Run(name, func(t *testing.T) {
			res, err := ib.Process(context.Background(), id, fx.handler(id))
			require.ErrorIs(t, err, inbox.ErrInvalidID)
			require.ErrorIs(t, inbox.ValidateID(id), inbox.ErrInvalidID)
			require.Zero(t, res)
			require.Zero(t, fx.callsOf(id))
			require.LessOrEqual(t, len(err.Error()), 1024, "the error must not carry the whole ID")
		})
	}
}

// testHostileIDsAreDistinct: IDs that a database could fold together
// (trailing spaces, case, control characters, composed and decomposed
// accents) are each their own message.
func testHostileIDsAreDistinct(t *testing.T, h Harness) {
	ids := hostileIDs()
	fx := newEffects(t, h, ids...)
	ib := h.New(t, "orders", nil)
	for _, id := range ids {
		require.NoError(t, inbox.ValidateID(id), "%q", id)
		process(t, ib, id, fx.handler(id), inbox.Processed)
	}
	for _, id := range ids {
		process(t, ib, id, fx.handler(id), inbox.Duplicate)
		require.True(t, contains(t, ib, id), "%q", id)
		require.Equal(t, 1, fx.count(t, id), "%q", id)
		require.Equal(t, 1, fx.callsOf(id), "%q", id)
	}
	require.False(t, contains(t, ib, "a   "))
	require.False(t, contains(t, ib, "b"))
}

// hostileIDs are valid IDs that a database could fold together: trailing
// spaces, case, control characters, composed and decomposed accents,
// SQL and LIKE metacharacters, the longest.
func hostileIDs() []string {
	return []string{
		"a", "a ", " a", "a  ", "A", "a\t", "a\x00", "a\x00b", "\x01\x02\x1f", "a\n",
		"é", "e\u0301", "'; DROP TABLE inbox; --", "%", "_", "\\", "\u202eevil",
		strings.Repeat("x", inbox.MaxIDLength), strings.Repeat("😀", inbox.MaxIDLength),
		strings.Repeat("😀", inbox.MaxIDLength-1) + " ",
	}
}
