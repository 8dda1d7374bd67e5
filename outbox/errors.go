package outbox

import (
	"errors"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Errors. Test for them with errors.Is; the errors returned wrap them with
// detail. The first three come from stores (they are backend's, named
// here so that writers need import only this package).
var (
	// ErrNotFound: Store.Get found no message with the ID.
	ErrNotFound = backend.ErrNotFound
	// ErrDuplicateID: Store.Enqueue was given a message ID that is
	// already stored, or twice in one call. Nothing of that call is
	// written.
	ErrDuplicateID = backend.ErrDuplicateID
	// ErrInvalidMessage: Message.Validate or Store.Enqueue refused a
	// message a store cannot keep as it is (see Message.Validate and the
	// store's size limits). Nothing of that call is written.
	ErrInvalidMessage = backend.ErrInvalidMessage
	// ErrWorkerRunning is returned by Worker.Run when the worker is already
	// running.
	ErrWorkerRunning = errors.New("outbox: worker is already running")
)

// Permanent marks err as not worth retrying: the same message will fail the
// same way however often it is tried (a group that does not exist, a
// payload the receiver rejects). Retry policies may stop retrying such
// errors. errors.Is and errors.As still see err through the wrapper.
// Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked by
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }
