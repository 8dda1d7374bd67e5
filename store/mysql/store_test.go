package mysql_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

func TestNewValidatesTable(t *testing.T) {
	d := testutil.NewDatabase(t)
	good := []string{"", "outbox", "room_outbox", "_x", "T1", strings.Repeat("a", mysql.MaxTableLength)}
	for _, name := range good {
		s, err := mysql.New(d.DB, mysql.Options{Table: name})
		require.NoError(t, err, name)
		if name == "" {
			require.Equal(t, mysql.DefaultTable, s.Table())
		}
	}
	bad := []string{"1x", "room-outbox", "a`b", "x; DROP TABLE y", "db.table", "ünïcode", strings.Repeat("a", mysql.MaxTableLength+1)}
	for _, name := range bad {
		_, err := mysql.New(d.DB, mysql.Options{Table: name})
		require.ErrorContains(t, err, "Table", name)
		require.ErrorContains(t, err, fmt.Sprintf("%q", name))
	}
	_, err := mysql.New(nil, mysql.Options{})
	require.ErrorContains(t, err, "db is nil")
}

func TestMigrateIsIdempotentAndChecksForeignTables(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	require.NoError(t, s.Migrate(ctx), "a second Migrate is a no-op")

	_, err := d.DB.ExecContext(ctx, "CREATE TABLE legacy (event_id VARCHAR(64) PRIMARY KEY, status VARCHAR(16))")
	require.NoError(t, err)
	legacy, err := mysql.New(d.DB, mysql.Options{Table: "legacy"})
	require.NoError(t, err)
	err = legacy.Migrate(ctx)
	require.ErrorContains(t, err, "column created_at")
	require.ErrorContains(t, err, "column event_key")

	missing, err := mysql.New(d.DB, mysql.Options{Table: "never_migrated"})
	require.NoError(t, err)
	_, err = missing.Get(ctx, "x")
	require.ErrorContains(t, err, "run Store.Migrate")
}

func TestEnqueueAcceptsTxDBAndConn(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)

	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "via-db", Type: "T"}))
	conn, err := d.DB.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, s.Enqueue(ctx, conn, nil, outbox.Message{ID: "via-conn", Type: "T"}))
	tx, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, s.Enqueue(ctx, tx, nil, outbox.Message{ID: "via-tx", Type: "T"}))
	require.NoError(t, tx.Commit())
	for _, id := range []string{"via-db", "via-conn", "via-tx"} {
		_, err := s.Get(ctx, id)
		require.NoError(t, err, id)
	}
}

func TestEnqueueManyMessagesIsAllOrNothing(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	const n = 2500 // more than one INSERT statement
	ms := make([]outbox.Message, n)
	for i := range ms {
		ms[i] = outbox.Message{ID: fmt.Sprintf("big-%d", i), Type: "T", Payload: []byte("p")}
	}
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "taken", Type: "T"}))

	// Through *sql.DB the store wraps the statements in a transaction of its
	// own, so the duplicate in the last statement undoes the first ones.
	err := s.Enqueue(ctx, d.DB, nil, append(ms, outbox.Message{ID: "taken", Type: "T"})...)
	require.ErrorIs(t, err, outbox.ErrDuplicateID)
	require.Contains(t, err.Error(), `"taken"`)
	require.Equal(t, 1, countRows(t, d, ""), "nothing of the failed call is written")

	require.NoError(t, s.Enqueue(ctx, d.DB, nil, ms...))
	require.Equal(t, n+1, countRows(t, d, ""))
}

func countRows(t *testing.T, d *testutil.Database, where string) int {
	t.Helper()
	var n int
	q := "SELECT COUNT(*) FROM " + testTable
	if where != "" {
		q += " WHERE " + where
	}
	require.NoError(t, d.DB.QueryRow(q).Scan(&n))
	return n
}

// An undecodable record (here: headers edited by hand into invalid JSON)
// fails alone: it is kept (as a dead letter: decoding will not succeed on
// a retry), counted and logged, and the rest of the batch is delivered.
func TestUndecodableRecordFailsAlone(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	for _, id := range []string{"u-0", "u-1", "u-2"} {
		require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: id, Type: "T", Headers: map[string]string{"a": "b"}}))
	}
	_, err := d.DB.ExecContext(ctx, "UPDATE "+testTable+" SET headers = '{broken' WHERE event_id = 'u-1'")
	require.NoError(t, err)

	rec := outboxtest.NewRecorder()
	w, err := outbox.NewWorker(s, rec, outbox.WorkerOptions{Logger: outboxtest.Logger(t), Retry: outbox.FixedInterval{Interval: time.Hour}})
	require.NoError(t, err)
	res, err := w.ProcessBatch(ctx)
	require.NoError(t, err)
	require.Equal(t, outbox.BatchResult{Claimed: 3, Published: 2, Dead: 1}, res)
	require.Equal(t, []string{"u-0", "u-2"}, []string{rec.Messages()[0].ID, rec.Messages()[1].ID})

	r, err := s.Get(ctx, "u-1")
	require.ErrorContains(t, err, "headers")
	require.Equal(t, outbox.StatusDead, r.Status, "kept, not deleted")
	require.Equal(t, 1, r.Attempts, "counted")
	require.Contains(t, r.LastError, "undecodable")
}

