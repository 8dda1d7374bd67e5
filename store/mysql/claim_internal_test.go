package mysql

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// TestClaimHeadsRechecksTheHead: an ordered claim reads the key heads
// without locks, then locks the ones it takes. A requeue that commits in
// between makes an older record of the key pending again; the record read
// as the head is then no longer the head and must not be claimed, or two
// records of the key would be in flight.
func TestClaimHeadsRechecksTheHead(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s, err := New(d.DB, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "k1", Key: "K", Type: "T"}, outbox.Message{ID: "k2", Key: "K", Type: "T"}))
	b, err := s.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 1, LeaseFor: time.Minute, Ordered: true})
	require.NoError(t, err)
	_, err = s.Settle(ctx, b.Token, []backend.Outcome{{ID: "k1", Kind: backend.OutcomeDead, Error: "x"}})
	require.NoError(t, err)

	tx, err := d.DB.BeginTx(ctx, readCommitted)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	heads, err := s.headWindow(ctx, tx, "", 10)
	require.NoError(t, err)
	require.Len(t, heads, 1, "k2 is K's head while k1 is dead")
	_, err = d.DB.ExecContext(ctx, "UPDATE outbox SET status = 'pending', key_state = 'pending', next_attempt_at = UTC_TIMESTAMP(6) WHERE event_id = 'k1'")
	require.NoError(t, err)
	rows, err := readRows(ctx, tx, claimHeadsSQL(s.t, heads[:1], 10))
	require.NoError(t, err)
	require.Empty(t, rows, "k1 is pending again: k2 is no longer the head")
}
