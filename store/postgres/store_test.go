package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

func TestOptionsAreValidated(t *testing.T) {
	d := pgtest.NewDatabase(t)
	for _, c := range []struct {
		opts postgres.Options
		want string
	}{
		{postgres.Options{Table: "Outbox"}, "Table"},
		{postgres.Options{Table: "1x"}, "Table"},
		{postgres.Options{Table: "x; DROP TABLE y"}, "Table"},
		{postgres.Options{Table: strings.Repeat("x", postgres.MaxTableLength+1)}, "Table"},
		{postgres.Options{MaxPayloadBytes: -1}, "MaxPayloadBytes"},
		{postgres.Options{MaxPayloadBytes: 65<<20 + 1}, "MaxPayloadBytes"},
		{postgres.Options{MaxHeaderBytes: -1}, "MaxHeaderBytes"},
		{postgres.Options{MaxClaimBytes: -1}, "MaxClaimBytes"},
	} {
		_, err := postgres.New(d.DB, c.opts)
		require.ErrorContains(t, err, c.want, "%+v", c.opts)
	}
	_, err := postgres.New(nil, postgres.Options{})
	require.ErrorContains(t, err, "nil")
	s, err := postgres.New(d.DB, postgres.Options{})
	require.NoError(t, err)
	require.Equal(t, postgres.DefaultTable, s.Table())
}

// TestEnqueueThroughPgxTx: a service on pgx's own API passes its pgx.Tx
// through PgxTx; the messages commit and roll back with it.
func TestEnqueueThroughPgxTx(t *testing.T) {
	d := pgtest.NewDatabase(t)
	s := newStore(t, d.DB)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, d.DSN)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Enqueue(ctx, postgres.PgxTx(tx), nil, outbox.Message{ID: "pgx-1", Key: "k\x00", Type: "T", Payload: []byte{0, 1}, Headers: map[string]string{"h": "v"}}))
	require.NoError(t, tx.Commit(ctx))
	r, err := s.Get(ctx, "pgx-1")
	require.NoError(t, err)
	require.Equal(t, "k\x00", r.Key)
	require.Equal(t, []byte{0, 1}, r.Payload)
	require.Equal(t, map[string]string{"h": "v"}, r.Headers)

	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Enqueue(ctx, postgres.PgxTx(tx), nil, outbox.Message{ID: "pgx-2", Type: "T"}))
	require.NoError(t, tx.Rollback(ctx))
	_, err = s.Get(ctx, "pgx-2")
	require.ErrorIs(t, err, outbox.ErrNotFound)

	// A duplicate is refused, names the ID, and leaves the transaction
	// usable: the service's own work still commits.
	_, err = pool.Exec(ctx, "CREATE TABLE orders (id text PRIMARY KEY)")
	require.NoError(t, err)
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "INSERT INTO orders VALUES ('o-1')")
	require.NoError(t, err)
	err = s.Enqueue(ctx, postgres.PgxTx(tx), nil, outbox.Message{ID: "fresh", Type: "T"}, outbox.Message{ID: "pgx-1", Type: "T"})
	require.ErrorIs(t, err, outbox.ErrDuplicateID)
	require.Contains(t, err.Error(), `"pgx-1"`)
	require.NoError(t, tx.Commit(ctx))
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&n))
	require.Equal(t, 1, n)
	_, err = s.Get(ctx, "fresh")
	require.ErrorIs(t, err, outbox.ErrNotFound, "nothing of the rejected call")

	// Through the pool itself: a transaction of its own.
	require.NoError(t, s.Enqueue(ctx, postgres.PgxTx(pool), nil, outbox.Message{ID: "pgx-3", Type: "T"}))
	_, err = s.Get(ctx, "pgx-3")
	require.NoError(t, err)
}

