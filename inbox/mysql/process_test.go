package mysql_test

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

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/mysql"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

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

func TestNilHandler(t *testing.T) {
	d := testutil.NewDatabase(t)
	ib := newInbox(t, d.DB, "c")
	_, err := ib.Process(context.Background(), "m", nil)
	require.ErrorContains(t, err, "handler is nil")
}

func TestHandlerMustNotEndTheTransaction(t *testing.T) {
	d := testutil.NewDatabase(t)
	ib := newInbox(t, d.DB, "c")
	_, err := ib.Process(context.Background(), "m", func(_ context.Context, tx *sql.Tx) error { return tx.Rollback() })
	require.ErrorContains(t, err, "the handler ended the transaction itself")
	ok, err := ib.Contains(context.Background(), "m")
	require.NoError(t, err)
	require.False(t, ok)
}

// TestConflictsAreBounded: a handler that keeps returning the database's
// deadlock is called MaxAttempts times, and then the deadlock is returned.
func TestConflictsAreBounded(t *testing.T) {
	d := testutil.NewDatabase(t)
	obs := newEvents()
	ib, err := mysql.New(d.DB, mysql.Options{Consumer: "c", MaxAttempts: 3, Observer: obs, Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, ib.Migrate(context.Background()))
	calls := 0
	deadlock := &mysqldrv.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}
	_, err = ib.Process(context.Background(), "m", func(context.Context, *sql.Tx) error {
		calls++
		return deadlock
	})
	require.ErrorIs(t, err, deadlock)
	require.ErrorContains(t, err, "gave up after 3 transactions")
	require.Equal(t, 3, calls)
	evs := obs.drain()
	require.Len(t, evs, 3)
	require.Equal(t, inbox.EventConflict, evs[0].Kind)
	require.Equal(t, inbox.EventConflict, evs[1].Kind)
	require.Equal(t, inbox.EventFailed, evs[2].Kind)
	require.Equal(t, 3, evs[2].Attempts)

	// An error that is not the database's is the handler's, not retried,
	// whatever it looks like.
	calls = 0
	_, err = ib.Process(context.Background(), "m", func(context.Context, *sql.Tx) error {
		calls++
		return errors.New("Deadlock found when trying to get lock")
	})
	require.Error(t, err)
	require.Equal(t, 1, calls)
	require.Equal(t, inbox.EventHandlerFailed, obs.drain()[0].Kind)
}

// TestKilledConnectionIsRetried: the handler's connection is killed
// under it (as a failover or a DBA would); Process begins again on a
// fresh connection and the effect is there once.
func TestKilledConnectionIsRetried(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	_, err := d.DB.ExecContext(ctx, "CREATE TABLE effects (k VARCHAR(16) PRIMARY KEY, n INT NOT NULL)")
	require.NoError(t, err)
	_, err = d.DB.ExecContext(ctx, "INSERT INTO effects VALUES ('m', 0)")
	require.NoError(t, err)
	ib := newInbox(t, d.Open(t), "c")
	calls := 0
	res, err := ib.Process(ctx, "m", func(ctx context.Context, tx *sql.Tx) error {
		calls++
		if calls == 1 {
			killed, err := d.KillConnections(ctx)
			require.NoError(t, err)
			require.NotZero(t, killed)
		}
		_, err := tx.ExecContext(ctx, "UPDATE effects SET n = n + 1 WHERE k = 'm'")
		return err
	})
	require.NoError(t, err)
	require.Equal(t, inbox.Processed, res)
	require.Equal(t, 2, calls)
	var n int
	require.NoError(t, d.Open(t).QueryRowContext(ctx, "SELECT n FROM effects").Scan(&n))
	require.Equal(t, 1, n)
}

func TestPanicIsLogged(t *testing.T) {
	d := testutil.NewDatabase(t)
	var buf bytes.Buffer
	ib, err := mysql.New(d.DB, mysql.Options{Consumer: "c", Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
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
}

func TestMissingTableSaysMigrate(t *testing.T) {
	d := testutil.NewDatabase(t)
	ib, err := mysql.New(d.DB, mysql.Options{Consumer: "c"})
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
	db, err := sql.Open("mysql", "svc:Sup3rSecret@tcp(127.0.0.1:1)/x?timeout=1s")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ib, err := mysql.New(db, mysql.Options{Consumer: "c", MaxAttempts: 2})
	require.NoError(t, err)
	for _, err := range []error{
		func() error {
			_, err := ib.Process(context.Background(), "m", func(context.Context, *sql.Tx) error { return nil })
			return err
		}(),
		ib.Migrate(context.Background()),
		func() error { _, err := ib.Purge(context.Background(), time.Hour, 1); return err }(),
	} {
		require.Error(t, err)
		require.NotContains(t, err.Error(), "Sup3rSecret")
		require.NotContains(t, fmt.Sprintf("%+v", err), "Sup3rSecret")
	}
}
