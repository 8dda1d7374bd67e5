package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// TestPurgeLocksOnlyWhatItDeletes: while a batch of Purge waits for a
// lock on one old record (held here by another transaction), new
// messages are processed, also those whose IDs sort between the old
// records: the purge holds no gap locks, and reads none of the rows of
// messages in progress.
func TestPurgeLocksOnlyWhatItDeletes(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	ib := newInbox(t, d.DB, "activity")
	insertRecords(t, d, "activity", 10, 2*time.Hour, 0)

	holder, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback() }()
	var one int
	require.NoError(t, holder.QueryRowContext(ctx, "SELECT 1 FROM inbox WHERE consumer = 'activity' AND msg_id = 'evt-00009' FOR UPDATE").Scan(&one))

	purged := make(chan error, 1)
	go func() {
		n, err := ib.Purge(ctx, time.Hour, 100)
		if err == nil && n != 10 {
			err = fmt.Errorf("purged %d records, want 10", n)
		}
		purged <- err
	}()
	deadline := time.Now().Add(time.Minute)
	for lockWaiters(t, d.DB, d.Name) < 1 {
		require.True(t, time.Now().Before(deadline), "the purge did not wait for the held record within a minute")
	}
	// New messages, with IDs inside and after the old records' range.
	for _, id := range []string{"evt-00004a", "evt-00008z", "evt-1"} {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		res, err := ib.Process(pctx, id, func(context.Context, *sql.Tx) error { return nil })
		cancel()
		require.NoError(t, err, "%s: processing a new message while a purge waits", id)
		require.Equal(t, inbox.Processed, res)
	}
	require.NoError(t, holder.Rollback())
	select {
	case err := <-purged:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("the purge did not finish within a minute of the lock's release")
	}
}

// TestConcurrentPurges: purges running at once, while messages are
// processed, delete every old record once between them and fail none.
func TestConcurrentPurges(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	ib := newInbox(t, d.DB, "activity")
	insertRecords(t, d, "activity", 3000, 2*time.Hour, 0)
	const purges = 4
	deleted := make(chan int, purges)
	errs := make(chan error, purges+1)
	for range purges {
		other := newInbox(t, d.Open(t), "activity") // another instance
		go func() {
			n, err := other.Purge(ctx, time.Hour, 100)
			deleted <- n
			errs <- err
		}()
	}
	go func() {
		var err error
		for i := 0; i < 200 && err == nil; i++ {
			_, err = ib.Process(ctx, fmt.Sprintf("evt-%05d-new", i), func(context.Context, *sql.Tx) error { return nil })
		}
		errs <- err
	}()
	total := 0
	for range purges {
		total += <-deleted
	}
	for range purges + 1 {
		require.NoError(t, <-errs)
	}
	require.Equal(t, 3000, total, "every old record deleted once")
	var left int
	require.NoError(t, d.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM inbox").Scan(&left))
	require.Equal(t, 200, left, "the new messages' records stay")
}
