package secretfmt

import (
	"context"
	"errors"
	"os"
)

// CauseError stands in for an error from outside (a transport's, a
// client library's) whose text or fields may hold a secret (a request
// URL with a token, an echoed credential): it keeps only a text the
// caller made safe, whether the cause was a timeout, and the well-known
// sentinels the cause wrapped (context.Canceled,
// context.DeadlineExceeded, os.ErrDeadlineExceeded, and those the caller
// names), so that errors.Is still tells a timeout, a cancellation or
// the caller's sentinel while errors.As and Unwrap can never reach the
// original.
type CauseError struct {
	text      string
	timeout   bool
	sentinels []error
}

// Cause is the CauseError for err, with text, already made safe, as its
// text. extra are further sentinels to keep if err wraps them.
func Cause(text string, err error, extra ...error) *CauseError {
	c := &CauseError{text: text}
	for _, s := range append([]error{context.Canceled, context.DeadlineExceeded, os.ErrDeadlineExceeded}, extra...) {
		if errors.Is(err, s) {
			c.sentinels = append(c.sentinels, s)
		}
	}
	var t interface{ Timeout() bool }
	c.timeout = errors.As(err, &t) && t.Timeout()
	return c
}

func (e *CauseError) Error() string { return e.text }

// Unwrap returns the sentinels the cause wrapped.
func (e *CauseError) Unwrap() []error { return e.sentinels }

// Timeout reports whether the cause was a timeout (as net.Error does).
func (e *CauseError) Timeout() bool { return e.timeout }
