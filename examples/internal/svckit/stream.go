package svckit

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxrelay/outboxrelay/sink/natsjs"
)

// Stream is a JetStream stream a service publishes its events to through
// sink/natsjs (room-service's nats and sink.natsjs blocks,
// activity-service's outbox block) or reads them from (activity-service's
// rooms block). The yaml keys, and defaults, are the service's.
type Stream struct {
	// Name is the stream's name (the block's stream key).
	Name string
	// SubjectPrefix starts every subject: an event goes to
	// <prefix>.<event_type>.<key>, and a stream Sink creates has the
	// subjects <prefix>.> (the block's subject_prefix key).
	SubjectPrefix string
	// Duplicates is the duplicate window of a stream Sink creates.
	Duplicates time.Duration
}

// Validate checks the name and the prefix; its errors name the keys
// block.stream and block.subject_prefix.
func (s Stream) Validate(block string) error {
	return errors.Join(ValidName(block+".stream", s.Name), ValidSubjectPrefix(block+".subject_prefix", s.SubjectPrefix))
}

// ValidName checks a JetStream stream or consumer name, the value of key;
// its error names key and shows the value quoted.
func ValidName(key, name string) error {
	if name == "" || len(name) > 255 || strings.ContainsAny(name, " \t.*>/\\") ||
		strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return fmt.Errorf("config: %s %q: must be 1 to 255 characters without spaces, control characters, '.', '*', '>', '/' or '\\'", key, name)
	}
	return nil
}

// ValidSubjectPrefix checks a subject prefix, the value of key, as
// sink/natsjs does (its error shows the value, quoted and clipped).
func ValidSubjectPrefix(key, prefix string) error {
	if _, err := natsjs.New(natsjs.Config{JetStream: noJetStream{}, Prefix: prefix}); err != nil {
		return fmt.Errorf("config: %s: %w", key, err)
	}
	return nil
}

// noJetStream stands in for a connection when only a sink's
// configuration is checked; it is never called.
type noJetStream struct{ jetstream.JetStream }
