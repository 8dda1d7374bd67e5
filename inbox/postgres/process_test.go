package postgres_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/postgres"
	"github.com/outboxrelay/outboxrelay/internal/pgtest"
)

func newInbox(t testing.TB, db *sql.DB, consumer string) *postgres.Inbox {
	t.Helper()
	ib, err := postgres.New(db, postgres.Options{Consumer: consumer, Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, ib.Migrate(context.Background()))
	return ib
}

// events records an inbox's events.
type events struct {
	all chan inbox.Event
}

func newEvents() *events { return &events{all: make(chan inbox.Event, 100)} }

func (e *events) Observe(_ context.Context, ev inbox.Event) { e.all <- ev }

// drain returns the events observed so far.
func (e *events) drain() []inbox.Event {
	var out []inbox.Event
	for {
		select {
		case ev := <-e.all:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func contains(t testing.TB, ib *postgres.Inbox, id string) bool {
	t.Helper()
	ok, err := ib.Contains(context.Background(), id)
	require.NoError(t, err)
	return ok
}

func createEffects(t testing.TB, db *sql.DB) {
	t.Helper()
	_, err := db.ExecContext(context.Background(), "CREATE TABLE effects (k text PRIMARY KEY, n int NOT NULL)")
	require.NoError(t, err)
}

func effect(t testing.TB, db *sql.DB, k string) int {
	t.Helper()
	var n int
	err := db.QueryRowContext(context.Background(), "SELECT n FROM effects WHERE k = $1", k).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0
	}
	require.NoError(t, err)
	return n
}

func addEffect(ctx context.Context, tx *sql.Tx, k string) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO effects (k, n) VALUES ($1, 1) ON CONFLICT (k) DO UPDATE SET n = effects.n + 1", k)
	return err
}

func TestProcessOnceThenDuplicate(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	createEffects(t, d.DB)
	ib := newInbox(t, d.DB, "activity")
	calls := 0
	h := func(ctx context.Context, tx *sql.Tx) error { calls++; return addEffect(ctx, tx, "m1") }
	res, err := ib.Process(ctx, "m1", h)
	require.NoError(t, err)
	require.Equal(t, inbox.Processed, res)
	res, err = ib.Process(ctx, "m1", h)
	require.NoError(t, err)
	require.Equal(t, inbox.Duplicate, res)
	require.Equal(t, 1, calls)
	require.Equal(t, 1, effect(t, d.DB, "m1"))

	boom := errors.New("boom")
	res, err = ib.Process(ctx, "m2", func(ctx context.Context, tx *sql.Tx) error {
		if err := addEffect(ctx, tx, "m2"); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Zero(t, res)
	require.False(t, contains(t, ib, "m2"))
	require.Zero(t, effect(t, d.DB, "m2"), "the handler's writes rolled back")
}

// TestOnAPgxPool: a service on pgxpool hands the inbox a *sql.DB over
// its pool (stdlib.OpenDBFromPool).
func TestOnAPgxPool(t *testing.T) {
	d := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(context.Background(), d.DSN)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	ib := newInbox(t, db, "activity")
	for _, want := range []inbox.Result{inbox.Processed, inbox.Duplicate} {
		res, err := ib.Process(context.Background(), "m1", func(context.Context, *sql.Tx) error { return nil })
		require.NoError(t, err)
		require.Equal(t, want, res)
	}
}

func TestNilHandler(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ib := newInbox(t, d.DB, "c")
	_, err := ib.Process(context.Background(), "m", nil)
	require.ErrorContains(t, err, "handler is nil")
}

// TestHandlerMustNotEndTheTransaction: a handler that calls Rollback or
// Commit itself gets an error. After its Rollback nothing is recorded;
// after its Commit the record and its writes are committed (that is what
// it asked for), and a redelivery is a Duplicate.
func TestHandlerMustNotEndTheTransaction(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ib := newInbox(t, d.DB, "c")
	ctx := context.Background()
	_, err := ib.Process(ctx, "m-1", func(_ context.Context, tx *sql.Tx) error { return tx.Rollback() })
	require.ErrorContains(t, err, "the handler ended the transaction itself")
	require.False(t, contains(t, ib, "m-1"))

	_, err = ib.Process(ctx, "m-2", func(_ context.Context, tx *sql.Tx) error { return tx.Commit() })
	require.ErrorContains(t, err, "the handler ended the transaction itself")
	res, err := ib.Process(ctx, "m-2", func(context.Context, *sql.Tx) error { return nil })
	require.NoError(t, err)
	require.Equal(t, inbox.Duplicate, res)
}

// TestHandlerEndingTheTransactionInSQL: a handler that ends the
// transaction with a ROLLBACK or COMMIT statement has run its later
// statements outside it: Process says so instead of reporting the
// message processed.
func TestHandlerEndingTheTransactionInSQL(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	createEffects(t, d.DB)
	ib := newInbox(t, d.DB, "c")
	res, err := ib.Process(ctx, "m-1", func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "ROLLBACK"); err != nil {
			return err
		}
		return addEffect(ctx, tx, "m-1")
	})
	require.ErrorContains(t, err, "the message's record is no longer in the handler's transaction")
	require.Zero(t, res)
	require.False(t, contains(t, ib, "m-1"))

	// After a COMMIT statement the record and the writes before it are
	// committed, and the error says the handler broke the contract; a
	// redelivery finds the record.
	res, err = ib.Process(ctx, "m-2", func(ctx context.Context, tx *sql.Tx) error {
		if err := addEffect(ctx, tx, "m-2"); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "COMMIT")
		return err
	})
	require.ErrorContains(t, err, "by a ROLLBACK or COMMIT statement")
	require.Zero(t, res)
	res, err = ib.Process(ctx, "m-2", func(ctx context.Context, tx *sql.Tx) error { return addEffect(ctx, tx, "m-2") })
	require.NoError(t, err)
	require.Equal(t, inbox.Duplicate, res)
	require.Equal(t, 1, effect(t, d.DB, "m-2"))
}

// TestSwallowedErrorIsCaught: a handler that swallows a statement's
// error (PostgreSQL has aborted the transaction) and returns nil gets an
// error, and nothing is recorded.
func TestSwallowedErrorIsCaught(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	obs := newEvents()
	ib, err := postgres.New(d.DB, postgres.Options{Consumer: "c", Observer: obs, Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, ib.Migrate(ctx))
	calls := 0
	res, err := ib.Process(ctx, "m-1", func(ctx context.Context, tx *sql.Tx) error {
		calls++
		_, _ = tx.ExecContext(ctx, "SELECT 1/0")
		return nil
	})
	require.ErrorContains(t, err, "a statement of the handler's transaction failed and the handler did not return its error")
	require.Zero(t, res)
	require.Equal(t, 1, calls, "not retried")
	require.False(t, contains(t, ib, "m-1"))
	require.Equal(t, []inbox.EventKind{inbox.EventHandlerFailed}, kinds(obs.drain()))
}

// TestUniqueViolationIsTheHandlers: a handler's unique violation is its
// error: returned once, not retried, and nothing is recorded.
func TestUniqueViolationIsTheHandlers(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	createEffects(t, d.DB)
	ib := newInbox(t, d.DB, "c")
	calls := 0
	_, err := ib.Process(ctx, "m-1", func(ctx context.Context, tx *sql.Tx) error {
		calls++
		_, err := tx.ExecContext(ctx, "INSERT INTO effects (k, n) VALUES ('x', 1), ('x', 2)")
		return err
	})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23505", pgErr.Code)
	require.Equal(t, 1, calls)
	require.False(t, contains(t, ib, "m-1"))
}

func kinds(evs []inbox.Event) []inbox.EventKind {
	out := make([]inbox.EventKind, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

// TestConflictsAreBounded: a handler that keeps returning the database's
// deadlock is called MaxAttempts times, and then the deadlock is returned.
func TestConflictsAreBounded(t *testing.T) {
	d := pgtest.NewDatabase(t)
	obs := newEvents()
	ib, err := postgres.New(d.DB, postgres.Options{Consumer: "c", MaxAttempts: 3, Observer: obs, Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, ib.Migrate(context.Background()))
	calls := 0
	deadlock := &pgconn.PgError{Severity: "ERROR", Code: "40P01", Message: "deadlock detected"}
	_, err = ib.Process(context.Background(), "m", func(context.Context, *sql.Tx) error {
		calls++
		return deadlock
	})
	require.ErrorIs(t, err, deadlock)
	require.ErrorContains(t, err, "gave up after 3 transactions")
	require.Equal(t, 3, calls)
	evs := obs.drain()
	require.Equal(t, []inbox.EventKind{inbox.EventConflict, inbox.EventConflict, inbox.EventFailed}, kinds(evs))
	require.Equal(t, 3, evs[2].Attempts)

	// An error that is not the database's is the handler's, not retried,
	// whatever it says.
	calls = 0
	_, err = ib.Process(context.Background(), "m", func(context.Context, *sql.Tx) error {
		calls++
		return errors.New("ERROR: deadlock detected (SQLSTATE 40P01)")
	})
	require.Error(t, err)
	require.Equal(t, 1, calls)
	require.Equal(t, []inbox.EventKind{inbox.EventHandlerFailed}, kinds(obs.drain()))
}

// TestLockTimeoutIsRetried: a handler whose statement waits longer than
// lock_timeout for a row another transaction holds gets 55P03, which
// rolls its transaction back; Process begins again, and once the row is
// free the message is processed once.
func TestLockTimeoutIsRetried(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	createEffects(t, d.DB)
	_, err := d.DB.ExecContext(ctx, "INSERT INTO effects VALUES ('held', 0)")
	require.NoError(t, err)
	holder, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback() }()
	_, err = holder.ExecContext(ctx, "UPDATE effects SET n = n WHERE k = 'held'")
	require.NoError(t, err)

	// The holder lets go when the inbox reports the first conflict.
	conflicted := make(chan struct{})
	obs := inbox.ObserverFunc(func(_ context.Context, e inbox.Event) {
		if e.Kind == inbox.EventConflict && e.Attempts == 1 {
			close(conflicted)
		}
	})
	ib, err := postgres.New(d.Open(t), postgres.Options{Consumer: "c", Observer: obs, Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, ib.Migrate(ctx))
	released := make(chan error, 1)
	go func() {
		<-conflicted
		released <- holder.Rollback()
	}()
	calls := 0
	res, err := ib.Process(ctx, "m-1", func(ctx context.Context, tx *sql.Tx) error {
		calls++
		if _, err := tx.ExecContext(ctx, "SET LOCAL lock_timeout = '100ms'"); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE effects SET n = n + 1 WHERE k = 'held'")
		return err
	})
	require.NoError(t, err)
	require.Equal(t, inbox.Processed, res)
	require.NoError(t, <-released)
	require.GreaterOrEqual(t, calls, 2)
	require.Equal(t, 1, effect(t, d.DB, "held"))
}

// TestKilledConnectionIsRetried: the handler's connection is terminated
// under it (pg_terminate_backend, as a failover or a DBA would); Process
// begins again on a fresh connection and the effect is there once.
func TestKilledConnectionIsRetried(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	createEffects(t, d.DB)
	ib := newInbox(t, d.Open(t), "c")
	calls := 0
	res, err := ib.Process(ctx, "m", func(ctx context.Context, tx *sql.Tx) error {
		calls++
		if calls == 1 {
			killed, err := d.KillConnections(ctx)
			if err != nil {
				return fmt.Errorf("kill: %v", err) // not a connection error: fails the test below
			}
			if killed == 0 {
				return errors.New("no connection killed")
			}
		}
		return addEffect(ctx, tx, "m")
	})
	require.NoError(t, err)
	require.Equal(t, inbox.Processed, res)
	require.Equal(t, 2, calls)
	require.Equal(t, 1, effect(t, d.Open(t), "m"))
}

// TestCanceledDuringHandler: when ctx ends while the handler runs, the
// handler's error (ctx's) is returned, nothing is recorded, and a later
// delivery processes the message.
func TestCanceledDuringHandler(t *testing.T) {
	d := pgtest.NewDatabase(t)
	createEffects(t, d.DB)
	ib := newInbox(t, d.DB, "c")
	ctx, cancel := context.WithCancel(context.Background())
	res, err := ib.Process(ctx, "m", func(ctx context.Context, tx *sql.Tx) error {
		if err := addEffect(ctx, tx, "m"); err != nil {
			return err
		}
		cancel()
		_, err := tx.ExecContext(ctx, "SELECT pg_sleep(10)")
		return err
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, res)
	require.False(t, contains(t, ib, "m"))
	require.Zero(t, effect(t, d.DB, "m"))
	res, err = ib.Process(context.Background(), "m", func(ctx context.Context, tx *sql.Tx) error { return addEffect(ctx, tx, "m") })
	require.NoError(t, err)
	require.Equal(t, inbox.Processed, res)
}

func TestPanicIsLogged(t *testing.T) {
	d := pgtest.NewDatabase(t)
	var buf bytes.Buffer
	ib, err := postgres.New(d.DB, postgres.Options{Consumer: "c", Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	require.NoError(t, err)
	require.NoError(t, ib.Migrate(context.Background()))
	_, err = ib.Process(context.Background(), "evt-1", func(context.Context, *sql.Tx) error { panic(strings.Repeat("p", 10000)) })
	var pe *inbox.PanicError
	require.ErrorAs(t, err, &pe)
	var line map[string]any
	require.NoError(t, json.Unmarshal(bytes.SplitN(buf.Bytes(), []byte("\n"), 2)[0], &line))
	require.Equal(t, "ERROR", line["level"])
	require.Equal(t, "evt-1", line["event_id"])
	require.Equal(t, "c", line["consumer"])
	require.LessOrEqual(t, len(line["panic"].(string)), 600, "the panic value is truncated")
	require.Contains(t, line["stack"], "process_test.go")
	require.False(t, contains(t, ib, "evt-1"))
}

func TestMissingTableSaysMigrate(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ib, err := postgres.New(d.DB, postgres.Options{Consumer: "c"})
	require.NoError(t, err)
	_, err = ib.Process(context.Background(), "m", func(context.Context, *sql.Tx) error { return nil })
	require.ErrorContains(t, err, "run Inbox.Migrate")
	_, err = ib.Contains(context.Background(), "m")
	require.ErrorContains(t, err, "run Inbox.Migrate")
	_, err = ib.Purge(context.Background(), time.Hour, 10)
	require.ErrorContains(t, err, "run Inbox.Migrate")
}

// TestErrorsCarryNoSecrets: an unreachable server's error names no
// password.
func TestErrorsCarryNoSecrets(t *testing.T) {
	db, err := sql.Open("pgx", "postgres://svc:Sup3rSecret@127.0.0.1:1/x?connect_timeout=1")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	var logs bytes.Buffer
	ib, err := postgres.New(db, postgres.Options{Consumer: "c", MaxAttempts: 2, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	for _, err := range []error{
		func() error {
			_, err := ib.Process(context.Background(), "m", func(context.Context, *sql.Tx) error { return nil })
			return err
		}(),
		ib.Migrate(context.Background()),
		func() error { _, err := ib.Purge(context.Background(), time.Hour, 1); return err }(),
		func() error { _, err := ib.Contains(context.Background(), "m"); return err }(),
	} {
		require.Error(t, err)
		require.NotContains(t, err.Error(), "Sup3rSecret")
		require.NotContains(t, fmt.Sprintf("%+v", err), "Sup3rSecret")
	}
	require.NotContains(t, logs.String(), "Sup3rSecret")
}
