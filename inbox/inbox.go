package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Handler does the work of one message: every write it makes goes
// through tx, the transaction that also records the message as
// processed. It returns an error to roll both back. It must not commit or
// roll back tx itself, and it must return every error tx's statements
// return (after a deadlock the server has already rolled the transaction
// back, so statements after it would not be part of it).
//
// A handler may be called more than once for one message: after a
// deadlock or a lock wait timeout, which roll its transaction back, the
// inbox calls it again in a fresh transaction. Whatever it does outside
// tx (a network call, a change to memory) can therefore happen again;
// only its writes through tx take effect exactly once.
type Handler func(ctx context.Context, tx *sql.Tx) error

// Result is what Process did with a message.
type Result int

// The results of Process. The zero Result goes with a non-nil error.
const (
	// Processed: the handler ran and its writes committed, together with
	// the record of the message.
	Processed Result = iota + 1
	// Duplicate: the message had been processed already (by this
	// instance or another); the handler did not run.
	Duplicate
)

func (r Result) String() string {
	switch r {
	case Processed:
		return "processed"
	case Duplicate:
		return "duplicate"
	}
	return "none"
}

// Inbox processes each message of one consumer once: it records the
// message ID in the same transaction as the handler's writes, so that a
// redelivered message is recognised and skipped.
type Inbox interface {
	// Process runs h exactly once per (consumer, id): in one transaction
	// it records the id and runs h's writes; an id already recorded
	// returns Duplicate without running h; an error from h rolls back
	// both and is returned (the message can be retried).
	//
	// Concurrent calls with the same id, from any number of goroutines
	// and processes, run h's writes once: the others wait for the first
	// to finish and return Duplicate if it committed, or process the
	// message themselves if it rolled back. Conflicts between
	// transactions (deadlocks, lock wait timeouts) are retried inside
	// Process, calling h again (see Handler), and are not returned unless
	// they persist beyond the implementation's bound.
	//
	// An invalid id fails with an error wrapping ErrInvalidID, without
	// calling h. A panic in h rolls back and is returned as a *PanicError.
	// When ctx is done, Process stops retrying and returns ctx's error
	// (wrapped). Process is safe for concurrent use.
	Process(ctx context.Context, id string, h Handler) (Result, error)
}

// MaxIDLength is the longest message ID, in characters.
const MaxIDLength = 255

// ErrInvalidID is wrapped by the errors of Process (and ValidateID) for a
// message ID no inbox can record: empty, not valid UTF-8, or longer than
// MaxIDLength characters.
var ErrInvalidID = errors.New("inbox: invalid message ID")

// ValidateID reports whether id can be recorded: it must be non-empty,
// valid UTF-8 and at most MaxIDLength characters. Every other ID, with
// control characters or leading and trailing spaces, is its own ID. The
// outbox's Message.Validate accepts no ID that this refuses.
func ValidateID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: the ID is empty", ErrInvalidID)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: the ID is not valid UTF-8", ErrInvalidID)
	case utf8.RuneCountInString(id) > MaxIDLength:
		return fmt.Errorf("%w: the ID is longer than %d characters", ErrInvalidID, MaxIDLength)
	}
	return nil
}

// PanicError is the error Process returns when the handler panicked. The
// transaction was rolled back, so the message can be retried.
type PanicError struct {
	// Value is what the handler passed to panic.
	Value any
	// Stack is the handler's goroutine stack at the panic.
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("inbox: handler panicked: %v", e.Value)
}

// Unwrap returns Value if it is an error, so that errors.Is and
// errors.As see what the handler panicked with.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
