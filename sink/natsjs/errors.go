package natsjs

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// ErrUnsendable is wrapped by the permanent error that Msg, Subject and
// Publish return for a message NATS cannot carry as it is stored: its
// subject is invalid or over MaxSubjectBytes, a header name or value
// cannot be sent unchanged, or the header block is over MaxHeaderBytes.
// Nothing of such a message is sent.
var ErrUnsendable = errors.New("natsjs: message cannot be sent as stored")

// unsendableError is the text of one ErrUnsendable case.
type unsendableError struct{ text string }

func (e *unsendableError) Error() string        { return e.text }
func (e *unsendableError) Is(target error) bool { return target == ErrUnsendable }

// unsendable is the permanent ErrUnsendable error for the event id.
func unsendable(id, why string) error {
	return outbox.Permanent(&unsendableError{text: redact(fmt.Sprintf("natsjs: %q: %s", id, why))})
}

// publishError is a publish failure whose text is redacted and whose
// cause stays available to errors.Is and errors.As.
type publishError struct {
	msg string
	err error
}

func (e *publishError) Error() string { return e.msg }
func (e *publishError) Unwrap() error { return e.err }

var userinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@`)

// redact removes user:password@ (or token@) from URLs in an error text.
func redact(s string) string {
	return userinfoRE.ReplaceAllString(s, "${1}[REDACTED]@")
}
