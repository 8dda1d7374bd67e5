package watermill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxrelay/outboxrelay/internal/headernames"
	"github.com/outboxrelay/outboxrelay/internal/sinkerr"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// The metadata the sink adds to each Watermill message, beside the
// message's own headers.
const (
	// MetadataEventID is the outbox message ID, which is also the
	// Watermill message's UUID: for consumers whose transport does not
	// carry the UUID, or that read the broker without Watermill.
	MetadataEventID = "outbox-event-id"
	// MetadataEventType is Message.Type.
	MetadataEventType = "outbox-event-type"
	// MetadataEventKey is Message.Key, absent when the key is empty: what
	// a publisher with partitions should hash (watermill-kafka's
	// GeneratePartitionKey, for one).
	MetadataEventKey = "outbox-event-key"
)

// reservedPrefixes is what ReservedPrefixes returns a copy of: an array,
// so that no caller can change what every Publish reads.
var reservedPrefixes = [...]string{"outbox-event-", "_watermill_"}

// ReservedPrefixes returns the prefixes that start the names of stored
// headers that the sink does not forward (in any case): its own
// metadata, which a stored header must not override, and Watermill's,
// which marshalers write themselves (watermill-redisstream refuses a
// message that has "_watermill_message_uuid") and components act on (a
// delay, a retry count). The slice is a new copy at each call: changing
// it changes nothing in the sink.
func ReservedPrefixes() []string { return append([]string(nil), reservedPrefixes[:]...) }

// Sink publishes outbox messages through a Watermill publisher. It is
// safe for concurrent use. Make it with New; Close it when done.
type Sink struct {
	pub        message.Publisher
	topic      string
	topicFor   func(outbox.Message) (string, error)
	classifyFn func(error) Class
	check      func(string, *message.Message) error
	redact     []string
	log        *slog.Logger
	cfg        Config // for String and Close

	// slots holds a token for each call in the publisher (at most
	// MaxInFlight).
	slots  chan struct{}
	closed atomic.Bool
	done   chan struct{} // closed by Close
	once   sync.Once
}

var _ outbox.Sink = (*Sink)(nil)

// New returns a sink that publishes through cfg.Publisher, with cfg's
// defaults filled in. It fails, naming each bad field, when cfg is not
// valid. It does not touch the broker.
func New(cfg Config) (*Sink, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Sink{
		pub: cfg.Publisher, topic: cfg.Topic, topicFor: cfg.TopicFor, classifyFn: cfg.Classify, check: cfg.Check,
		redact: cfg.Redact, log: cfg.Logger, cfg: cfg,
		slots: make(chan struct{}, cfg.MaxInFlight), done: make(chan struct{}),
	}, nil
}

// Topic returns the topic of msg: Config.Topic, or Config.TopicFor's
// answer. When TopicFor fails or answers a topic that is not valid, the
// error is permanent and wraps ErrNoTopic (and TopicFor's error).
func (s *Sink) Topic(msg outbox.Message) (string, error) {
	if s.topicFor == nil {
		return s.topic, nil
	}
	topic, err := s.topicFor(msg)
	if err != nil {
		return "", s.noTopic(msg.ID, "TopicFor: "+err.Error(), err)
	}
	if why := topicFault(topic); why != "" {
		return "", s.noTopic(msg.ID, fmt.Sprintf("TopicFor answered %s, which %s", sinkerr.Quote(topic), why), nil)
	}
	return topic, nil
}

// Message returns the Watermill message that Publish sends for msg: its
// UUID is msg.ID, its payload msg.Payload (not copied: the publisher
// must not change it), its metadata msg.Headers without the reserved
// ones (see ReservedPrefixes) plus MetadataEventID, MetadataEventType
// and, for a non-empty key, MetadataEventKey.
func (s *Sink) Message(msg outbox.Message) *message.Message {
	wm := message.NewMessage(msg.ID, msg.Payload)
	for name, value := range msg.Headers {
		if !reserved(name) {
			wm.Metadata[name] = value
		}
	}
	wm.Metadata[MetadataEventID] = msg.ID
	wm.Metadata[MetadataEventType] = msg.Type
	if msg.Key != "" {
		wm.Metadata[MetadataEventKey] = msg.Key
	}
	return wm
}

func reserved(name string) bool {
	for _, p := range reservedPrefixes {
		if headernames.HasPrefixFold(name, p) {
			return true
		}
	}
	return false
}

