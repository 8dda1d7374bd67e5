// Package txproc is the loop beneath every inbox's Process: it runs
// transactions (a conflict begins a new one after a randomised backoff,
// up to a limit), calls the handler (a panic becomes an
// *inbox.PanicError), tells the handler's failures from the database's
// conflicts by their errors, and reports the Observer's events.
// sqlinbox gives it one transaction (Params.Once) and the database's
// error classification.
package txproc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/internal/ctxwait"
	"github.com/outboxrelay/outboxrelay/internal/safetext"
)

// Params is one inbox, for Process.
type Params struct {
	// What names the inbox in errors: "mysql inbox", "postgres inbox".
	What     string
	Consumer string
	// MaxAttempts bounds the transactions of one Process.
	MaxAttempts int
	Observer    inbox.Observer
	Log         *slog.Logger
	// Once is one transaction of Process. It returns a *HandlerError for
	// the handler's own failures and a *ConflictError for a conflict the
	// handler returned.
	Once func(ctx context.Context, id string, h inbox.Handler) (inbox.Result, error)
	// Transient reports a database error after which a new transaction
	// may succeed (a deadlock, a lock timeout, a lost connection).
	Transient func(err error) bool
	// Wrap wraps the database's errors, naming the operation.
	Wrap func(op string, err error) error
}

// Process runs p.Once until it ends other than in a conflict, at most
// p.MaxAttempts times, and reports the outcome to the Observer.
func Process(ctx context.Context, p Params, id string, h inbox.Handler) (inbox.Result, error) {
	if err := inbox.ValidateID(id); err != nil {
		return 0, fmt.Errorf("%s: process: %w", p.What, err)
	}
	if h == nil {
		return 0, fmt.Errorf("%s: process: the handler is nil", p.What)
	}
	start := time.Now()
	res, attempts, err := retrying(ctx, p, id, h)
	e := inbox.Event{Consumer: p.Consumer, ID: id, Duration: time.Since(start), Attempts: attempts}
	var herr *HandlerError
	switch {
	case errors.As(err, &herr):
		e.Kind, e.Err = inbox.EventHandlerFailed, herr.Err
		err = fmt.Errorf("%s: process %q: handler: %w", p.What, id, herr.Err)
	case err != nil:
		e.Kind, e.Err = inbox.EventFailed, err
		err = p.Wrap(fmt.Sprintf("process %q", id), err)
	case res == inbox.Duplicate:
		e.Kind = inbox.EventDuplicate
	default:
		e.Kind = inbox.EventProcessed
	}
	Observe(ctx, p.Observer, e)
	return res, err
}

// retrying runs p.Once until it ends other than in a conflict, at most
// p.MaxAttempts times. It returns how many transactions it began.
func retrying(ctx context.Context, p Params, id string, h inbox.Handler) (inbox.Result, int, error) {
	policy := NewBackoff()
	for attempt := 1; ; attempt++ {
		res, err := p.Once(ctx, id, h)
		if err == nil || !isConflict(err, p.Transient) {
			return res, attempt, err
		}
		if cerr := ctx.Err(); cerr != nil {
			return 0, attempt, fmt.Errorf("%w (after: %v)", cerr, err)
		}
		if attempt >= p.MaxAttempts {
			return 0, attempt, fmt.Errorf("gave up after %d transactions: %w", attempt, err)
		}
		Observe(ctx, p.Observer, inbox.Event{Kind: inbox.EventConflict, Consumer: p.Consumer, ID: id, Attempts: attempt, Err: err})
		p.Log.DebugContext(ctx, "inbox transaction rolled back by a conflict; trying again",
			slog.String("event_id", id), slog.Int("attempt", attempt), slog.String("error", err.Error()))
		if werr := Pause(ctx, policy); werr != nil {
			return 0, attempt, fmt.Errorf("%w (after a conflict: %v)", werr, err)
		}
	}
}

// NewBackoff returns the backoff between the tries of a transaction
// that conflicted: randomised (by half), from 10ms doubling up to 1s.
func NewBackoff() backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(10*time.Millisecond),
		backoff.WithMaxInterval(time.Second),
		backoff.WithMaxElapsedTime(0),
	)
}

// Pause waits for policy's next backoff, or until ctx is done.
func Pause(ctx context.Context, policy backoff.BackOff) error {
	return ctxwait.Sleep(ctx, policy.NextBackOff())
}

// isConflict reports whether err, from one transaction of Process, is
// worth a fresh transaction: a conflict the handler returned, or one of
// the database's that transient accepts.
func isConflict(err error, transient func(error) bool) bool {
	var ce *ConflictError
	if errors.As(err, &ce) {
		return true
	}
	var he *HandlerError
	if errors.As(err, &he) {
		return false
	}
	return transient(err)
}

// HandlerError is a failure of the handler that Process returns as it
// is (not a conflict to retry).
type HandlerError struct{ Err error }

func (e *HandlerError) Error() string { return e.Err.Error() }

// ConflictError is a conflict the handler returned: retried like one of
// the inbox's own statements.
type ConflictError struct{ Err error }

func (e *ConflictError) Error() string { return "handler: " + e.Err.Error() }
func (e *ConflictError) Unwrap() error { return e.Err }

// ErrEndedTx is the failure of a handler that ended its transaction
// through database/sql.
var ErrEndedTx error = &HandlerError{Err: errors.New("the handler ended the transaction itself (Commit or Rollback): it must leave that to the inbox")}

// maxPanicBytes bounds a handler's panic value in a log line.
const maxPanicBytes = 512

// Call runs h, turning a panic into an *inbox.PanicError (logged).
func Call(ctx context.Context, log *slog.Logger, id string, tx *sql.Tx, h inbox.Handler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			stack := debug.Stack()
			err = &inbox.PanicError{Value: r, Stack: stack}
			log.ErrorContext(ctx, "inbox handler panicked; rolled back",
				slog.String("event_id", id), slog.String("panic", safetext.Truncate(fmt.Sprint(r), maxPanicBytes)),
				slog.String("stack", safetext.Truncate(string(stack), 4096)))
		}
	}()
	return h(ctx, tx)
}

// Observe hands an event to obs, if there is one.
func Observe(ctx context.Context, obs inbox.Observer, e inbox.Event) {
	if obs != nil {
		obs.Observe(ctx, e)
	}
}
