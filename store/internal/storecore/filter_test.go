package storecore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

var (
	plainFilters = FilterDialect{Type: "t = ?", Key: "k = ?", Exact: func(v string) any { return v },
		OlderThan: "age >= ?", ErrorContains: "e LIKE ?", Contains: func(v string) any { return "%" + v + "%" }, MinAttempts: "n >= ?"}
	numberedFilters = FilterDialect{Numbered: true, Type: "t = $?", Key: "k = $?", Exact: func(v string) any { return []byte(v) },
		OlderThan: "age >= $?", ErrorContains: "strpos(e, $?) > 0", Contains: func(v string) any { return v }, Status: "st = $?", MinAttempts: "n >= $?"}
)

func TestFilterDead(t *testing.T) {
	require.Empty(t, plainFilters.Dead(backend.DeadFilter{}).Where())

	f := backend.DeadFilter{Type: "T", Key: "K", OlderThan: time.Second, ErrorContains: "boom"}
	fl := plainFilters.Dead(f)
	require.Equal(t, " AND t = ? AND k = ? AND age >= ? AND e LIKE ?", fl.Where())
	require.Equal(t, []any{"T", "K", int64(1_000_000), "%boom%"}, fl.Args)

	fl = numberedFilters.Dead(backend.DeadFilter{Key: "K", ErrorContains: "boom"})
	fl.Add("seq > $?", 7)
	require.Equal(t, " AND k = $1 AND strpos(e, $2) > 0 AND seq > $3", fl.Where())
	require.Equal(t, []any{[]byte("K"), "boom", 7}, fl.Args)
}

func TestFilterList(t *testing.T) {
	_, err := plainFilters.List("test store", backend.ListFilter{})
	require.EqualError(t, err, "test store: list: Limit 0: must be 1 to 10000")

	f := backend.ListFilter{Type: "T", Status: outbox.StatusDead, MinAttempts: 2, Limit: 10}
	fl, err := plainFilters.List("test store", f)
	require.NoError(t, err)
	require.Equal(t, " AND t = ? AND n >= ?", fl.Where(), "a dialect without a status condition leaves the status out")
	require.Equal(t, []any{"T", 2}, fl.Args)

	fl, err = numberedFilters.List("test store", f)
	require.NoError(t, err)
	require.Equal(t, " AND t = $1 AND st = $2 AND n >= $3", fl.Where())
	require.Equal(t, []any{[]byte("T"), "dead", 2}, fl.Args)

	require.True(t, StateRowsOnly(backend.ListFilter{Status: outbox.StatusDead}))
	require.True(t, StateRowsOnly(backend.ListFilter{MinAttempts: 1}))
	require.True(t, StateRowsOnly(backend.ListFilter{ErrorContains: "x"}))
	require.False(t, StateRowsOnly(backend.ListFilter{Status: outbox.StatusPending, Type: "T"}))
}

func TestRecordsAndRequeued(t *testing.T) {
	type row struct{ rec outbox.Record }
	recs := Records([]row{{outbox.Record{Seq: 1}}, {outbox.Record{Seq: 2}}}, func(r row) outbox.Record { return r.rec })
	require.Equal(t, []outbox.Record{{Seq: 1}, {Seq: 2}}, recs)

	get := func(context.Context, string) (outbox.Record, error) {
		t.Fatal("get called for a requeue that changed its record")
		return outbox.Record{}, nil
	}
	require.NoError(t, Requeued(context.Background(), "test store", "m1", 1, get))
	missing := func(context.Context, string) (outbox.Record, error) { return outbox.Record{}, outbox.ErrNotFound }
	err := Requeued(context.Background(), "test store", "m1", 0, missing)
	require.True(t, errors.Is(err, outbox.ErrNotFound))
	require.EqualError(t, err, `test store: requeue "m1": `+outbox.ErrNotFound.Error())
}
