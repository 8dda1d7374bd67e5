// Package natsjs is an outbox.Sink that publishes messages to NATS
// JetStream: the path for when many services need the events and one
// database should not carry them all. The outbox delivers each message to
// a stream once it is acknowledged; consumers on the other side read the
// stream with JetStream's own durable positions.
//
// Each message goes to a subject derived from it (Prefix.<type>.<key> by
// default) with Nats-Msg-Id set to the event ID, so JetStream's duplicate
// window discards the repeats that at-least-once delivery produces (a
// worker that dies between the acknowledgement and recording it). Publish
// waits for the stream's acknowledgement. The stream itself is the
// operator's: create it with subjects Prefix + ".>" and a duplicate
// window (Duplicates) longer than the worst redelivery delay you expect
// (see StreamConfig).
//
// Error classes, for the worker's retry policy:
//
//   - permanent (outbox.Permanent): no stream captures the subject; the
//     account may not publish to the subject (permissions violation); the
//     stream rejects the message itself (too large, or not the expected
//     stream); the subject is invalid; the message exceeds the server's
//     maximum payload.
//   - retryable: timeouts and cancelled contexts, no responders while a
//     stream exists (leader election, JetStream restarting), JetStream not
//     enabled or not reachable, connection loss, closed or draining
//     connections, storage limits, and anything not known to be permanent.
//
// The sink does not make connections and never logs or returns
// credentials: any user:password@ in an error text is redacted.
package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// DefaultPrefix is the first subject token when Config.Prefix is empty.
const DefaultPrefix = "outbox"

// Headers the sink sets besides the message's own headers.
const (
	HeaderEventType = "Outbox-Event-Type"
	HeaderEventKey  = "Outbox-Event-Key"
)