// Publish publishes msg to its topic through the publisher, with ctx as
// the Watermill message's context (publishers that honour it, such as
// watermill-redisstream, stop when it ends), and returns when the
// publisher returns or ctx ends, whichever is first. It returns nil only
// when the publisher returned nil.
//
// When ctx ends first, Publish returns a retryable error at once and
// leaves the call to finish in the publisher (counted against
// MaxInFlight until it does): the message may still reach the broker,
// and the worker's next attempt sends it again. Consumers deduplicate by
// the Watermill UUID (the outbox message ID).
//
// Errors: permanent (wrapping ErrNoTopic) when the message has no topic,
// and (wrapping ErrUnsendable) when Config.Check refuses it;
// what Config.Classify says for an error of the publisher, and retryable
// without it; retryable when ctx ends, after Close (ErrClosed) and when
// the publisher panics (ErrPublisherPanicked). Texts start with the
// class of the failure, then the cause, the event ID and the topic, and
// hold no Config.Redact text.
func (s *Sink) Publish(ctx context.Context, msg outbox.Message) error {
	topic, err := s.Topic(msg)
	if err != nil {
		return err
	}
	if s.closed.Load() {
		return s.classify(ctx, msg.ID, topic, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return s.classify(ctx, msg.ID, topic, context.Cause(ctx))
	}
	if dropped := headernames.Matching(msg.Headers, reserved); len(dropped) > 0 {
		s.log.DebugContext(ctx, "watermill: reserved headers not forwarded; the message is sent without them",
			slog.String("event_id", msg.ID), slog.Any("headers", dropped))
	}
	wm := s.Message(msg)
	if s.check != nil {
		if err := s.check(topic, wm); err != nil {
			return s.unsendable(msg.ID, topic, err)
		}
	}
	wm.SetContext(ctx)
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return s.classify(ctx, msg.ID, topic, fmt.Errorf("waiting for one of the MaxInFlight (%d) calls in the publisher to return: %w",
			cap(s.slots), context.Cause(ctx)))
	case <-s.done:
		return s.classify(ctx, msg.ID, topic, ErrClosed)
	}
	if s.closed.Load() { // Close began while we waited: it waits for slots.
		<-s.slots
		return s.classify(ctx, msg.ID, topic, ErrClosed)
	}
	if ctx.Done() == nil { // a context that never ends: no need to watch it
		err := s.call(topic, wm)
		<-s.slots
		if err != nil {
			return s.classify(ctx, msg.ID, topic, err)
		}
		return nil
	}
	result := make(chan error, 1)
	go func() { result <- s.call(topic, wm) }()
	select {
	case err = <-result:
	case <-ctx.Done():
		select {
		case err = <-result:
		default:
			go s.late(msg.ID, topic, result) // and frees the slot
			return s.classify(ctx, msg.ID, topic, context.Cause(ctx))
		}
	}
	<-s.slots
	if err != nil {
		return s.classify(ctx, msg.ID, topic, err)
	}
	return nil
}

// call publishes wm to topic, and turns a panic of the publisher into
// an error.
func (s *Sink) call(topic string, wm *message.Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("watermill: the publisher panicked; the message will be retried",
				slog.String("event_id", wm.UUID), slog.String("topic", topic),
				slog.String("panic", s.scrub(fmt.Sprint(r))), slog.String("stack", s.scrub(string(debug.Stack()))))
			err = fmt.Errorf("%w: %s", ErrPublisherPanicked, s.scrub(fmt.Sprint(r)))
		}
	}()
	return s.pub.Publish(topic, wm)
}

// late waits for a call that Publish left when its context ended, logs
// how it ended (a nil means the message reached the broker, and the
// worker's next attempt sends it again), and frees the call's slot.
func (s *Sink) late(id, topic string, result <-chan error) {
	defer func() { <-s.slots }()
	err := <-result
	attrs := []any{slog.String("event_id", id), slog.String("topic", topic)}
	if err != nil {
		attrs = append(attrs, slog.String("error", s.scrub(err.Error())))
	}
	s.log.Debug("watermill: a publish returned after its context ended (nil error: the retry is a duplicate)", attrs...)
}

// Close stops the sink: later Publish calls fail with a retryable error
// (ErrClosed). With Config.ClosePublisher it closes the publisher, which
// ends the calls still in it. Then it waits, for up to
// Config.CloseTimeout, until no call of the sink is left in the
// publisher, so that no goroutine of the sink outlives it; the error
// says how many were left, and that of closing the publisher. Close is
// safe to call more than once (later calls return nil) and concurrently
// with Publish.
func (s *Sink) Close() error {
	first := false
	s.once.Do(func() { first = true })
	if !first {
		return nil
	}
	s.closed.Store(true)
	close(s.done)
	var errs []error
	if s.cfg.ClosePublisher {
		if err := s.pub.Close(); err != nil {
			errs = append(errs, fmt.Errorf("watermill: closing the publisher: %s", s.scrub(err.Error())))
		}
	}
	// Holding every slot means that no call is left in the publisher.
	timer := time.NewTimer(s.cfg.CloseTimeout)
	defer timer.Stop()
	for held := 0; held < cap(s.slots); held++ {
		select {
		case s.slots <- struct{}{}:
		case <-timer.C:
			left := cap(s.slots) - held
			errs = append(errs, fmt.Errorf("watermill: %d publish calls still in the publisher after CloseTimeout (%v)", left, s.cfg.CloseTimeout))
			return errors.Join(errs...)
		}
	}
	return errors.Join(errs...)
}
