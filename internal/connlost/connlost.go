// Package connlost tells a lost database connection from every other
// failure, the same way for every driver: what internal/mysqlerr and
// internal/pgerr class as a connection failure when the server sent no
// error of its own.
package connlost

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"
)

// Is reports whether err says the connection to the database is gone:
// database/sql's bad connection (driver.ErrBadConn, sql.ErrConnDone) or
// one of the driver's own (extra), an EOF, a refused, reset or broken TCP
// connection, or any net.Error. A cancelled or expired context is not,
// whatever the driver wrapped around it.
func Is(err error, extra ...error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	for _, e := range extra {
		if errors.Is(err, e) {
			return true
		}
	}
	var netErr net.Error
	return errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &netErr)
}
