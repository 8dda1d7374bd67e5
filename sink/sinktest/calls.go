package sinktest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// callTimeout is the deadline of an ordinary Publish call of the suite:
// long enough for any peer on a loaded machine.
const callTimeout = 30 * time.Second

// publish calls sink.Publish(ctx, m) and waits for it to return, until
// hangTimeout after ctx is done: a sink that goes on longer does not
// honour its context, and the call is abandoned.
func publish(ctx context.Context, sink outbox.Sink, m outbox.Message) error {
	done := make(chan error, 1)
	go func() { done <- sink.Publish(ctx, m) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	hang := time.NewTimer(hangTimeout)
	defer hang.Stop()
	select {
	case err := <-done:
		return err
	case <-hang.C:
		return &hangError{id: m.ID, cause: context.Cause(ctx)}
	}
}

// hangError says that a call did not return after its context was done.
type hangError struct {
	id    string
	cause error
}

func (e *hangError) Error() string {
	return fmt.Sprintf("Publish(%s) had not returned %v after its context was done (%v): a sink must return when ctx is done",
		quote(e.id), hangTimeout, e.cause)
}

// publishOK publishes m with an ordinary deadline and wants nil.
func publishOK(sink outbox.Sink, m outbox.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := publish(ctx, sink, m); err != nil {
		return fmt.Errorf("Publish(%s) on a working peer: %w", quote(m.ID), err)
	}
	return nil
}

// retryable reports whether the worker retries err: it is not marked
// Permanent, or it is marked Unavailable (which wins).
func retryable(err error) bool {
	return !outbox.IsPermanent(err) || outbox.IsUnavailable(err)
}

// class names err's class for a failure message.
func class(err error) string {
	switch {
	case err == nil:
		return "nil"
	case outbox.IsUnavailable(err):
		return "Unavailable"
	case outbox.IsPermanent(err):
		return "Permanent"
	}
	return "a plain (retryable) error"
}

// wantRetryable checks that err, from a call that could not succeed
// because of its context or an outage, is an error the worker retries.
// A nil err goes to delivered, which the caller must check the peer
// holds.
func wantRetryable(what string, m outbox.Message, err error, delivered *[]outbox.Message) error {
	var hang *hangError
	switch {
	case errors.As(err, &hang):
		return err
	case err == nil:
		*delivered = append(*delivered, m)
		return nil
	case !retryable(err):
		return fmt.Errorf("%s: Publish(%s) = %s %q: the message did nothing wrong, so the worker must retry it (a plain error, or Unavailable)",
			what, quote(m.ID), class(err), cut(err.Error()))
	}
	return nil
}

// errText is err's text cut for a log line, or "".
func errText(err error) string {
	if err == nil {
		return ""
	}
	return cut(err.Error())
}
