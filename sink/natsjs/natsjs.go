// Package natsjs is an outbox.Sink that publishes messages to NATS
// JetStream: the path for when many services need the events and one
// database should not carry them all. The outbox delivers each message to
// a stream once it is acknowledged; consumers on the other side read the
// stream with JetStream's own durable positions.
//
// Each message goes to a subject derived from it (Prefix.<type>.<key> by
// default, each token escaped by Token) with Nats-Msg-Id set to the event
// ID, so JetStream's duplicate window discards the repeats that
// at-least-once delivery produces (a worker that dies between the
// acknowledgement and recording it). Publish waits for the stream's
// acknowledgement. The stream itself is the operator's: create it with
// subjects Prefix + ".>" and a duplicate window (Duplicates) longer than
// the worst redelivery delay you expect (see StreamConfig).
//
// No message can close the caller's connection (given the server's
// default max_control_line of 4096 bytes and an inbox prefix of ordinary
// length): what the server would answer by closing it, or the client
// would refuse, is checked before anything is sent, and such a message
// fails alone, permanently, with ErrUnsendable:
//
//   - a subject (default or Config.Subject) over MaxSubjectBytes (1024),
//     or not a literal subject (empty token, space, control character,
//     '*' or '>', invalid UTF-8). The default subject fits whenever the
//     Type and Key are mostly ASCII letters, digits, '-' and '_'; every
//     other byte takes three (%XX), so 255 emoji do not fit.
//   - a header that cannot arrive as stored: a name that is empty, not
//     printable ASCII, or has a space or one of the characters
//     " ( ) , / : ; < = > ? @ [ \ ] { }; a value with CR, LF or another
//     control character (tab is fine), invalid UTF-8, or leading or
//     trailing spaces or tabs; a name or value that contains
//     "Nats-Msg-Id" (or, with ExpectStream, "Nats-Expected-Stream"),
//     which a 2.9 server takes for the real header, losing the
//     deduplication. This holds for the sink's own headers too: the event
//     ID, Type and Key travel in headers.
//   - a header block over MaxHeaderBytes (32 KiB).
//
// Reserved headers are not forwarded: a stored header whose name starts
// with "Nats-" or "Outbox-Event-", in any case (see ReservedHeader), is
// left out with a debug log line, and the message is delivered without
// it, under its own event ID. A stored Nats-Rollup cannot purge the
// stream, a Nats-Expected-* cannot fail the publish, a Nats-Msg-Id cannot
// replace the event ID. Msg returns the message as it would be sent, for
// producers that want to refuse an unsendable message before Enqueue.
//
// Error classes, for the worker's retry policy:
//
//   - permanent (outbox.Permanent), the message's own fault: the
//     ErrUnsendable cases above; the Subject mapping fails; the stream
//     rejects the message itself (too large, header block too large,
//     wrong last sequence); the message exceeds the server's maximum
//     payload (refused by the client before sending).
//   - unavailable (outbox.Unavailable), the infrastructure's fault, which
//     an operator fixes and which must not dead-letter the backlog: no
//     stream captures the subject (the stream was not created yet, or was
//     deleted); the subject lands in another stream than ExpectStream;
//     the account may not publish to the subject (permissions violation);
//     JetStream is not enabled (nothing answers its API). The worker retries these whatever its
//     retry policy, holds the sink off and alerts (see outbox.Unavailable;
//     WorkerOptions.DeadLetterUnavailable dead-letters them instead).
//   - retryable: timeouts and cancelled contexts, no responders while a
//     stream exists (leader election, JetStream restarting), connection
//     loss, closed or draining connections, storage limits, and anything
//     not known to be permanent or unavailable.
//
// Every error text starts with the class of the failure, then the
// underlying error, then the event ID and subject, so that a last error
// cut at a column's width (outboxctl list, the dashboard) still shows
// what went wrong:
//
//	natsjs: no stream captures the subject: nats: no response from stream (event "e-1", subject "room.RoomGiftSent.r-1")
//
// The sink does not make connections and never logs or returns
// credentials: a user:password@ or token@ in an error text is redacted,
// and an error in the chain that carries one is not exposed (errors.Is
// still finds it). Header values never appear in errors or log lines.
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
	// ExpectStream, if set, is the stream the subjects must belong to
	// (sent as Nats-Expected-Stream); JetStream rejects a message that
	// lands in another (permanent). Defaults to "" (no check).
	ExpectStream string
	// Logger receives debug lines about duplicates and reserved headers
	// left out. Defaults to slog.Default().
	Logger *slog.Logger
}

