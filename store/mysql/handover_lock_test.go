package mysql

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// TestHandOverLocksNoExistingRow: a message handed over before whose
// fanout flag was not set (the default consumer held it) is handed over
// again by the next claim of any named consumer. That hand-over must not
// lock the consumer rows that exist already: held open, it used to (an
// INSERT … ON DUPLICATE KEY UPDATE takes an exclusive lock on the
// duplicate), and a claim of the consumer, skipping locked rows, came back
// empty while its record was due (found in issue 28's flake hunt).
func TestHandOverLocksNoExistingRow(t *testing.T) {
	d, s := migrated(t, "handover_lock")
	ctx := context.Background()
	require.NoError(t, s.AddConsumer(ctx, "audit", StartNow))
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "m-1", Type: "T"}))
	audit, err := s.Consumer("audit")
	require.NoError(t, err)
	_, err = s.handOver(ctx, "audit", 10) // m-1's row, and its flag set
	require.NoError(t, err)
	_, err = d.DB.ExecContext(ctx, "UPDATE handover_lock SET fanout = 0") // as if the flag could not be set
	require.NoError(t, err)

	// Another instance's hand-over, held open after its INSERT.
	tx, err := d.DB.BeginTx(ctx, readCommitted)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = handOverSQL(s.t, []uint64{1}).exec(ctx, tx)
	require.NoError(t, err)

	b, err := audit.channel.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, 1, b.Len(), "m-1 is due and no claim holds it")
}
