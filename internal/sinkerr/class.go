package sinkerr

import "fmt"

// Class is how a broker sink classes a failure to publish: the one type
// behind kafka.Class and watermill.Class, which alias it, so that both
// sinks class and print alike. Each sink documents what falls in each
// class for its broker.
type Class int

// The classes.
const (
	// Retryable: the same message may pass later. A plain error.
	Retryable Class = iota
	// Permanent: the broker refused the message itself and never will
	// take it; the sink marks the error outbox.Permanent.
	Permanent
	// Unavailable: the destination is not set up for the message until
	// an operator fixes it; the sink marks the error outbox.Unavailable.
	Unavailable
)

// String is the class's name in lower case ("permanent"); a value that
// is none of the three prints as Class(n).
func (c Class) String() string {
	switch c {
	case Permanent:
		return "permanent"
	case Unavailable:
		return "unavailable"
	case Retryable:
		return "retryable"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}