// Sink publishes to JetStream. It is safe for concurrent use.
type Sink struct {
	js           jetstream.JetStream
	prefix       string
	subject      func(outbox.Message) (string, error)
	expectStream string
	log          *slog.Logger
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
	if cfg.ExpectStream != "" && (valueFault(cfg.ExpectStream) != "" || strings.ContainsAny(cfg.ExpectStream, " \t.*>/\\")) {
		return nil, fmt.Errorf("natsjs: ExpectStream %s: must be a stream name (no spaces, control characters, '.', '*', '>', '/' or '\\')", quote(cfg.ExpectStream))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Sink{js: cfg.JetStream, prefix: cfg.Prefix, subject: cfg.Subject, expectStream: cfg.ExpectStream, log: cfg.Logger}
	if s.subject == nil {
		s.subject = s.defaultSubject
	}
	return s, nil
}

// StreamConfig is a stream for the sink's default subjects: every subject
// under prefix, with a duplicate window of dedupe.
func StreamConfig(name, prefix string, dedupe time.Duration) jetstream.StreamConfig {
	return jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".>"}, Duplicates: dedupe}
}

// Msg returns the NATS message that Publish sends for msg: its subject,
// the payload, and the headers: the message's own except the reserved
// ones (ReservedHeader), Outbox-Event-Type, Outbox-Event-Key (when the
// key is not empty), Nats-Msg-Id (the event ID) and, with ExpectStream,
// Nats-Expected-Stream. Or the permanent error Publish returns without
// sending anything (see Subject; ErrUnsendable). Producers may call it
// before Enqueue to refuse a message this sink could never deliver. It is
// safe for concurrent use and does not touch the server.
func (s *Sink) Msg(msg outbox.Message) (*nats.Msg, error) {
	subject, err := s.Subject(msg)
	if err != nil {
		return nil, err
	}
	h, err := s.headers(msg)
	if err != nil {
		return nil, err
	}
	return &nats.Msg{Subject: subject, Header: h, Data: msg.Payload}, nil
}

// Publish sends msg as Msg makes it and waits for the stream's
// acknowledgement, bounded by ctx (the worker's PublishTimeout). A
// duplicate the stream discarded is a success: the message is there.
// Errors are classified as the package documentation says.
func (s *Sink) Publish(ctx context.Context, msg outbox.Message) error {
	m, err := s.Msg(msg)
	if err != nil {
		return err
	}
	if dropped := reservedIn(msg.Headers); len(dropped) > 0 {
		s.log.DebugContext(ctx, "natsjs: reserved headers not forwarded; the message is sent without them",
			slog.String("event_id", msg.ID), slog.Any("headers", dropped))
	}
	// The message ID and expected stream are in m's headers already;
	// without options PublishMsg keeps its default retries.
	ack, err := s.js.PublishMsg(ctx, m)
	if err != nil {
		return s.classify(ctx, msg.ID, m.Subject, err)
	}
	if ack.Duplicate {
		s.log.DebugContext(ctx, "natsjs: the stream already had this event ID (a redelivery); discarded as a duplicate",
			slog.String("event_id", msg.ID), slog.String("stream", ack.Stream), slog.Uint64("seq", ack.Sequence))
	}
	return nil
}

