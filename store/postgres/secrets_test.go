package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// missingDB is a database that does not exist: every connect fails
// after the DSN parsed, and says why.
const missingDB = "ort_no_such_database"

// hostileDSN is a DSN with a hostile password, and what must become of
// it.
type hostileDSN struct {
	name, dsn, password string
	// public is the DSN without its password: a password that repeats a
	// part of it (the user, the host) cannot be told from that part.
	public string
	// refused: the DSN does not parse unambiguously.
	refused bool
}

// hostileDSNs are every password of testutil.HostilePasswords in every
// form of DSN, on missingDB, and issue 37's DSN with a "/" before the
// password, which pgx reads as host "postgres" and database
// "/S3cret-pg-PW@…".
func hostileDSNs(t *testing.T) []hostileDSN {
	server, err := pgx.ParseConfig(pgtest.ServerDSN(t))
	require.NoError(t, err)
	// pgx's errors name the address it connected to: 127.0.0.1 for a
	// container reached as localhost. Written so, the DSN shows it too,
	// and a password "127.0.0.1" can be told from it (otherwise the
	// whole error is withheld, which is safe, but shows no database).
	addr := server.Host
	if addr == "localhost" {
		addr = "127.0.0.1"
	}
	host := fmt.Sprintf("%s:%d", addr, server.Port)
	out := []hostileDSN{{
		name: "issue 37: a / before the password", password: "/S3cret-pg-PW@", refused: true,
		dsn:    "postgres://" + server.User + ":/S3cret-pg-PW@" + host + "/" + missingDB + "?sslmode=disable",
		public: "postgres://" + server.User + ":@" + host + "/" + missingDB + "?sslmode=disable",
	}}
	for _, f := range testutil.PostgresDSNForms(server.User, host, missingDB) {
		for _, pw := range testutil.HostilePasswords {
			out = append(out, hostileDSN{name: f.Name + ", " + pw.Name, dsn: f.DSN(pw.Password), password: pw.Password,
				public: f.DSN(""), refused: f.Refused(pw.Password)})
		}
	}
	return out
}

// requireNoPassword checks that text shows no piece of c's password,
// and that nothing was cut out of it in place.
func requireNoPassword(t *testing.T, c hostileDSN, text string) {
	t.Helper()
	testutil.RequireNoPasswordFragments(t, text, c.password, c.public)
	require.NotContains(t, text, "[redacted]", "%s: nothing is cut out of a text in place:\n%s", c.name, text)
}

// TestListenerNeverShowsThePassword (issue 37): NewListener took a DSN
// that pgx reads otherwise than meant, and then logged the password, as
// the database pgx took it for, at every reconnect. A DSN that does not
// parse unambiguously is refused with an error that says how to write
// it; one that does has its reconnects logged without a piece of the
// password, the user and database as written.
func TestListenerNeverShowsThePassword(t *testing.T) {
	for _, c := range hostileDSNs(t) {
		logs := &outboxtest.LogBuffer{}
		l, err := postgres.NewListener(c.dsn, postgres.ListenerOptions{
			Table: testTable, Logger: slog.New(slog.NewTextHandler(logs, nil)), MinRetry: time.Millisecond, MaxRetry: 2 * time.Millisecond,
		})
		if c.refused {
			require.Error(t, err, "%s: NewListener must refuse it", c.name)
			requireNoPassword(t, c, err.Error())
			require.ErrorContains(t, err, "postgres listener: the DSN does not parse unambiguously", c.name)
			continue
		}
		require.NoError(t, err, c.name)
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx, func() {}) }()
		outboxtest.Eventually(t, c.name+": two failed reconnects are logged", func() bool {
			return strings.Count(logs.String(), "reconnecting") >= 2
		})
		stop()
		require.NoError(t, <-done)
		requireNoPassword(t, c, logs.String())
		require.Contains(t, logs.String(), "database="+missingDB, "%s: the database as written", c.name)
	}
}

// TestStoreErrorsNeverShowThePassword (issue 37): a service opens its
// pool itself, so the store never sees the DSN; but pgx's errors about a
// DSN it read otherwise than meant hold what it took for the host or
// the database ("lookup ss#w0rd@127.0.0.1: no such host" for the
// password p@ss#w0rd), and the store passed them on. Every store call
// and the worker's log of a failed claim now show no piece of the
// password, whatever the DSN.
func TestStoreErrorsNeverShowThePassword(t *testing.T) {
	for _, c := range hostileDSNs(t) {
		db, err := sql.Open("pgx", c.dsn) // pgx parses at the first connect
		require.NoError(t, err, c.name)
		s, err := postgres.New(db, postgres.Options{Table: testTable})
		require.NoError(t, err, c.name)
		ctx, cancel := context.WithTimeout(context.Background(), outboxtest.WaitTimeout)
		_, claimErr := s.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 1, LeaseFor: time.Minute})
		_, statsErr := s.Stats(ctx)
		for _, err := range []error{
			s.Migrate(ctx),
			s.Enqueue(ctx, db, nil, outbox.Message{ID: "m-1", Type: "T"}),
			claimErr, statsErr,
		} {
			require.Error(t, err, c.name)
			require.False(t, errors.Is(err, context.DeadlineExceeded), "%s: %v", c.name, err)
			requireNoPassword(t, c, err.Error())
		}
		cancel()
		if c.refused { // the worker's log, for the DSNs pgx reads otherwise than meant
			logs := &outboxtest.LogBuffer{}
			w, err := outbox.NewWorker(s, outboxtest.NewRecorder(), outbox.WorkerOptions{
				PollInterval: outbox.MinPollInterval, Logger: slog.New(slog.NewTextHandler(logs, nil))})
			require.NoError(t, err)
			runCtx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(runCtx) }()
			outboxtest.Eventually(t, c.name+": a failed claim is logged", func() bool {
				return strings.Contains(logs.String(), "claim failed")
			})
			stop()
			require.NoError(t, <-done)
			requireNoPassword(t, c, logs.String())
		}
		require.NoError(t, db.Close())
	}
}
