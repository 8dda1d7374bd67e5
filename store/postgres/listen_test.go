package postgres_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// enqueueCommitted writes ms in a transaction of its own.
func enqueueCommitted(t *testing.T, d *pgtest.Database, s *postgres.Store, ms ...outbox.Message) {
	t.Helper()
	ctx := context.Background()
	tx, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, s.Enqueue(ctx, tx, nil, ms...))
	require.NoError(t, tx.Commit())
}

// TestListenerWakesTheWorker: with a poll interval of an hour, only the
// notification of a commit can make the worker deliver; and after the
// listener's connection is killed, it reconnects and does so again. No
// goroutine outlives the stopped worker and listener. A Listener from a
// DSN and one from the Store (which names the channel itself) alike.
func TestListenerWakesTheWorker(t *testing.T) {
	t.Run("from the DSN", func(t *testing.T) {
		listenerWakesTheWorker(t, func(d *pgtest.Database, _ *postgres.Store, opts postgres.ListenerOptions) (*postgres.Listener, error) {
			opts.Table = testTable
			return postgres.NewListener(d.DSN, opts)
		})
	})
	t.Run("from the store", func(t *testing.T) {
		listenerWakesTheWorker(t, func(_ *pgtest.Database, s *postgres.Store, opts postgres.ListenerOptions) (*postgres.Listener, error) {
			return s.Listener(opts)
		})
	})
}

func listenerWakesTheWorker(t *testing.T, newListener func(*pgtest.Database, *postgres.Store, postgres.ListenerOptions) (*postgres.Listener, error)) {
	d := pgtest.NewDatabase(t)
	s := newStore(t, d.DB)
	ctx := context.Background()
	_, err := s.LastSeq(ctx) // open the pool's connection before the baseline
	require.NoError(t, err)
	writer := d.Open(t) // for the writes after the kill
	leaks := goleak.IgnoreCurrent()

	rec := outboxtest.NewRecorder()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := outbox.NewWorker(s, rec, outbox.WorkerOptions{PollInterval: time.Hour, Logger: quiet})
	require.NoError(t, err)
	logs := &outboxtest.LogBuffer{}
	l, err := newListener(d, s, postgres.ListenerOptions{
		Logger: slog.New(slog.NewTextHandler(logs, nil)), MinRetry: 10 * time.Millisecond,
	})
	require.NoError(t, err)
	var notified atomic.Int64
	runCtx, stop := context.WithCancel(ctx)
	workerDone, listenerDone := make(chan error, 1), make(chan error, 1)
	go func() { workerDone <- w.Run(runCtx) }()
	go func() {
		listenerDone <- l.Run(runCtx, func() { notified.Add(1); w.Notify() })
	}()
	stopped := false
	stopAll := func() {
		if stopped {
			return
		}
		stopped = true
		stop()
		require.NoError(t, <-workerDone)
		require.NoError(t, <-listenerDone)
	}
	t.Cleanup(stopAll)

	// The listener is up once it has called back after its connect.
	outboxtest.Eventually(t, "the listener connects", func() bool { return notified.Load() > 0 })
	enqueueCommitted(t, d, s, outbox.Message{ID: "n-1", Type: "T"})
	outboxtest.Eventually(t, "the commit wakes the worker", func() bool { return rec.Count("n-1") == 1 })

	before := notified.Load()
	killed, err := d.KillConnections(ctx)
	require.NoError(t, err)
	require.Positive(t, killed)
	outboxtest.Eventually(t, "the listener reconnects", func() bool { return notified.Load() > before })
	// The store's pool lost its connections too: the first statements on
	// them may fail; the worker's next round (the next notification)
	// retries. Keep committing until one is delivered.
	outboxtest.Eventually(t, "a commit after the kill wakes the worker", func() bool {
		id := "after-kill-" + time.Now().Format("150405.000000000")
		tx, err := writer.BeginTx(ctx, nil)
		if err != nil {
			return false
		}
		if err := s.Enqueue(ctx, tx, nil, outbox.Message{ID: id, Type: "T"}); err != nil {
			_ = tx.Rollback()
			return false
		}
		if tx.Commit() != nil {
			return false
		}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if rec.Len() > 1 {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return rec.Len() > 1
	})
	require.Contains(t, logs.String(), "outbox listener lost its connection")
	require.NotContains(t, logs.String(), "password")

	stopAll()
	goleak.VerifyNone(t, leaks)
}

// TestListenerRollbackDoesNotNotify: a rolled-back enqueue sends nothing;
// DisableNotify sends nothing either.
func TestListenerRollbackDoesNotNotify(t *testing.T) {
	d := pgtest.NewDatabase(t)
	s := newStore(t, d.DB)
	quiet, err := postgres.New(d.DB, postgres.Options{Table: testTable, DisableNotify: true})
	require.NoError(t, err)
	ctx := context.Background()
	l, err := postgres.NewListener(d.DSN, postgres.ListenerOptions{Table: testTable})
	require.NoError(t, err)
	got := make(chan struct{}, 100)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx, func() { got <- struct{}{} }) }()
	defer func() { stop(); require.NoError(t, <-done) }()
	select {
	case <-got: // the call after connecting
	case <-time.After(outboxtest.WaitTimeout):
		t.Fatal("the listener did not connect")
	}

	tx, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, s.Enqueue(ctx, tx, nil, outbox.Message{ID: "rolled-back", Type: "T"}))
	require.NoError(t, tx.Rollback())
	enqueueCommitted(t, d, quiet, outbox.Message{ID: "quiet", Type: "T"})
	// A committed, notifying enqueue marks the end: whatever came before
	// it would have arrived first (notifications arrive in commit order).
	enqueueCommitted(t, d, s, outbox.Message{ID: "loud", Type: "T"})
	select {
	case <-got:
	case <-time.After(outboxtest.WaitTimeout):
		t.Fatal("no notification of the committed enqueue")
	}
	require.Empty(t, got, "only the committed, notifying enqueue notified")
}

