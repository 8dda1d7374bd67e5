package mysql_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// TestDataStepsHoldOneBatch (issue 28, defect 8): a migration's data step
// (here version 7's copy of status into key_state, resumed after its
// column was added) runs in batches of the primary key, each committed
// on its own. While a later batch waits for a row another transaction
// holds, the rows of the batches before it are free: a settle of the
// table's first record does not wait, a claim takes it, and a writer
// inserts. (Claims wait for the tables of version 9: a claim of version
// 8 ran here until then.)
// (963872d ran the step as one UPDATE over the table under REPEATABLE
// READ: held open, it locked every row it had read and the claim got
// nothing.)
func TestDataStepsHoldOneBatch(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	execAll(t, d.DB, version6)
	execAll(t, d.DB, []string{
		"ALTER TABLE room_outbox ADD COLUMN key_state ENUM('pending', 'done') CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending'",
		"INSERT INTO room_outbox (event_id, event_type, payload, created_at, next_attempt_at) VALUES ('first', 'T', 'p', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
	})
	fillPublished(t, d.DB, "K", 3000)
	before := snapshot(t, d.DB)

	// A transaction holds a published record in the middle of the table.
	blocker, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback() }()
	var middle uint64
	require.NoError(t, blocker.QueryRowContext(ctx, "SELECT id FROM room_outbox WHERE event_id = 'hist-K-2000' FOR UPDATE").Scan(&middle))

	s, err := mysql.New(d.Open(t), mysql.Options{Table: testTable})
	require.NoError(t, err)
	start := time.Now()
	migrated := make(chan error, 1)
	go func() { migrated <- s.MigrateWith(ctx, mysql.MigrateOptions{BatchSize: 500}) }()
	// The first batch commits on its own: its rows show the copy while
	// the step is still running (one UPDATE over the table would show
	// nothing until it ended, which the held record keeps it from).
	outboxtest.EventuallyWithin(t, 3*time.Minute, "the first batch to commit", func() bool {
		select {
		case err := <-migrated:
			require.FailNow(t, "Migrate returned while a record of the data step was held", "%v", err)
		default:
		}
		var state string
		err := d.DB.QueryRow("SELECT key_state FROM room_outbox WHERE event_id = 'hist-K-0'").Scan(&state)
		return err == nil && state == "done"
	})
	t.Logf("the first batch committed %v after the start", time.Since(start))
	// Writers and claims meanwhile, each allowed to wait one second.
	conn, err := d.DB.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1")
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, "UPDATE room_outbox SET retry_count = retry_count + 1 WHERE event_id = 'first'")
	require.NoError(t, err, "the first record is in a batch committed long before")
	_, err = conn.ExecContext(ctx, "UPDATE room_outbox SET retry_count = retry_count - 1 WHERE event_id = 'first'")
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, "INSERT INTO room_outbox (event_id, event_type, payload, created_at, next_attempt_at) VALUES ('written', 'T', 'p', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)")
	require.NoError(t, err, "a writer inserts at the end of the table")
	require.NoError(t, blocker.Rollback())
	require.NoError(t, <-migrated)
	require.NoError(t, s.Verify(ctx))
	after := snapshot(t, d.DB)
	require.Len(t, after, len(before)+1, "and the record written meanwhile")
	require.Equal(t, before, after[:len(before)], "every row and field kept (%d published around record %d)", 3000, middle)
}

// TestDataStepsCopyEveryBatch: a data step in batches of 3 copies every
// row of the outbox table and, per consumer, of the consumption table,
// up to the last one (version 6's copy of the version 5 lease).
func TestDataStepsCopyEveryBatch(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	execAll(t, d.DB, version5)
	const token = "f123456789abcdef"
	var rows []string
	for i := range 10 {
		rows = append(rows, fmt.Sprintf("('e%d', 'T', 'p', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), '%s', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)", i, token))
	}
	execAll(t, d.DB, []string{
		"INSERT INTO room_outbox (event_id, event_type, payload, created_at, next_attempt_at, lease, lease_until) VALUES " + joinRows(rows),
		"INSERT INTO room_outbox_consumers (name, start_seq, created_at) VALUES ('a', 1, UTC_TIMESTAMP(6)), ('b', 1, UTC_TIMESTAMP(6))",
		"INSERT INTO room_outbox_consumption (consumer, msg_id, event_id, event_type, created_at, next_attempt_at, lease, lease_until)" +
			" SELECT c.name, o.id, o.event_id, o.event_type, o.created_at, o.next_attempt_at, o.lease, o.lease_until FROM room_outbox o, room_outbox_consumers c",
	})
	s, err := mysql.New(d.DB, mysql.Options{Table: testTable})
	require.NoError(t, err)
	// The cut-over to version 9 counts the leases the copy made: all of
	// them, or it would not wait for their workers.
	require.ErrorContains(t, s.MigrateWith(ctx, mysql.MigrateOptions{BatchSize: 3}), "30 records are leased to workers of version 8")
	id := leaseIDOf(t, token)
	require.Equal(t, 10, countWhere(t, d.DB, "room_outbox", "lease_id = "+id))
	require.Equal(t, 20, countWhere(t, d.DB, "room_outbox_consumption", "lease_id = "+id))
}

func joinRows(rows []string) string { return strings.Join(rows, ", ") }
