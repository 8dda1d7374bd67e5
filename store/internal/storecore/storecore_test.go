package storecore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

var testDialect = Dialect{What: "test store", MaxTableLength: 10, MaxHeaderBytes: 100}

func TestCommonDefaults(t *testing.T) {
	require.Equal(t, Common{
		Table: DefaultTable, MaxPayloadBytes: DefaultMaxPayloadBytes, MaxHeaderBytes: DefaultMaxHeaderBytes, MaxClaimBytes: DefaultMaxClaimBytes,
	}, Common{}.WithDefaults())
	set := Common{Table: "t", MaxPayloadBytes: 1, MaxHeaderBytes: 2, MaxClaimBytes: 3}
	require.Equal(t, set, set.WithDefaults())
	require.Empty(t, Common{}.WithDefaults().Validate(Dialect{What: "test store", MaxTableLength: 48, MaxHeaderBytes: DefaultMaxHeaderBytes}))
}

func TestCommonValidate(t *testing.T) {
	ok := Common{Table: "outbox_1", MaxPayloadBytes: 1, MaxHeaderBytes: 100, MaxClaimBytes: 1}
	for _, tc := range []struct {
		name    string
		change  func(*Common)
		dialect Dialect
		want    string
	}{
		{"table too long", func(c *Common) { c.Table = "abcdefghijk" }, testDialect,
			`test store: Table "abcdefghijk": must be letters, digits and underscores, not starting with a digit, at most 10 characters`},
		{"table not an identifier", func(c *Common) { c.Table = "1x" }, testDialect, `Table "1x"`},
		{"upper case where lower case is wanted", func(c *Common) { c.Table = "Outbox" }, Dialect{What: "test store", MaxTableLength: 10, LowerCaseTable: true, MaxHeaderBytes: 100},
			`test store: Table "Outbox": must be lower-case letters, digits and underscores`},
		{"payload over the ceiling", func(c *Common) { c.MaxPayloadBytes = 64<<20 + 1 }, testDialect, "test store: MaxPayloadBytes 67108865: must be 1 to 67108864 (0 for the default)"},
		{"negative payload", func(c *Common) { c.MaxPayloadBytes = -1 }, testDialect, "MaxPayloadBytes -1"},
		{"headers over the dialect's ceiling", func(c *Common) { c.MaxHeaderBytes = 101 }, testDialect, "test store: MaxHeaderBytes 101: must be 1 to 100 (0 for the default)"},
		{"negative claim", func(c *Common) { c.MaxClaimBytes = -1 }, testDialect, "test store: MaxClaimBytes -1: must not be negative (0 for the default)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Empty(t, ok.Validate(tc.dialect))
			c := ok
			tc.change(&c)
			errs := c.Validate(tc.dialect)
			require.Len(t, errs, 1)
			require.ErrorContains(t, errs[0], tc.want)
		})
	}
}

func TestCheckConsumerName(t *testing.T) {
	for _, good := range []string{"a", "billing", "svc.v2-b_1", "_x", strings.Repeat("a", MaxConsumerNameLength)} {
		require.NoError(t, CheckConsumerName("test store", good), good)
	}
	for _, bad := range []string{"", ".a", "-a", "a b", "a/b", strings.Repeat("a", MaxConsumerNameLength+1)} {
		require.ErrorContains(t, CheckConsumerName("test store", bad), fmt.Sprintf("test store: consumer name %q: must be 1 to 64", bad))
	}
}

func TestHeadStart(t *testing.T) {
	d, err := HeadStart("test store", nil)
	require.NoError(t, err)
	require.Zero(t, d)
	d, err = HeadStart("test store", &backend.EnqueueOptions{HeadStart: time.Second})
	require.NoError(t, err)
	require.Equal(t, time.Second, d)
	_, err = HeadStart("test store", &backend.EnqueueOptions{HeadStart: -time.Second})
	require.EqualError(t, err, "test store: enqueue: HeadStart -1s: must not be negative")
}

