package connlost

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
)

func TestIs(t *testing.T) {
	own := errors.New("driver: invalid connection")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"bad conn", driver.ErrBadConn, true},
		{"conn done", fmt.Errorf("exec: %w", sql.ErrConnDone), true},
		{"EOF", io.EOF, true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"broken pipe", syscall.EPIPE, true},
		{"the driver's own", fmt.Errorf("query: %w", own), true},
		{"cancelled", fmt.Errorf("read: %w", errors.Join(context.Canceled, io.EOF)), false},
		{"expired", &net.OpError{Op: "read", Err: context.DeadlineExceeded}, false},
		{"other", errors.New("syntax error"), false},
	} {
		if got := Is(tc.err, own); got != tc.want {
			t.Errorf("%s: Is(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
