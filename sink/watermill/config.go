package watermill

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxrelay/outboxrelay/internal/optcheck"
	"github.com/outboxrelay/outboxrelay/internal/sinkerr"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// Defaults and limits of Config.
const (
	// DefaultMaxInFlight is how many Publish calls may be in the
	// publisher at once, by default: more than the worker's Concurrency
	// ever asks for, few enough that a publisher that hangs cannot pile
	// up goroutines without bound.
	DefaultMaxInFlight = 64
	// MaxMaxInFlight is the largest MaxInFlight accepted.
	MaxMaxInFlight = 4096
	// DefaultCloseTimeout is how long Close waits for the calls still in
	// the publisher, by default.
	DefaultCloseTimeout = 30 * time.Second
	// MaxTopicBytes bounds a topic name (Config.Topic or TopicFor's
	// answer): as long as any broker Watermill supports takes (AMQP's
	// names are at most 255 bytes, Kafka's 249).
	MaxTopicBytes = 255
)

// Class is how the sink classes an error of the publisher (see
// Config.Classify): the type the broker sinks share (kafka.Class is the
// same type).
type Class = sinkerr.Class

// The classes Config.Classify returns.
const (
	// Retryable: the same message may pass later (the broker restarting,
	// a connection lost, a timeout). The default for every error the
	// sink does not know: retrying loses nothing.
	Retryable = sinkerr.Retryable
	// Permanent: the broker refused the message itself and never will
	// take it (too large for the queue, say). The error is marked
	// outbox.Permanent; the worker's policy may dead-letter the message.
	Permanent = sinkerr.Permanent
	// Unavailable: the destination is not set up for the message (no
	// such exchange or stream, no rights, refused credentials) until an
	// operator fixes it. The error is marked outbox.Unavailable: the
	// worker retries it whatever its policy, holds the sink off and
	// alerts.
	Unavailable = sinkerr.Unavailable
)

// Config configures a Sink. Publisher is required, and Topic or
// TopicFor; every other field has a default, and the zero value of each
// means that default. The fields of plain types carry yaml tags, so that
// a service can decode its own configuration into a Config and set
// Publisher (and the other function fields) in Go.
type Config struct {
	// Publisher publishes the messages: any Watermill publisher
	// (watermill-amqp, watermill-redisstream, watermill-kafka,
	// watermill-googlecloud, …). Required. Watermill's contract makes it
	// safe for concurrent use. Build it so that Publish returns only
	// once the broker has the message (watermill-amqp:
	// Publish.ConfirmDelivery), or a nil error means only "handed to
	// the client", and a broker failure then loses it. The sink closes
	// it only if ClosePublisher is set.
	Publisher message.Publisher `yaml:"-"`
	// ClosePublisher makes Close close Publisher too, first (which also
	// ends the calls still in it). Defaults to false: the publisher is
	// the caller's to close, after the sink's Close.
	ClosePublisher bool `yaml:"-"`

	// Topic is the Watermill topic every message goes to, unless
	// TopicFor is set. What the topic names (an exchange, a queue, a
	// stream) is the publisher's configuration. It must be valid UTF-8
	// without control characters, of at most MaxTopicBytes.
	Topic string `yaml:"topic"`
	// TopicFor, if set, maps a message to its topic instead of Topic.
	// Defaults to nil (always Topic). An error from it, or a topic that
	// Topic's rules refuse, fails the message permanently (ErrNoTopic):
	// retrying would ask the same function the same question.
	TopicFor func(outbox.Message) (string, error) `yaml:"-"`

	// Classify, if set, classes an error that the publisher returned
	// while the call's context was still live: Retryable, Permanent or
	// Unavailable. Defaults to nil: every publisher error is Retryable,
	// so that nothing is lost (an error that can never pass then holds
	// up its key until an operator acts on it). The sink knows no
	// broker's errors; a service that does (amqp091's *amqp.Error codes,
	// Redis's NOPERM and WRONGTYPE replies) says so here. It may be
	// called from several goroutines at once. A Class it returns that
	// is not one of the three counts as Retryable.
	Classify func(err error) Class `yaml:"-"`

	// Check, if set, checks the Watermill message (and its topic) that
	// Publish is about to send: an error fails the message permanently
	// (ErrUnsendable), since the broker can never carry it, and nothing
	// is sent. For limits that a client does not enforce itself, such as
	// AMQP's 255-byte header names, which amqp091-go cuts silently (see
	// CheckAMQP). Defaults to nil: no check.
	Check func(topic string, msg *message.Message) error `yaml:"-"`

	// MaxInFlight bounds the Publish calls in the publisher at once,
	// those whose context ended before the publisher returned included
	// (the sink cannot stop a publisher that ignores the message's
	// context; it returns and leaves the call to finish). When it is
	// reached, Publish waits for a free slot until its context ends.
	// Defaults to DefaultMaxInFlight; at most MaxMaxInFlight.
	MaxInFlight int `yaml:"max_in_flight"`
	// CloseTimeout bounds how long Close waits for the calls still in
	// the publisher. Defaults to DefaultCloseTimeout.
	CloseTimeout time.Duration `yaml:"close_timeout"`

	// Redact are texts that must never appear in an error the sink
	// returns or a line it logs: the broker's password, a URL that
	// holds it. Errors whose text holds one are scrubbed (see Publish).
	// Defaults to none.
	Redact []string `yaml:"-"`
	// Logger receives the sink's own lines: reserved headers left out
	// (debug), calls that returned after their context ended (debug),
	// a publisher that panicked (error). Defaults to slog.Default().
	Logger *slog.Logger `yaml:"-"`
}

// withDefaults returns c with the defaults filled in.
func (c Config) withDefaults() Config {
	c.MaxInFlight = cmp.Or(c.MaxInFlight, DefaultMaxInFlight)
	c.CloseTimeout = cmp.Or(c.CloseTimeout, DefaultCloseTimeout)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// validate checks a config with defaults filled in. Messages name the
// field and the value.
func (c Config) validate() error {
	problems := optcheck.New("watermill")
	bad := problems.Addf
	if c.Publisher == nil {
		bad("Publisher: required (a Watermill message.Publisher)")
	}
	if c.TopicFor == nil {
		if c.Topic == "" {
			bad("Topic: required unless TopicFor is set")
		} else if why := topicFault(c.Topic); why != "" {
			bad("Topic %s: %s", sinkerr.Quote(c.Topic), why)
		}
	}
	if c.MaxInFlight < 1 || c.MaxInFlight > MaxMaxInFlight {
		bad("MaxInFlight %d: must be between 1 and %d", c.MaxInFlight, MaxMaxInFlight)
	}
	if c.CloseTimeout < 0 {
		bad("CloseTimeout %v: must be >= 0", c.CloseTimeout)
	}
	for i, r := range c.Redact {
		if r == "" {
			bad("Redact[%d]: empty (it would match every text)", i)
		}
	}
	return problems.Err()
}
