package natsjs

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
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
	return outbox.Permanent(&unsendableError{text: errorText("message cannot be sent as stored", why, id, "")})
}

// errorText lays out the text of an error about the event id: the class
// of the failure first ("no stream captures the subject"), then what
// explains it (detail, the underlying error's text), then the event ID
// and the subject (when known), quoted; credentials redacted:
//
//	natsjs: <class>: <detail> (event "<id>", subject "<subject>")
//
// The outbox stores the text as the record's last error, cut at 512
// bytes, and operators read it cut at a column's width (outboxctl list,
// the dashboard's head view): the class fits in the first ~40 bytes and
// the detail in the stored text, however long the ID (up to 1020 bytes)
// and the subject (up to MaxSubjectBytes).
func errorText(class, detail, id, subject string) string {
	text := "natsjs: " + class
	if detail != "" {
		text += ": " + detail
	}
	if subject != "" {
		text += fmt.Sprintf(" (event %q, subject %q)", id, subject)
	} else {
		text += fmt.Sprintf(" (event %q)", id)
	}
	return redact(text)
}

// publishError is a failure of the event id, of the class what, whose
// text is redacted and whose cause stays available to errors.Is and
// errors.As (see cause).
type publishError struct {
	msg string
	err error
}

// newPublishError is the error of class what for the event id and its
// subject ("" when not known), caused by err.
func newPublishError(what, id, subject string, err error) *publishError {
	return &publishError{msg: errorText(what, err.Error(), id, subject), err: cause(err)}
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
// a user:password@ or token@ in a URL (a chain too long to check counts).
func leaks(err error) bool {
	return secretfmt.AnyInChain(err, func(e error) bool { text := e.Error(); return redact(text) != text })
}

var userinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@`)

// redact removes user:password@ (or token@) from URLs in an error text.
func redact(s string) string {
	return userinfoRE.ReplaceAllString(s, "${1}[REDACTED]@")
}
