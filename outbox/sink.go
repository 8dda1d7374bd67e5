package outbox

import "context"

// Sink delivers messages to where they are going: an IM service, a broker,
// an HTTP endpoint.
//
// Publish must be safe for concurrent use: the worker and the after-commit
// path (Worker.PublishNow) call it from different goroutines. It must
// return when ctx is done; the worker gives every call its own deadline
// (WorkerOptions.PublishTimeout).
//
// A nil error means the message was delivered, or needs no delivery at all
// (a sink that has nothing to do for a message type returns nil, and the
// message is marked published). An error leaves the message pending for a
// retry; wrap it with Permanent when retrying can never succeed. Delivery
// is at-least-once: Publish may be called again for a message it already
// delivered, so the receiver must deduplicate by Message.ID.
//
// The error text is logged and stored as the record's last error: it must
// not contain secrets or whole upstream responses.
type Sink interface {
	Publish(ctx context.Context, msg Message) error
}

// SinkFunc adapts a function to the Sink interface.
type SinkFunc func(ctx context.Context, msg Message) error

// Publish calls f(ctx, msg).
func (f SinkFunc) Publish(ctx context.Context, msg Message) error { return f(ctx, msg) }
