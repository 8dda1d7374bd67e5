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
// cause stays available to errors.Is and errors.As (see cause).
type publishError struct {
	msg string
	err error
}

func (e *publishError) Error() string { return e.msg }
func (e *publishError) Unwrap() error { return e.err }

// cause is err, to be wrapped by an error of the sink, unless some error
// in its chain shows a credential in its text: then a stand-in with the
// redacted text, through which errors.Is still finds every error of the
// chain (context.DeadlineExceeded, nats.ErrTimeout, a caller's sentinel)
// but errors.As and Unwrap reach none of them.
func cause(err error) error {
	if err == nil || !leaks(err) {
		return err
	}
	return &redactedError{err: err}
}

type redactedError struct{ err error }

func (e *redactedError) Error() string        { return redact(e.err.Error()) }
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }

// leaks reports whether the text of err or of any error it wraps holds
// a user:password@ or token@ in a URL.
func leaks(err error) bool {
	queue := []error{err}
	for seen := 0; len(queue) > 0 && seen < 100; seen++ {
		e := queue[0]
		queue = queue[1:]
		if e == nil {
			continue
		}
		if text := e.Error(); redact(text) != text {
			return true
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			queue = append(queue, u.Unwrap())
		case interface{ Unwrap() []error }:
			queue = append(queue, u.Unwrap()...)
		}
	}
	return len(queue) > 0 // a chain too long to check is not exposed
}

var userinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@`)

// redact removes user:password@ (or token@) from URLs in an error text.
func redact(s string) string {
	return userinfoRE.ReplaceAllString(s, "${1}[REDACTED]@")
}
