package outbox

import (
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// The message and its stored form are defined with the store contract in
// outbox/backend, and named here, where writers and sinks meet them.
type (
	// Message is one event to deliver: ID (unique; what consumers
	// deduplicate by), Key (the ordering key), Type, Payload, Headers and
	// CreatedAt. It is written by Store.Enqueue in the same transaction as
	// the state change it announces, and handed to a Sink unchanged. See
	// backend.Message for each field's rules.
	Message = backend.Message
	// Record is a Message as a store holds it, with its delivery state:
	// Status, Attempts, LastError and times. See backend.Record.
	Record = backend.Record
	// Status is the delivery state of a stored message.
	Status = backend.Status
	// Execer is the part of a database handle Store.Enqueue writes
	// through: *sql.Tx, *sql.DB and *sql.Conn satisfy it.
	Execer = backend.Execer
	// Store keeps the messages and their delivery state: store/mysql
	// provides one, outboxtest.NewStore an in-memory one for tests. Its
	// contract, for those who write a store, is backend.Store.
	Store = backend.Store
	// EnqueueOptions adjusts Store.Enqueue: HeadStart keeps new messages
	// away from workers for a while, for the writer's PublishNow.
	EnqueueOptions = backend.EnqueueOptions
)

// The statuses a Record can have, a good head start, and the lengths
// Message.Validate accepts.
const (
	StatusPending   = backend.StatusPending
	StatusPublished = backend.StatusPublished
	StatusDead      = backend.StatusDead
	// DefaultHeadStart is an EnqueueOptions.HeadStart that covers the
	// writer's commit and PublishNow at the default PublishTimeout and
	// StoreTimeout, so that PublishNow publishes without a claim (see
	// backend.DefaultHeadStart).
	DefaultHeadStart = backend.DefaultHeadStart
	// MaxIDLength, MaxKeyLength and MaxTypeLength are the longest
	// Message.ID, Key and Type, in characters (Message.Validate).
	MaxIDLength   = backend.MaxIDLength
	MaxKeyLength  = backend.MaxKeyLength
	MaxTypeLength = backend.MaxTypeLength
)

// HeaderTraceParent is the header that carries the W3C trace context
// (https://www.w3.org/TR/trace-context/) of the request that wrote a
// message. The worker logs it with the message, and sinks that call out
// over HTTP (sink/tencentim) pass it on. To write it (with tracestate and
// baggage) through OpenTelemetry, and to trace each delivery, use the
// module outbox/outboxotel (Inject, WrapSink).
const HeaderTraceParent = "traceparent"

// ValidTraceParent reports whether s is a well-formed W3C traceparent of
// version 00: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, with
// ids that are not all zero.
func ValidTraceParent(s string) bool {
	if len(s) != 55 || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return false
	}
	isHex := func(part string) bool {
		zero := true
		for _, c := range []byte(part) {
			switch {
			case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
				zero = zero && c == '0'
			default:
				return false
			}
		}
		return !zero || len(part) == 2
	}
	return isHex(s[3:35]) && isHex(s[36:52]) && isHex(s[53:55])
}
