package mysql_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// TestFiltersMatchExactly (issue 28, defect 6): event_type and event_id
// compare with PAD SPACE in the database, where "T" = "T ". Every filter
// and lookup by type, key or ID matches exactly what it names: counting
// and requeueing dead letters of type "T" leave those of types "T " and
// "T  " alone, and an ID with a trailing space finds nothing.
func TestFiltersMatchExactly(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	require.NoError(t, s.AddConsumer(ctx, "audit", mysql.StartBeginning))
	types := map[string]string{"t0": "T", "t1": "T ", "t2": "T  ", "k0": "K"}
	var msgs []outbox.Message
	for _, id := range []string{"t0", "t1", "t2", "k0"} {
		key := "room"
		if id == "k0" {
			key = "room "
		}
		msgs = append(msgs, outbox.Message{ID: id, Type: types[id], Key: key})
	}
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, msgs...))
	audit := consumer(t, s, "audit")
	for _, ch := range []interface {
		backend.Store
		CountDead(context.Context, mysql.DeadFilter) (int, error)
		RequeueDead(context.Context, mysql.DeadFilter, mysql.RequeueOptions) (int, error)
		List(context.Context, mysql.ListFilter) ([]outbox.Record, error)
		Requeue(context.Context, string) error
	}{s, audit} {
		b, err := ch.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 10, LeaseFor: 60e9})
		require.NoError(t, err)
		require.Len(t, b.Records, 4)
		var dead []backend.Outcome
		for _, r := range b.Records {
			dead = append(dead, backend.Outcome{ID: r.ID, Kind: backend.OutcomeDead, Error: "x"})
		}
		_, err = ch.Settle(ctx, b.Token, dead)
		require.NoError(t, err)

		n, err := ch.CountDead(ctx, mysql.DeadFilter{Type: "T"})
		require.NoError(t, err)
		require.Equal(t, 1, n, "only type \"T\"")
		n, err = ch.CountDead(ctx, mysql.DeadFilter{Type: "T "})
		require.NoError(t, err)
		require.Equal(t, 1, n, "only type \"T \"")
		n, err = ch.CountDead(ctx, mysql.DeadFilter{Key: "room"})
		require.NoError(t, err)
		require.Equal(t, 3, n, "key \"room\", not \"room \"")
		recs, err := ch.List(ctx, mysql.ListFilter{Type: "T", Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []string{"t0"}, recordIDs(recs))

		n, err = ch.RequeueDead(ctx, mysql.DeadFilter{Type: "T"}, mysql.RequeueOptions{})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		for id, want := range map[string]outbox.Status{"t0": outbox.StatusPending, "t1": outbox.StatusDead, "t2": outbox.StatusDead, "k0": outbox.StatusDead} {
			r, err := ch.Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, want, r.Status, id)
		}
		_, err = ch.Get(ctx, "t1 ")
		require.ErrorIs(t, err, outbox.ErrNotFound, "an ID names one record exactly")
		require.ErrorIs(t, ch.Requeue(ctx, "t1 "), outbox.ErrNotFound)
	}
	for _, ordered := range []bool{false, true} {
		b, err := s.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 10, LeaseFor: 60e9, IDs: []string{"t0 "}, Ordered: ordered})
		require.NoError(t, err)
		require.Zero(t, b.Len(), "a claim by ID too")
	}
}
