package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// settleAs claims ids from st and settles each with its outcome, as a
// worker does.
func settleAs(t *testing.T, st backend.Store, outcomes ...backend.Outcome) {
	t.Helper()
	ids := make([]string, len(outcomes))
	for i, o := range outcomes {
		ids[i] = o.ID
	}
	ctx := context.Background()
	b, err := st.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: len(ids), LeaseFor: time.Minute, IDs: ids})
	require.NoError(t, err)
	require.Len(t, b.Records, len(ids))
	res, err := st.Settle(ctx, b.Token, outcomes)
	require.NoError(t, err)
	require.Equal(t, len(ids), res.Applied)
}

func listIDs(t *testing.T, l interface {
	List(context.Context, mysql.ListFilter) ([]outbox.Record, error)
}, f mysql.ListFilter) []string {
	t.Helper()
	if f.Limit == 0 {
		f.Limit = 100
	}
	recs, err := l.List(context.Background(), f)
	require.NoError(t, err)
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	return ids
}

// TestListFilters: every filter of List, alone and combined, for the
// default consumer and a named one, and paging by Seq.
func TestListFilters(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	require.NoError(t, s.AddConsumer(ctx, "audit", mysql.StartNow))
	audit := consumer(t, s, "audit")
	require.NoError(t, s.Enqueue(ctx, d.DB, nil,
		outbox.Message{ID: "a", Key: "room-1", Type: "Joined", Payload: []byte(`{"n":1}`)},
		outbox.Message{ID: "b", Key: "room-1", Type: "Gift"},
		outbox.Message{ID: "c", Key: "room-2", Type: "Gift"},
		outbox.Message{ID: "d", Key: "room-2", Type: "Joined"},
		outbox.Message{ID: "e", Key: "room-3", Type: "Gift"},
	))
	for _, st := range []backend.Store{s, audit} {
		settleAs(t, st,
			backend.Outcome{ID: "b", Kind: backend.OutcomeDead, Error: "group 100% gone_x"},
			backend.Outcome{ID: "c", Kind: backend.OutcomeRetry, RetryIn: time.Hour, Error: "timeout"},
			backend.Outcome{ID: "d", Kind: backend.OutcomeDead, Error: "bad request"},
			backend.Outcome{ID: "e", Kind: backend.OutcomePublished},
		)
	}
	for name, l := range map[string]interface {
		List(context.Context, mysql.ListFilter) ([]outbox.Record, error)
	}{"default": s, "audit": audit} {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				f    mysql.ListFilter
				want []string
			}{
				{"dead", mysql.ListFilter{Status: outbox.StatusDead}, []string{"b", "d"}},
				{"failing", mysql.ListFilter{Status: outbox.StatusPending, MinAttempts: 1}, []string{"c"}},
				{"type", mysql.ListFilter{Type: "Gift"}, []string{"b", "c", "e"}},
				{"key", mysql.ListFilter{Key: "room-2"}, []string{"c", "d"}},
				{"error text, literally", mysql.ListFilter{ErrorContains: "100% gone_"}, []string{"b"}},
				{"a wildcard is no wildcard", mysql.ListFilter{ErrorContains: "%"}, []string{"b"}},
				{"error and status", mysql.ListFilter{Status: outbox.StatusDead, ErrorContains: "request"}, []string{"d"}},
				{"older than an hour", mysql.ListFilter{OlderThan: time.Hour}, []string{}},
				{"older than nothing much", mysql.ListFilter{Status: outbox.StatusDead, OlderThan: time.Microsecond}, []string{"b", "d"}},
				{"after", mysql.ListFilter{Type: "Gift", AfterSeq: seqOf(t, s, "b")}, []string{"c", "e"}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					require.Equal(t, tc.want, listIDs(t, l, tc.f))
				})
			}
		})
	}

	recs, err := audit.List(ctx, mysql.ListFilter{Status: outbox.StatusDead, Limit: 1})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "b", recs[0].ID)
	require.Equal(t, "group 100% gone_x", recs[0].LastError, "the consumer's own state")
	require.Equal(t, 1, recs[0].Attempts)
	a, err := audit.List(ctx, mysql.ListFilter{Type: "Joined", Limit: 1})
	require.NoError(t, err)
	require.Equal(t, []byte(`{"n":1}`), a[0].Payload, "a consumer's records carry their payload")

	for _, f := range []mysql.ListFilter{{Limit: 0}, {Limit: outbox.MaxBatchSize + 1}, {Limit: 1, OlderThan: -1}, {Limit: 1, MinAttempts: -1}, {Limit: 1, AfterSeq: -1}} {
		_, err := audit.List(ctx, f)
		require.Error(t, err, "%+v", f)
		require.ErrorContains(t, err, `consumer "audit"`)
	}
}

func seqOf(t *testing.T, s *mysql.Store, id string) int64 {
	t.Helper()
	r, err := s.Get(context.Background(), id)
	require.NoError(t, err)
	return r.Seq
}

func TestLastSeq(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	seq, err := s.LastSeq(ctx)
	require.NoError(t, err)
	require.Zero(t, seq, "an empty table")
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "a", Type: "T"}, outbox.Message{ID: "b", Type: "T"}))
	seq, err = s.LastSeq(ctx)
	require.NoError(t, err)
	require.Equal(t, seqOf(t, s, "b"), seq)
}
