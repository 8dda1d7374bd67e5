package mysql

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
		want      errClass
		transient bool
	}{
		{"nil", nil, classOther, false},
		{"duplicate", my(1062), classDuplicate, false},
		{"wrapped duplicate", fmt.Errorf("x: %w", my(1062)), classDuplicate, false},
		{"deadlock", my(1213), classDeadlock, true},
		// MariaDB 11.8 raised it in the consumers' hand-over (INSERT …
		// SELECT … ON DUPLICATE KEY UPDATE) under READ COMMITTED.
		{"record changed since last read", my(1020), classDeadlock, true},
		{"algorithm refused", my(1846), classAlgorithmRefused, false},
		{"table access denied", my(1142), classAccessDenied, false},
		{"lock wait timeout", my(1205), classLockWait, true},
		{"no table", my(1146), classNoTable, false},
		{"duplicate index name", my(1061), classDuplicateIndex, false},
		{"server shutdown", my(1053), classConnection, true},
		{"query interrupted", my(1317), classConnection, true},
		{"mariadb connection killed", my(1927), classConnection, true},
		{"server gone", my(2006), classConnection, true},
		{"server lost", my(2013), classConnection, true},
		{"mysql inactivity", my(4031), classConnection, true},
		{"syntax error", my(1064), classOther, false},
		{"bad conn", driver.ErrBadConn, classConnection, true},
		{"invalid conn", mysqldrv.ErrInvalidConn, classConnection, true},
		{"conn done", sql.ErrConnDone, classConnection, true},
		{"eof", io.ErrUnexpectedEOF, classConnection, true},
		{"refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, classConnection, true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), classConnection, true},
		{"canceled", context.Canceled, classOther, false},
		{"deadline", fmt.Errorf("q: %w", context.DeadlineExceeded), classOther, false},
		{"other", errors.New("boom"), classOther, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, classify(tc.err), tc.want.String())
			require.Equal(t, tc.transient, IsTransient(tc.err))
			require.Equal(t, tc.want == classDuplicate, IsDuplicateKey(tc.err))
		})
	}
}