// The store must not depend on the DSN's time settings: parseTime, loc and
// the session time zone all differ here from the default pool.
func TestDSNTimeSettingsDoNotMatter(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	plain := newStore(t, d.DB)
	odd := newStore(t, testutil.OpenDSN(t, withParams(t, d.DSN, map[string]string{
		"parseTime": "true", "loc": "Asia/Shanghai", "time_zone": "'-07:00'", "interpolateParams": "true",
	})))
	created := time.Date(2026, 3, 4, 5, 6, 7, 891011000, time.UTC)
	require.NoError(t, odd.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "tz", Type: "T", CreatedAt: created}))
	for _, s := range []*mysql.Store{plain, odd} {
		r, err := s.Get(ctx, "tz")
		require.NoError(t, err)
		require.True(t, created.Equal(r.CreatedAt), "got %v want %v", r.CreatedAt, created)
	}
	b, err := odd.Claim(ctx, backend.ClaimParams{Owner: "n", Limit: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, b.Records, 1, "due-ness is judged on the database's UTC clock in any session time zone")
	_, err = odd.Settle(ctx, b.Token, []backend.Outcome{{ID: "tz", Kind: backend.OutcomeRetry, RetryIn: time.Minute, Error: "x"}})
	require.NoError(t, err)
	r, err := plain.Get(ctx, "tz")
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Minute), r.NextAttemptAt, time.Hour, "the retry's due time is UTC")
}

func withParams(t *testing.T, dsn string, params map[string]string) string {
	t.Helper()
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	v := url.Values{}
	for k, p := range params {
		v.Set(k, p)
	}
	return dsn + sep + v.Encode()
}

// The worker survives its database connections being killed under it: it
// logs, goes on, and nothing is lost.
func TestWorkerSurvivesKilledConnections(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	const n = 2000
	ms := make([]outbox.Message, n)
	for i := range ms {
		ms[i] = outbox.Message{ID: fmt.Sprintf("k-%d", i), Key: "room", Type: "T"}
	}
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, ms...))

	rec := outboxtest.NewRecorder()
	// A killed connection fails its statement at once; the timeouts only
	// bound a hang. (With 500ms, as before, the rounds of a loaded machine
	// could miss it one after another and deliver nothing in time.) The
	// lease is about as short as they allow, so that lost outcomes come
	// back soon.
	w, err := outbox.NewWorker(s, rec, outbox.WorkerOptions{
		Logger:       outboxtest.Logger(t),
		PollInterval: 10 * time.Millisecond, BatchSize: 20,
		PublishTimeout: 200 * time.Millisecond, StoreTimeout: 2 * time.Second, LeaseTimeout: 5 * time.Second,
		Retry: outbox.FixedInterval{Interval: 10 * time.Millisecond},
	})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()

	kills := 0
	deadline := time.Now().Add(2 * time.Minute)
	for rec.Distinct() < n {
		require.True(t, time.Now().Before(deadline), "only %d of %d delivered", rec.Distinct(), n)
		k, err := d.KillConnections(ctx)
		require.NoError(t, err)
		kills += k
		time.Sleep(15 * time.Millisecond) // pacing of the fault injection, not synchronisation
	}
	require.Positive(t, kills)

	// Outcomes lost with a killed connection are delivered again once their
	// lease expires: with the faults over, the table must drain completely.
	deadline = time.Now().Add(time.Minute)
	for statsOf(t, s).Pending > 0 {
		require.True(t, time.Now().Before(deadline), "records left unpublished")
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	require.NoError(t, <-done)
	t.Logf("killed %d connections; %d deliveries of %d events (%d duplicates)", kills, rec.Len(), n, rec.Len()-n)
}

// TestEnqueueMixedBatch: one Enqueue call writes its messages in one
// statement that names headers and occurred_at only when some message
// sets them; the others get the column's default. Each message must read
// back as it was given, whatever its neighbours in the call set, and a
// head start still holds its message back.
func TestEnqueueMixedBatch(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	created := time.Date(2026, 5, 6, 7, 8, 9, 123456000, time.UTC)
	msgs := []outbox.Message{
		{ID: "plain", Type: "T", Payload: []byte("p")},
		{ID: "headers", Key: "k", Type: "T", Payload: []byte("h"), Headers: map[string]string{"a": "b"}},
		{ID: "created", Type: "T", Payload: []byte("c"), CreatedAt: created},
		{ID: "both", Key: "k", Type: "T", Payload: []byte("b"), Headers: map[string]string{"c": "d"}, CreatedAt: created},
	}
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, msgs...))
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "alone", Type: "T", Payload: []byte("a")}))
	require.NoError(t, s.Enqueue(ctx, d.DB, &backend.EnqueueOptions{HeadStart: time.Hour},
		outbox.Message{ID: "held", Type: "T", Payload: []byte("x"), Headers: map[string]string{"e": "f"}, CreatedAt: created}))

	for _, m := range append(msgs, outbox.Message{ID: "alone", Type: "T", Payload: []byte("a")}) {
		r, err := s.Get(ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, m.Payload, r.Payload, m.ID)
		require.Equal(t, m.Key, r.Key, m.ID)
		require.Equal(t, m.Headers, r.Headers, m.ID)
		if m.CreatedAt.IsZero() {
			require.WithinDuration(t, time.Now(), r.CreatedAt, time.Hour, "%s: the insert time, on the database clock", m.ID)
		} else {
			require.True(t, created.Equal(r.CreatedAt), "%s: got %v", m.ID, r.CreatedAt)
		}
	}
	held, err := s.Get(ctx, "held")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"e": "f"}, held.Headers)
	require.True(t, created.Equal(held.CreatedAt))

	b, err := s.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	var claimed []string
	for _, r := range b.Records {
		claimed = append(claimed, r.ID)
	}
	require.Equal(t, []string{"plain", "headers", "created", "both", "alone"}, claimed, "the head start holds its message back")
}
