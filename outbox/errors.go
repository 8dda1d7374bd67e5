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
	// ErrLeftToWorker: Worker.PublishNow did not publish some of its
	// messages and left them to the workers, due at once (the sink failed
	// or is being held off, a message is not its key's oldest pending one
	// under Ordering, or a worker's claim held it). Nothing is lost; the
	// error says which messages and why.
	ErrLeftToWorker = errors.New("outbox: left to the worker")
	// ErrSinkHeldOff is the cause PublishNow gives (wrapped in an error
	// that also wraps ErrLeftToWorker) while the worker holds off a sink
	// that keeps failing (see SinkBreaker): it did not call the sink.
	ErrSinkHeldOff = errors.New("outbox: the sink is failing and held off")
)

// Permanent marks err as not worth retrying: the same message will fail the
// same way however often it is tried (a group that does not exist, a
// payload the receiver rejects). Retry policies may stop retrying such
// errors. errors.Is and errors.As still see err through the wrapper.
// Permanent(nil) is nil.
func Permanent(err error) error { return mark[permanent](err) }

// IsPermanent reports whether err, or an error it wraps, was marked by
// Permanent.
func IsPermanent(err error) bool { return marked[permanent](err) }

// Unavailable marks err as a failure of the destination rather than of
// the message: it cannot take any message now, for a reason that belongs
// to the infrastructure (no stream or topic captures the message, the
// credentials are refused, the destination is not configured), and the
// same message will go through once an operator fixes it. A sink returns
// it where it would otherwise have to choose between Permanent, which
// would dead-letter the whole backlog, and a plain error, which would go
// unnoticed among transient ones.
//
// The worker never dead-letters a message for it (unless
// WorkerOptions.DeadLetterUnavailable is set): the attempt is counted and
// its error kept, the worker holds off the sink at once (see
// SinkBreaker), logs it as an error, reports EventSinkDown, and retries
// when a probe gets through. errors.Is and errors.As still see err
// through the wrapper. Unavailable(nil) is nil. An error marked both
// Permanent and Unavailable counts as Unavailable.
func Unavailable(err error) error { return mark[unavailable](err) }

// IsUnavailable reports whether err, or an error it wraps, was marked by
// Unavailable.
func IsUnavailable(err error) bool { return marked[unavailable](err) }

// The marks of Permanent and Unavailable.
type (
	permanent   struct{}
	unavailable struct{}
)

// markedError is err marked with M: its text and its chain are err's.
type markedError[M any] struct{ err error }

func (e *markedError[M]) Error() string { return e.err.Error() }
func (e *markedError[M]) Unwrap() error { return e.err }

// mark marks err with M; mark(nil) is nil.
func mark[M any](err error) error {
	if err == nil {
		return nil
	}
	return &markedError[M]{err: err}
}

// marked reports whether err, or an error it wraps, was marked with M.
func marked[M any](err error) bool {
	var m *markedError[M]
	return errors.As(err, &m)
}