func TestCheckMessages(t *testing.T) {
	m := func(id string) outbox.Message { return outbox.Message{ID: id, Type: "t"} }
	noX := func(m outbox.Message) error {
		if strings.Contains(m.ID, "x") {
			return fmt.Errorf("%w: ID %q has an x", outbox.ErrInvalidMessage, m.ID)
		}
		return nil
	}
	require.NoError(t, CheckMessages("test store", []outbox.Message{m("a"), m("b")}, nil))
	require.NoError(t, CheckMessages("test store", nil, noX))

	err := CheckMessages("test store", []outbox.Message{m("a"), {ID: "b"}}, noX)
	require.ErrorIs(t, err, outbox.ErrInvalidMessage)
	require.ErrorContains(t, err, "test store: enqueue: message 1: ")

	err = CheckMessages("test store", []outbox.Message{m("a"), m("x")}, noX)
	require.ErrorIs(t, err, outbox.ErrInvalidMessage)
	require.EqualError(t, err, `test store: enqueue: message 1: `+outbox.ErrInvalidMessage.Error()+`: ID "x" has an x`)

	err = CheckMessages("test store", []outbox.Message{m("a"), m("b"), m("a")}, noX)
	require.ErrorIs(t, err, outbox.ErrDuplicateID)
	require.ErrorContains(t, err, `test store: enqueue: message ID "a" appears twice`)
}

func TestCheckIDs(t *testing.T) {
	ids := make([]string, backend.MaxClaimLimit+1)
	require.NoError(t, CheckIDs("test store", "end head start", ids[1:]))
	require.EqualError(t, CheckIDs("test store", "end head start", ids),
		fmt.Sprintf("test store: end head start: %d IDs: more than %d", len(ids), backend.MaxClaimLimit))
	ok, err := CheckEndHeadStart("test store", ids[1:])
	require.True(t, ok)
	require.NoError(t, err)
	ok, err = CheckEndHeadStart("test store", nil)
	require.False(t, ok)
	require.NoError(t, err)
	ok, err = CheckEndHeadStart("test store", ids)
	require.False(t, ok)
	require.ErrorContains(t, err, "test store: end head start: ")
	require.ErrorContains(t, CheckHeadStartBatch("test store", ids, 0), "test store: head start batch: ")
	require.EqualError(t, CheckHeadStartBatch("test store", ids[1:], -1), "test store: head start batch: minLeft must not be negative")
	require.NoError(t, CheckHeadStartBatch("test store", nil, 0))
}

func TestNotRequeued(t *testing.T) {
	failed := errors.New("read failed")
	err := NotRequeued("test store", "m1", outbox.Record{}, fmt.Errorf("get: %w", outbox.ErrNotFound))
	require.ErrorIs(t, err, outbox.ErrNotFound)
	require.EqualError(t, err, `test store: requeue "m1": `+outbox.ErrNotFound.Error())

	require.Equal(t, failed, NotRequeued("test store", "m1", outbox.Record{}, failed))

	// A record read with a decoding error still says its status.
	err = NotRequeued("test store", "m1", outbox.Record{Message: outbox.Message{ID: "m1"}, Status: outbox.StatusPublished}, failed)
	require.ErrorIs(t, err, backend.ErrNotDead)
	require.EqualError(t, err, `test store: requeue "m1": status published: `+backend.ErrNotDead.Error())
}

func TestRequeueInSteps(t *testing.T) {
	failed := errors.New("step failed")
	for _, tc := range []struct {
		name      string
		opts      backend.RequeueOptions
		dead      int   // dead letters there are
		failAfter int   // the step that fails (0: none)
		want      []int // the steps' sizes
		total     int
	}{
		{"fewer than a batch", backend.RequeueOptions{BatchSize: 10}, 3, 0, []int{10}, 3},
		{"exact batches", backend.RequeueOptions{BatchSize: 5}, 10, 0, []int{5, 5, 5}, 10},
		{"within the limit", backend.RequeueOptions{BatchSize: 4, Limit: 10}, 100, 0, []int{4, 4, 2}, 10},
		{"a failed step stops them", backend.RequeueOptions{BatchSize: 4}, 100, 2, []int{4, 4}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var steps []int
			left := tc.dead
			total, err := RequeueInSteps(tc.opts, func(n int) (int, error) {
				steps = append(steps, n)
				if len(steps) == tc.failAfter {
					return 0, failed
				}
				done := min(n, left)
				left -= done
				return done, nil
			})
			require.Equal(t, tc.want, steps)
			require.Equal(t, tc.total, total)
			if tc.failAfter > 0 {
				require.ErrorIs(t, err, failed)
			} else {
				require.NoError(t, err)
			}
		})
	}
}

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
