package storecore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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

type fakeExecer struct{}

func (fakeExecer) ExecContext(context.Context, string, ...any) (sql.Result, error) { return nil, nil }

func TestConsumerEnqueue(t *testing.T) {
	var calls []string
	enqueue := func(_ context.Context, _ backend.Execer, opts *backend.EnqueueOptions, msgs ...backend.Message) error {
		calls = append(calls, fmt.Sprintf("enqueue %v %d", opts != nil, len(msgs)))
		return nil
	}
	held := func(_ context.Context, _ backend.Execer, headStart time.Duration, ids []string) error {
		calls = append(calls, fmt.Sprintf("held %v %v", headStart, ids))
		return nil
	}
	msgs := []backend.Message{{ID: "a"}, {ID: "b"}}
	opts := &backend.EnqueueOptions{HeadStart: time.Second}

	require.NoError(t, ConsumerEnqueue(context.Background(), "test store", fakeExecer{}, nil, msgs, enqueue, held, nil, nil))
	require.NoError(t, ConsumerEnqueue(context.Background(), "test store", fakeExecer{}, opts, msgs, enqueue, held, nil, nil))
	require.Equal(t, []string{"enqueue false 2", "enqueue false 2", "held 1s [a b]"}, calls)

	err := ConsumerEnqueue(context.Background(), "test store", fakeExecer{}, &backend.EnqueueOptions{HeadStart: -1}, msgs, enqueue, held, nil, nil)
	require.EqualError(t, err, "test store: enqueue: HeadStart -1ns: must not be negative")
}

type fakeQueue struct{ backend.Queue }

func TestConsumerQueue(t *testing.T) {
	store := &fakeQueue{}
	named := &fakeQueue{}
	consumer := func(name string) (*fakeQueue, error) {
		if name == "bad" {
			return nil, errors.New("bad name")
		}
		return named, nil
	}
	q, err := ConsumerQueue(store, "", consumer)
	require.NoError(t, err)
	require.Same(t, store, q)
	q, err = ConsumerQueue(store, "billing", consumer)
	require.NoError(t, err)
	require.Same(t, named, q)
	q, err = ConsumerQueue(store, "bad", consumer)
	require.EqualError(t, err, "bad name")
	require.Nil(t, q, "a failed lookup is a nil Queue, not a nil *C in one")
}
