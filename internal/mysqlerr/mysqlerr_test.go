package mysqlerr

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

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	my := func(n uint16) error { return &mysqldrv.MySQLError{Number: n, Message: "m"} }
	tests := []struct {
		name      string
		err       error
		want      Class
		transient bool
	}{
		{"nil", nil, Other, false},
		{"duplicate", my(1062), Duplicate, false},
		{"wrapped duplicate", fmt.Errorf("x: %w", my(1062)), Duplicate, false},
		{"deadlock", my(1213), Deadlock, true},
		// MariaDB 11.8 raised it in the consumers' hand-over (INSERT …
		// SELECT … ON DUPLICATE KEY UPDATE) under READ COMMITTED.
		{"record changed since last read", my(1020), Deadlock, true},
		{"algorithm refused", my(1846), AlgorithmRefused, false},
		{"table access denied", my(1142), AccessDenied, false},
		{"lock wait timeout", my(1205), LockWait, true},
		{"no table", my(1146), NoTable, false},
		{"duplicate index name", my(1061), DuplicateIndex, false},
		{"server shutdown", my(1053), Connection, true},
		{"query interrupted", my(1317), Connection, true},
		{"mariadb connection killed", my(1927), Connection, true},
		{"server gone", my(2006), Connection, true},
		{"server lost", my(2013), Connection, true},
		{"mysql inactivity", my(4031), Connection, true},
		{"syntax error", my(1064), Other, false},
		{"bad conn", driver.ErrBadConn, Connection, true},
		{"invalid conn", mysqldrv.ErrInvalidConn, Connection, true},
		{"conn done", sql.ErrConnDone, Connection, true},
		{"eof", io.ErrUnexpectedEOF, Connection, true},
		{"refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, Connection, true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), Connection, true},
		{"canceled", context.Canceled, Other, false},
		{"deadline", fmt.Errorf("q: %w", context.DeadlineExceeded), Other, false},
		{"other", errors.New("boom"), Other, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Classify(tc.err), tc.want.String())
			require.Equal(t, tc.transient, IsTransient(tc.err))
			require.Equal(t, tc.want == Duplicate, IsDuplicateKey(tc.err))
		})
	}
}