func TestListenerRefusesBadInput(t *testing.T) {
	_, err := postgres.NewListener("postgres://u:hunter2@[::1", postgres.ListenerOptions{})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "hunter2")
	_, err = postgres.NewListener("postgres://u@localhost/db", postgres.ListenerOptions{Table: "Bad-Name"})
	require.ErrorContains(t, err, "Table")
}

// TestTheStoresListenerTakesItsName: a Listener from the Store listens on
// the Store's channel; a Table given to it that is not the Store's is
// refused, naming both, rather than listening where no Enqueue notifies.
func TestTheStoresListenerTakesItsName(t *testing.T) {
	d := pgtest.NewDatabase(t)
	s := newStore(t, d.DB)
	_, err := s.Listener(postgres.ListenerOptions{Table: "orders_outbox"})
	require.ErrorContains(t, err, `Table "orders_outbox": the store's table is "`+testTable+`"`)
	_, err = s.Listener(postgres.ListenerOptions{Table: testTable})
	require.NoError(t, err, "the Store's own table, given again, agrees")
}

// With NotifyInterval, Enqueue notifies at most once per interval from a
// Store; without it, every Enqueue notifies. Counted on a connection of
// the test's that listens: a marker notified after the writes arrives
// after every notification of theirs (PostgreSQL delivers them in commit
// order).
func TestNotifyInterval(t *testing.T) {
	t.Parallel()
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, d.DSN)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `LISTEN "`+testTable+`"`)
	require.NoError(t, err)
	count := func(s *postgres.Store, n int) int {
		t.Helper()
		for i := range n {
			enqueueCommitted(t, d, s, outbox.Message{ID: fmt.Sprintf("%p-%d", s, i), Type: "T"})
		}
		_, err := d.DB.ExecContext(ctx, `SELECT pg_notify($1, 'marker')`, testTable)
		require.NoError(t, err)
		got := 0
		for {
			waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			nt, err := conn.WaitForNotification(waitCtx)
			cancel()
			require.NoError(t, err)
			if nt.Payload == "marker" {
				return got
			}
			got++
		}
	}
	every, err := postgres.New(d.DB, postgres.Options{Table: testTable})
	require.NoError(t, err)
	require.NoError(t, every.Migrate(ctx))
	require.Equal(t, 3, count(every, 3), "every Enqueue notifies by default")
	limited, err := postgres.New(d.DB, postgres.Options{Table: testTable, NotifyInterval: time.Minute})
	require.NoError(t, err)
	require.Equal(t, 1, count(limited, 3), "one notification a minute")
	_, err = postgres.New(d.DB, postgres.Options{Table: testTable, NotifyInterval: -time.Second})
	require.ErrorContains(t, err, "NotifyInterval")
}
