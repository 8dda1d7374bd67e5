package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// TestClassify: each SQLSTATE and failure the store tells apart, once.
func TestClassify(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: code, Message: "m"}) }
	cases := []struct {
		name      string
		err       error
		want      postgres.Class
		transient bool
	}{
		{"nil", nil, postgres.ClassOther, false},
		{"unique violation", pg("23505"), postgres.ClassDuplicate, false},
		{"serialization failure", pg("40001"), postgres.ClassSerialization, true},
		{"deadlock", pg("40P01"), postgres.ClassDeadlock, true},
		{"lock timeout", pg("55P03"), postgres.ClassLockTimeout, true},
		{"admin shutdown", pg("57P01"), postgres.ClassConnection, true},
		{"crash shutdown", pg("57P02"), postgres.ClassConnection, true},
		{"cannot connect now", pg("57P03"), postgres.ClassConnection, true},
		{"connection failure", pg("08006"), postgres.ClassConnection, true},
		{"connection does not exist", pg("08003"), postgres.ClassConnection, true},
		{"undefined table", pg("42P01"), postgres.ClassNoTable, false},
		{"syntax error", pg("42601"), postgres.ClassOther, false},
		{"check violation", pg("23514"), postgres.ClassOther, false},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), postgres.ClassConnection, true},
		{"network", &net.OpError{Op: "read", Err: errors.New("connection reset")}, postgres.ClassConnection, true},
		{"cancelled", context.Canceled, postgres.ClassOther, false},
		{"other", errors.New("boom"), postgres.ClassOther, false},
	}
	for _, c := range cases {
		require.Equal(t, c.want, postgres.Classify(c.err), c.name)
		require.Equal(t, c.transient, postgres.IsTransient(c.err), c.name)
		require.Equal(t, c.want == postgres.ClassDuplicate, postgres.IsDuplicateKey(c.err), c.name)
	}
}

// TestClassifyRealErrors: the classes of errors the server really
// returns.
func TestClassifyRealErrors(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	_, err := d.DB.ExecContext(ctx, "CREATE TABLE t (id int PRIMARY KEY)")
	require.NoError(t, err)
	_, err = d.DB.ExecContext(ctx, "INSERT INTO t VALUES (1)")
	require.NoError(t, err)

	_, err = d.DB.ExecContext(ctx, "INSERT INTO t VALUES (1)")
	require.Equal(t, postgres.ClassDuplicate, postgres.Classify(err))
	_, err = d.DB.ExecContext(ctx, "SELECT * FROM no_such_table")
	require.Equal(t, postgres.ClassNoTable, postgres.Classify(err))

	// A lock timeout: a row held by another transaction.
	holder, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback() }()
	_, err = holder.ExecContext(ctx, "UPDATE t SET id = 1 WHERE id = 1")
	require.NoError(t, err)
	waiter, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = waiter.Rollback() }()
	_, err = waiter.ExecContext(ctx, "SET LOCAL lock_timeout = '50ms'")
	require.NoError(t, err)
	_, err = waiter.ExecContext(ctx, "UPDATE t SET id = 1 WHERE id = 1")
	require.Equal(t, postgres.ClassLockTimeout, postgres.Classify(err), "%v", err)

	// A terminated session.
	conn, err := d.DB.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	var pid int
	require.NoError(t, conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	other := d.Open(t)
	_, err = other.ExecContext(ctx, "SELECT pg_terminate_backend($1)", pid)
	require.NoError(t, err)
	var one int
	deadline := time.Now().Add(10 * time.Second)
	for err = conn.QueryRowContext(ctx, "SELECT 1").Scan(&one); err == nil && time.Now().Before(deadline); err = conn.QueryRowContext(ctx, "SELECT 1").Scan(&one) {
		time.Sleep(10 * time.Millisecond) // the termination is asynchronous
	}
	require.True(t, postgres.IsTransient(err), "%v", err)
	require.False(t, errors.Is(err, sql.ErrNoRows))
}
