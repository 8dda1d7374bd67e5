package backend

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Length limits every Store accepts. A Message that exceeds one is rejected
// by Validate, so it fails at enqueue time with a clear error instead of
// being truncated by a database column.
const (
	// MaxIDLength is the longest Message.ID, in characters.
	MaxIDLength = 255
	// MaxKeyLength is the longest Message.Key, in characters.
	MaxKeyLength = 255
	// MaxTypeLength is the longest Message.Type, in characters.
	MaxTypeLength = 255
)

// Message is one event to deliver. It is written by Store.Enqueue in the
// same transaction as the state change it announces, and handed to a Sink
// unchanged.
type Message struct {
	// ID identifies the event (stored as event_id). It is required, unique
	// within a store, and the key consumers deduplicate by: delivery is
	// at-least-once, so a consumer may see the same ID more than once.
	ID string
	// Key is the ordering and partition key, such as an order ID. Empty means
	// the message has no key.
	Key string
	// Type names the kind of event (stored as event_type), for example
	// "OrderPlaced". It is required.
	Type string
	// Payload is the event body. The outbox never looks inside it.
	Payload []byte
	// Headers carry metadata such as a request ID or trace context
	// (HeaderTraceParent).
	Headers map[string]string
	// CreatedAt is when the event happened, as the writer tells it; the
	// store keeps it and hands it back, but decides nothing by it (ages,
	// due times and leases are on the store's clock: see
	// Record.EnqueuedAt). The zero value means "when it was enqueued".
	CreatedAt time.Time
}

// Validate reports whether m can be stored: ID and Type must be non-empty,
// valid UTF-8 and within the length limits, Key valid UTF-8 within its
// limit, and every header name non-empty and valid UTF-8, as every header
// value. (Stores bound the sizes of payloads and headers on top: see
// theirs.) Errors wrap ErrInvalidMessage and name the field.
func (m Message) Validate() error {
	if err := checkText("ID", m.ID, MaxIDLength, true); err != nil {
		return err
	}
	if err := checkText("Type", m.Type, MaxTypeLength, true); err != nil {
		return fmt.Errorf("message %q: %w", m.ID, err)
	}
	if err := checkText("Key", m.Key, MaxKeyLength, false); err != nil {
		return fmt.Errorf("message %q: %w", m.ID, err)
	}
	for name, value := range m.Headers {
		switch {
		case name == "":
			return fmt.Errorf("message %q: %w: a header name is empty", m.ID, ErrInvalidMessage)
		case !utf8.ValidString(name):
			return fmt.Errorf("message %q: %w: header name %q is not valid UTF-8", m.ID, ErrInvalidMessage, Truncate(name, 64))
		case !utf8.ValidString(value):
			return fmt.Errorf("message %q: %w: the value of header %q is not valid UTF-8", m.ID, ErrInvalidMessage, Truncate(name, 64))
		}
	}
	return nil
}

func checkText(field, v string, maxLen int, required bool) error {
	switch {
	case v == "" && required:
		return fmt.Errorf("%w: %s is empty", ErrInvalidMessage, field)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidMessage, field)
	case utf8.RuneCountInString(v) > maxLen:
		return fmt.Errorf("%w: %s is longer than %d characters", ErrInvalidMessage, field, maxLen)
	}
	return nil
}

// Status is the delivery state of a stored message.
type Status string

// The statuses a Record can have.
const (
	// StatusPending: not yet delivered; the worker will try (again) once it
	// is due.
	StatusPending Status = "pending"
	// StatusPublished: the sink accepted the message. Terminal.
	StatusPublished Status = "published"
	// StatusDead: the retry policy gave up on the message. It is kept, with
	// its last error, and is never retried by a worker until an operator
	// requeues it.
	StatusDead Status = "dead"
)

// Record is a Message as a Store holds it, with its delivery state.
type Record struct {
	Message
	// Status is the delivery state.
	Status Status
	// Attempts counts failed worker attempts (stored as retry_count). A
	// failed after-commit publish (Worker.PublishNow) does not count.
	Attempts int
	// LastError is the last failure, shortened to MaxLastErrorBytes. Empty
	// once the message is published.
	LastError string
	// NextAttemptAt is when the record is next due for a worker, on the
	// database clock. While a worker holds a lease on it, it is the moment
	// the lease expires.
	NextAttemptAt time.Time
	// PublishedAt is when the record was marked published; zero otherwise.
	PublishedAt time.Time
	// EnqueuedAt is when the store wrote the message, on the store's own
	// clock (MySQL: the database's). Ages count from it: the oldest
	// pending age in Stats, and age filters of tools. Message.CreatedAt is
	// this too unless the writer set it.
	EnqueuedAt time.Time
	// Seq is the store's sequence number of the record, increasing in
	// the order the records were written; 0 if the store has none. Tools
	// page by it.
	Seq int64
}