// TestDuplicateKeepsTheCallersSQLTransaction: the same through
// database/sql.
func TestDuplicateKeepsTheCallersSQLTransaction(t *testing.T) {
	d := pgtest.NewDatabase(t)
	s := newStore(t, d.DB)
	ctx := context.Background()
	_, err := d.DB.ExecContext(ctx, "CREATE TABLE orders (id text PRIMARY KEY)")
	require.NoError(t, err)
	enqueueCommitted(t, d, s, outbox.Message{ID: "dup", Type: "T"})
	tx, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "INSERT INTO orders VALUES ('o-1')")
	require.NoError(t, err)
	err = s.Enqueue(ctx, tx, nil, outbox.Message{ID: "x", Type: "T"}, outbox.Message{ID: "dup", Type: "T"})
	require.ErrorIs(t, err, outbox.ErrDuplicateID)
	require.Contains(t, err.Error(), `"dup"`)
	require.NoError(t, s.Enqueue(ctx, tx, nil, outbox.Message{ID: "y", Type: "T"}), "the transaction goes on")
	require.NoError(t, tx.Commit())
	_, err = s.Get(ctx, "y")
	require.NoError(t, err)
	_, err = s.Get(ctx, "x")
	require.ErrorIs(t, err, outbox.ErrNotFound)
}

// TestConcurrentDuplicateTakesTheCallBack: a writer of the same ID
// commits while the call waits for it; the call inserts none of its
// messages and says so.
func TestConcurrentDuplicateTakesTheCallBack(t *testing.T) {
	d := pgtest.NewDatabase(t)
	s := newStore(t, d.DB)
	ctx := context.Background()
	first, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, s.Enqueue(ctx, first, nil, outbox.Message{ID: "race", Type: "T"}))
	second, err := d.Open(t).BeginTx(ctx, nil)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		done <- s.Enqueue(ctx, second, nil, outbox.Message{ID: "mine", Type: "T"}, outbox.Message{ID: "race", Type: "T"})
	}()
	// The second writer waits for the first one's row lock on "race".
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, d.Open(t).QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&waiting))
		return waiting > 0
	}, time.Minute, 10*time.Millisecond)
	require.NoError(t, first.Commit())
	require.ErrorIs(t, <-done, outbox.ErrDuplicateID)
	require.NoError(t, second.Commit())
	_, err = s.Get(ctx, "mine")
	require.ErrorIs(t, err, outbox.ErrNotFound, "the call was taken back whole")
}

func TestEnqueueRefusesWhatPostgreSQLCannotHold(t *testing.T) {
	d := pgtest.NewDatabase(t)
	s, err := postgres.New(d.DB, postgres.Options{Table: testTable, MaxPayloadBytes: 10, MaxHeaderBytes: 20})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(context.Background()))
	ctx := context.Background()
	for _, c := range []struct {
		m    outbox.Message
		want string
	}{
		{outbox.Message{ID: "a\x00", Type: "T"}, "NUL"},
		{outbox.Message{ID: "h", Type: "T", Headers: map[string]string{"k": "v\x00"}}, "NUL"},
		{outbox.Message{ID: "p", Type: "T", Payload: make([]byte, 11)}, "MaxPayloadBytes"},
		{outbox.Message{ID: "hh", Type: "T", Headers: map[string]string{"k": strings.Repeat("v", 20)}}, "MaxHeaderBytes"},
	} {
		err := s.Enqueue(ctx, d.DB, nil, c.m)
		require.ErrorIs(t, err, outbox.ErrInvalidMessage)
		require.ErrorContains(t, err, c.want)
	}
	// NUL in keys and types is kept, byte for byte.
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "k", Key: "\x00", Type: "T\x00"}))
	r, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "\x00", r.Key)
	require.Equal(t, "T\x00", r.Type)
}

// TestClaimBytesBound: a claim takes records while they fit in
// MaxClaimBytes, and always one.
func TestClaimBytesBound(t *testing.T) {
	d := pgtest.NewDatabase(t)
	s, err := postgres.New(d.DB, postgres.Options{Table: testTable, MaxClaimBytes: 250})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Migrate(ctx))
	var ms []outbox.Message
	for i := range 5 {
		ms = append(ms, outbox.Message{ID: string(rune('a' + i)), Type: "T", Payload: make([]byte, 100)})
	}
	ms = append(ms, outbox.Message{ID: "big", Type: "T", Payload: make([]byte, 1000)})
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, ms...))
	for _, want := range []int{3, 3, 0} { // at most MaxClaimBytes plus one message
		b, err := s.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Equal(t, want, b.Len())
	}
}

