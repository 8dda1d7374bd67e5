package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgerr"
)

// pqError stands for lib/pq's *pq.Error: any error with a SQLState
// method is classified by its code.
type pqError struct{ code string }

func (e *pqError) Error() string    { return "pq: " + e.code }
func (e *pqError) SQLState() string { return e.code }

// TestClassify checks internal/pgerr, which this package classifies its
// errors with, on the errors of pgx and lib/pq (the root module, where
// pgerr lives, imports neither).
func TestClassify(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Severity: "ERROR", Code: code, Message: "m"} }
	tests := []struct {
		name      string
		err       error
		want      pgerr.Class
		transient bool
	}{
		{"nil", nil, pgerr.Other, false},
		{"plain error", errors.New("deadlock detected"), pgerr.Other, false},
		{"unique violation", pg("23505"), pgerr.UniqueViolation, false},
		{"serialization failure", pg("40001"), pgerr.Serialization, true},
		{"deadlock", pg("40P01"), pgerr.Deadlock, true},
		{"deadlock, wrapped", fmt.Errorf("handler: %w", pg("40P01")), pgerr.Deadlock, true},
		{"lock timeout", pg("55P03"), pgerr.LockTimeout, true},
		{"undefined table", pg("42P01"), pgerr.UndefinedTable, false},
		{"aborted transaction", pg("25P02"), pgerr.FailedTransaction, false},
		{"admin shutdown (pg_terminate_backend)", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}, pgerr.Connection, true},
		{"crash shutdown", pg("57P02"), pgerr.Connection, true},
		{"cannot connect now", pg("57P03"), pgerr.Connection, true},
		{"idle in transaction timeout", pg("25P03"), pgerr.Connection, true},
		{"idle session timeout", pg("57P05"), pgerr.Connection, true},
		{"statement completion unknown", pg("40003"), pgerr.Connection, true},
		{"connection failure", pg("08006"), pgerr.Connection, true},
		{"connection does not exist", pg("08003"), pgerr.Connection, true},
		{"query canceled (statement_timeout)", pg("57014"), pgerr.Other, false},
		{"syntax error", pg("42601"), pgerr.Other, false},
		{"check violation", pg("23514"), pgerr.Other, false},
		{"lib/pq deadlock", &pqError{"40P01"}, pgerr.Deadlock, true},
		{"lib/pq unique violation", &pqError{"23505"}, pgerr.UniqueViolation, false},
		{"bad connection", driver.ErrBadConn, pgerr.Connection, true},
		{"connection done", sql.ErrConnDone, pgerr.Connection, true},
		{"EOF", fmt.Errorf("read: %w", io.EOF), pgerr.Connection, true},
		{"unexpected EOF", io.ErrUnexpectedEOF, pgerr.Connection, true},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, pgerr.Connection, true},
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), pgerr.Connection, true},
		{"broken pipe", syscall.EPIPE, pgerr.Connection, true},
		{"canceled", context.Canceled, pgerr.Other, false},
		{"deadline", fmt.Errorf("timeout: %w", context.DeadlineExceeded), pgerr.Other, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want.String(), pgerr.Classify(tc.err).String())
			require.Equal(t, tc.transient, pgerr.IsTransient(tc.err))
		})
	}
}
