package sinktest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// Peer connects the suite to one sink implementation and the peer it
// delivers to: a broker, an endpoint, or a faithful fake of one. The
// suite calls its functions from several goroutines at once (its checks
// run in parallel), except Stop and Start (see below).
type Peer struct {
	// NewSink returns a sink on the working peer that delivers to a
	// destination of its own (a stream subject prefix, a topic, a
	// group, a URL path) and a reader of that destination. Required.
	// The suite calls it once or more per check, each time for a test
	// of that check; what it makes must be released by t.Cleanup. When
	// the sink has a Close method (Close() or Close() error), the suite
	// closes it when t ends, before the harness's own cleanups.
	NewSink func(t *testing.T) Target
	// Stop takes the peer away from the sinks NewSink made (a broker
	// killed, an endpoint refusing connections or never answering), and
	// Start brings it back, with what it held. Both are required. The
	// suite calls them only in the Outage check, which runs after the
	// other checks are over and alone.
	Stop, Start func(t *testing.T)
	// Unacceptable are messages the peer can never accept (too large,
	// unmappable, malformed for it): the sinks NewSink makes must fail
	// each with an error marked outbox.Permanent. Empty skips the
	// Unacceptable check.
	Unacceptable []outbox.Message
	// Misconfigured, if set, returns a sink whose destination is not set
	// up or not authorised (no stream or topic for it, refused
	// credentials): it must fail an ordinary message with an error
	// marked outbox.Unavailable. nil skips the Misconfigured check.
	Misconfigured func(t *testing.T) outbox.Sink
	// Secrets are the credentials the sinks hold (passwords, tokens,
	// signing keys), in each form the sink holds them: none may appear
	// in the sink printed or logged, nor in an error or any error it
	// wraps. A secret counts as shown when any 16 bytes of it in a row
	// (the whole secret, if shorter) appear.
	Secrets []string
	// Ordered says that the peer keeps one key's messages in the order
	// they were published (a Kafka partition, a stream subject): the
	// Ordered check and the Outage check's order check run.
	Ordered bool
	// DedupesByID says that the peer itself discards a repeat of a
	// message ID (JetStream's Nats-Msg-Id, Tencent's Random): a message
	// published twice is then held once.
	DedupesByID bool
	// KeepsHeaders says that the peer holds Message.Headers with each
	// message (Delivery.Headers); without it the suite ignores
	// Delivery.Headers.
	KeepsHeaders bool
}

// Target is a sink and the destination it delivers to.
type Target struct {
	// Sink publishes to the destination.
	Sink outbox.Sink
	// Received returns every message the destination holds, in the
	// peer's order, repeats included. The suite polls it until what it
	// waits for is there, so it may return what has arrived so far (a
	// consumer that lags); an error (the peer restarting) is retried
	// until the wait's bound.
	Received func() ([]Delivery, error)
}

// Delivery is a message as the peer holds it, decoded back into the
// fields of the outbox.Message that was published.
type Delivery struct {
	ID, Key, Type string
	Payload       []byte
	// Headers are the message's own headers, without those the sink
	// adds (its ID, key, type or signature headers) or the transport
	// adds. Names compare without regard to case when they must (see
	// Peer.KeepsHeaders).
	Headers map[string]string
}

func (p Peer) validate() error {
	var errs []error
	if p.NewSink == nil {
		errs = append(errs, errors.New("sinktest: Peer.NewSink: required"))
	}
	if p.Stop == nil || p.Start == nil {
		errs = append(errs, errors.New("sinktest: Peer.Stop and Peer.Start: required (the Outage check takes the peer away and brings it back)"))
	}
	for i, m := range p.Unacceptable {
		if err := m.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("sinktest: Peer.Unacceptable[%d]: a store would not accept it either: %w", i, err))
		}
	}
	return errors.Join(errs...)
}