// TestMigrateConcurrentlyAndVerify: instances starting at once migrate
// one after the other; Verify finds what is missing.
func TestMigrateConcurrentlyAndVerify(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	s, err := postgres.New(d.DB, postgres.Options{Table: testTable})
	require.NoError(t, err)
	require.ErrorContains(t, s.Verify(ctx), "schema version 0")
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			other, err := postgres.New(d.Open(t), postgres.Options{Table: testTable})
			if err == nil {
				err = other.Migrate(ctx)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, s.Migrate(ctx), "idempotent")
	require.NoError(t, s.Verify(ctx))

	_, err = d.DB.ExecContext(ctx, `DROP INDEX room_outbox_s_due`)
	require.NoError(t, err)
	_, err = d.DB.ExecContext(ctx, `ALTER TABLE room_outbox_state DROP COLUMN finished_at`)
	require.NoError(t, err)
	err = s.Verify(ctx)
	require.ErrorContains(t, err, "room_outbox_s_due")
	require.ErrorContains(t, err, "finished_at")

	text, err := postgres.SchemaSQL("room_outbox", 0, postgres.SchemaVersion)
	require.NoError(t, err)
	require.Contains(t, text, `CREATE TABLE IF NOT EXISTS "room_outbox" (`)
	require.Contains(t, text, fmt.Sprintf("schema version %d", postgres.SchemaVersion))
	require.Equal(t, text, s.Schema())
	_, err = postgres.SchemaSQL("Bad", 0, 1)
	require.ErrorContains(t, err, "Table")
	_, err = postgres.SchemaSQL("ok", 0, postgres.SchemaVersion+1)
	require.Error(t, err)
}

// TestClaimReadsPastThePosition: a claim reads the log from the
// consumer's position on, through the (xid, seq) index, however many
// delivered messages lie before it.
func TestClaimReadsPastThePosition(t *testing.T) {
	d := pgtest.NewDatabase(t)
	s := newStore(t, d.DB)
	ctx := context.Background()
	_, err := d.DB.ExecContext(ctx, `INSERT INTO room_outbox (event_id, event_type, payload)
		SELECT 'old-' || g, '\x54', '\x' FROM generate_series(1, 20000) g`)
	require.NoError(t, err)
	// Delivered: the default consumer's walk is past them.
	_, err = d.DB.ExecContext(ctx, `UPDATE room_outbox_consumers c SET walked_xid = m.xid, walked_seq = m.seq
		FROM (SELECT xid, seq FROM room_outbox ORDER BY xid DESC, seq DESC LIMIT 1) m WHERE c.id = 0`)
	require.NoError(t, err)
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "new", Type: "T"}))
	_, err = d.DB.ExecContext(ctx, "ANALYZE room_outbox")
	require.NoError(t, err)
	var plan strings.Builder
	rows, err := d.DB.QueryContext(ctx, `EXPLAIN SELECT o.seq FROM room_outbox o, room_outbox_consumers c
		WHERE c.id = 0 AND (o.xid, o.seq) > (c.walked_xid, c.walked_seq) ORDER BY o.xid, o.seq LIMIT 100`)
	require.NoError(t, err)
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan.WriteString(line + "\n")
	}
	require.NoError(t, rows.Err())
	require.Contains(t, plan.String(), "room_outbox_xid", plan.String())
	var b backend.Batch
	require.Eventually(t, func() bool {
		b, err = s.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 100, LeaseFor: time.Minute})
		require.NoError(t, err)
		return b.Len() > 0
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"new"}, []string{b.Records[0].ID})
	require.Equal(t, 1, b.Len())
}
