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
)

// pqError stands for lib/pq's *pq.Error: any error with a SQLState
// method is classified by its code.
type pqError struct{ code string }

func (e *pqError) Error() string    { return "pq: " + e.code }
func (e *pqError) SQLState() string { return e.code }

func TestClassify(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Severity: "ERROR", Code: code, Message: "m"} }
	tests := []struct {
		name      string
		err       error
		want      class
		transient bool
	}{
		{"nil", nil, classOther, false},
		{"plain error", errors.New("deadlock detected"), classOther, false},
		{"unique violation", pg("23505"), classUniqueViolation, false},
		{"serialization failure", pg("40001"), classSerialization, true},
		{"deadlock", pg("40P01"), classDeadlock, true},
		{"deadlock, wrapped", fmt.Errorf("handler: %w", pg("40P01")), classDeadlock, true},
		{"lock timeout", pg("55P03"), classLockTimeout, true},
		{"undefined table", pg("42P01"), classUndefinedTable, false},
		{"aborted transaction", pg("25P02"), classFailedTransaction, false},
		{"admin shutdown (pg_terminate_backend)", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}, classConnection, true},
		{"crash shutdown", pg("57P02"), classConnection, true},
		{"cannot connect now", pg("57P03"), classConnection, true},
		{"idle in transaction timeout", pg("25P03"), classConnection, true},
		{"idle session timeout", pg("57P05"), classConnection, true},
		{"statement completion unknown", pg("40003"), classConnection, true},
		{"connection failure", pg("08006"), classConnection, true},
		{"connection does not exist", pg("08003"), classConnection, true},
		{"query canceled (statement_timeout)", pg("57014"), classOther, false},
		{"syntax error", pg("42601"), classOther, false},
		{"check violation", pg("23514"), classOther, false},
		{"lib/pq deadlock", &pqError{"40P01"}, classDeadlock, true},
		{"lib/pq unique violation", &pqError{"23505"}, classUniqueViolation, false},
		{"bad connection", driver.ErrBadConn, classConnection, true},
		{"connection done", sql.ErrConnDone, classConnection, true},
		{"EOF", fmt.Errorf("read: %w", io.EOF), classConnection, true},
		{"unexpected EOF", io.ErrUnexpectedEOF, classConnection, true},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, classConnection, true},
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), classConnection, true},
		{"broken pipe", syscall.EPIPE, classConnection, true},
		{"canceled", context.Canceled, classOther, false},
		{"deadline", fmt.Errorf("timeout: %w", context.DeadlineExceeded), classOther, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want.String(), classify(tc.err).String())
			require.Equal(t, tc.transient, isTransient(tc.err))
		})
	}
}