// Config configures a Sink.
type Config struct {
	// JetStream is the JetStream context to publish through, made by the
	// caller from its connection (jetstream.New(nc)). Required.
	JetStream jetstream.JetStream
	// Prefix is the first token(s) of the default subject. Defaults to
	// DefaultPrefix. It must be a valid subject without wildcards, at
	// most MaxPrefixBytes long.
	Prefix string
	// Subject, if set, maps a message to its subject instead of
	// Prefix.<type>.<key>. Defaults to nil (that default mapping). An
	// error from it is permanent, and so is a subject it returns that is
	// invalid or over MaxSubjectBytes.
	Subject func(outbox.Message) (string, error)
	// ExpectStream, if set, is the stream the subjects must belong to;
	// JetStream rejects a message that lands in another (permanent).
	ExpectStream string
	// Logger receives debug lines about duplicates. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Sink publishes to JetStream. It is safe for concurrent use.
type Sink struct {
	js      jetstream.JetStream
	prefix  string
	subject func(outbox.Message) (string, error)
	opts    []jetstream.PublishOpt
	log     *slog.Logger
}

var _ outbox.Sink = (*Sink)(nil)

// New validates cfg and returns a sink. It does not touch the server.
func New(cfg Config) (*Sink, error) {
	if cfg.JetStream == nil {
		return nil, errors.New("natsjs: JetStream: required (jetstream.New(nc))")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if subjectFault(cfg.Prefix) != "" {
		return nil, fmt.Errorf("natsjs: Prefix %s: must be a subject of non-empty tokens without spaces, control characters or wildcards", quote(cfg.Prefix))
	}
	if len(cfg.Prefix) > MaxPrefixBytes {
		return nil, fmt.Errorf("natsjs: Prefix %s: %d bytes, must be at most MaxPrefixBytes (%d)", quote(cfg.Prefix), len(cfg.Prefix), MaxPrefixBytes)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Sink{js: cfg.JetStream, prefix: cfg.Prefix, subject: cfg.Subject, log: cfg.Logger}
	if s.subject == nil {
		s.subject = s.defaultSubject
	}
	if cfg.ExpectStream != "" {
		s.opts = append(s.opts, jetstream.WithExpectStream(cfg.ExpectStream))
	}
	return s, nil
}

// StreamConfig is a stream for the sink's default subjects: every subject
// under prefix, with a duplicate window of dedupe.
func StreamConfig(name, prefix string, dedupe time.Duration) jetstream.StreamConfig {
	return jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".>"}, Duplicates: dedupe}
}

// Publish sends msg to its subject and waits for the stream's
// acknowledgement, bounded by ctx (the worker's PublishTimeout). A
// duplicate the stream discarded is a success: the message is there.
func (s *Sink) Publish(ctx context.Context, msg outbox.Message) error {
	subject, err := s.Subject(msg)
	if err != nil {
		return err
	}
	m := nats.NewMsg(subject)
	m.Data = msg.Payload
	for k, v := range msg.Headers {
		m.Header[k] = []string{v}
	}
	m.Header[HeaderEventType] = []string{msg.Type}
	if msg.Key != "" {
		m.Header[HeaderEventKey] = []string{msg.Key}
	}
	ack, err := s.js.PublishMsg(ctx, m, append([]jetstream.PublishOpt{jetstream.WithMsgID(msg.ID)}, s.opts...)...)
	if err != nil {
		return s.classify(ctx, msg.ID, subject, err)
	}
	if ack.Duplicate {
		s.log.DebugContext(ctx, "natsjs: the stream already had this event ID (a redelivery); discarded as a duplicate",
			slog.String("event_id", msg.ID), slog.String("stream", ack.Stream), slog.Uint64("seq", ack.Sequence))
	}
	return nil
}

// Codes of JetStream API errors that the same message will always get.
var permanentAPICodes = map[jetstream.ErrorCode]string{
	jetstream.JSErrCodeStreamMessageExceedsMaximum: "the stream's maximum message size",
	10060: "not the expected stream", // JSStreamNotMatchErr
	jetstream.JSErrCodeStreamWrongLastSequence:         "wrong last sequence",
	jetstream.JSErrCodeStreamWrongLastSequenceConstant: "wrong last sequence",
	jetstream.JSErrCodeStreamNotFound:                  "no such stream",
}

// classify turns a publish error into a retryable or permanent error
// with the event ID and subject, and no credentials.
func (s *Sink) classify(ctx context.Context, id, subject string, err error) error {
	wrap := func(what string, err error) error {
		return &publishError{msg: fmt.Sprintf("natsjs: publish %q to %q: %s: %s", id, subject, what, redact(err.Error())), err: err}
	}
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr):
		if why, ok := permanentAPICodes[apiErr.ErrorCode]; ok {
			return outbox.Permanent(wrap("rejected by the stream ("+why+")", err))
		}
		return wrap("JetStream error", err)
	case errors.Is(err, nats.ErrMaxPayload):
		return outbox.Permanent(wrap("larger than the server's maximum payload", err))
	case errors.Is(err, nats.ErrBadSubject):
		return outbox.Permanent(wrap("invalid subject", err))
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		// No responders: either no stream captures the subject (it never
		// will, until an operator adds one), or the stream is briefly
		// unavailable. Ask which.
		lookupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
		defer cancel()
		_, lerr := s.js.StreamNameBySubject(lookupCtx, subject)
		if errors.Is(lerr, jetstream.ErrStreamNotFound) {
			return outbox.Permanent(wrap("no stream captures the subject", err))
		}
		return wrap("no responders (stream unavailable)", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		// A publish the server refused for permissions is never answered:
		// the refusal arrives on the connection, not the request.
		if perm := s.js.Conn().LastError(); perm != nil && errors.Is(perm, nats.ErrPermissionViolation) &&
			strings.Contains(perm.Error(), `Publish to "`+subject+`"`) {
			return outbox.Permanent(wrap("no permission to publish to the subject", perm))
		}
		return wrap("no acknowledgement in time", err)
	}
	return wrap("failed", err)
}

// lookupTimeout bounds the stream lookup after no responders; it runs
// even when the publish's own context has run out.
const lookupTimeout = 2 * time.Second