// Codes of JetStream API errors that the same message will always get.
var permanentAPICodes = map[jetstream.ErrorCode]string{
	jetstream.JSErrCodeStreamMessageExceedsMaximum:     "the stream's maximum message size",
	jsErrCodeStreamHeaderExceedsMaximum:                "header block over 64 KiB",
	jetstream.JSErrCodeStreamWrongLastSequence:         "wrong last sequence",
	jetstream.JSErrCodeStreamWrongLastSequenceConstant: "wrong last sequence",
}

// Codes of JetStream API errors that say the streams are not set up for
// the subject: an operator's to fix, so Unavailable.
var unavailableAPICodes = map[jetstream.ErrorCode]string{
	jsErrCodeStreamNotMatch:                          "not the expected stream",
	jetstream.JSErrCodeStreamNotFound:                "no such stream",
	jetstream.JSErrCodeJetStreamNotEnabled:           "JetStream is not enabled",
	jetstream.JSErrCodeJetStreamNotEnabledForAccount: "JetStream is not enabled for the account",
}

// Server error codes that nats.go has no constant for.
const (
	jsErrCodeStreamNotMatch             jetstream.ErrorCode = 10060 // JSStreamNotMatchErr
	jsErrCodeStreamHeaderExceedsMaximum jetstream.ErrorCode = 10097 // JSStreamHeaderExceedsMaximumErr
)

// classify turns a publish error into a retryable or permanent error:
// its class first, then the event ID and subject (see errorText), and no
// credentials.
func (s *Sink) classify(ctx context.Context, id, subject string, err error) error {
	wrap := func(what string, err error) error { return newPublishError(what, id, subject, err) }
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr):
		if why, ok := permanentAPICodes[apiErr.ErrorCode]; ok {
			return outbox.Permanent(wrap("rejected by the stream ("+why+")", err))
		}
		if why, ok := unavailableAPICodes[apiErr.ErrorCode]; ok {
			return outbox.Unavailable(wrap("rejected by the stream ("+why+")", err))
		}
		return wrap("JetStream error", err)
	case errors.Is(err, nats.ErrMaxPayload):
		return outbox.Permanent(wrap("larger than the server's maximum payload", err))
	case errors.Is(err, nats.ErrBadSubject):
		return outbox.Permanent(wrap("invalid subject", err))
	case errors.Is(err, nats.ErrBadHeaderMsg):
		return outbox.Permanent(wrap("headers the client cannot encode", err))
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		// No responders: either no stream captures the subject (it never
		// will, until an operator adds one), or the stream is briefly
		// unavailable. Ask which.
		lookupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
		defer cancel()
		_, lerr := s.js.StreamNameBySubject(lookupCtx, subject)
		switch {
		case errors.Is(lerr, jetstream.ErrStreamNotFound):
			return outbox.Unavailable(wrap("no stream captures the subject", err))
		case errors.Is(lerr, jetstream.ErrJetStreamNotEnabled), errors.Is(lerr, jetstream.ErrJetStreamNotEnabledForAccount), errors.Is(lerr, nats.ErrNoResponders):
			// Nothing answers JetStream's API either: not enabled (or,
			// briefly, restarting: Unavailable is retried all the same).
			return outbox.Unavailable(wrap("JetStream is not enabled or not answering", err))
		}
		return wrap("no responders (stream unavailable)", err)
	case errors.Is(err, context.Canceled):
		return wrap("cancelled before the acknowledgement", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		// A publish the server refused for permissions is never answered:
		// the refusal arrives on the connection, not the request.
		if perm := s.js.Conn().LastError(); perm != nil && errors.Is(perm, nats.ErrPermissionViolation) &&
			strings.Contains(perm.Error(), `Publish to "`+subject+`"`) {
			return outbox.Unavailable(wrap("no permission to publish to the subject", perm))
		}
		return wrap("no acknowledgement in time", err)
	}
	return wrap("publish failed", err)
}

// lookupTimeout bounds the stream lookup after no responders; it runs
// even when the publish's own context has run out.
const lookupTimeout = 2 * time.Second
