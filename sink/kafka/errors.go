package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
	"github.com/outboxrelay/outboxrelay/internal/sinkerr"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// ErrUnsendable is wrapped by the permanent error that Record, Topic and
// Publish return for a message Kafka cannot carry as it is stored: its
// topic is not a valid name, a header name is not valid UTF-8, or the
// record is over MaxRecordBytes. Nothing of such a message is sent.
var ErrUnsendable = errors.New("kafka: message cannot be sent as stored")

// ErrClosed is the cause of the error Publish returns after Close.
var ErrClosed = errors.New("kafka: sink closed")

// Class is how the sink classes a Kafka error code: the type the
// broker sinks share (watermill.Class is the same type).
type Class = sinkerr.Class

// The classes of Codes.
const (
	// Retryable: the same message may pass later (a leader moving, a
	// broker restarting, a timeout). A plain error.
	Retryable = sinkerr.Retryable
	// Permanent: the broker refused the record itself; it never will
	// take it (outbox.Permanent). The sink calls a record permanent only
	// when the broker refused it in a batch of its own (see Publish).
	Permanent = sinkerr.Permanent
	// Unavailable: the destination is not set up for the message (no
	// such topic, no rights, refused credentials) until an operator
	// fixes it (outbox.Unavailable).
	Unavailable = sinkerr.Unavailable
)

// codeClass is a class and the text an error of it starts with.
type codeClass struct {
	class Class
	what  string
}

// codes are the Kafka error codes the sink does not simply retry, and
// those it retries that deserve a text of their own. Any other code is
// retryable (franz-go retries most of them itself before Publish sees
// them: NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, REQUEST_TIMED_OUT,
// NOT_ENOUGH_REPLICAS, NETWORK_EXCEPTION, …).
var codes = map[int16]codeClass{
	kerr.MessageTooLarge.Code:    {Permanent, "rejected by the broker as too large for the topic"},
	kerr.RecordListTooLarge.Code: {Permanent, "rejected by the broker as too large for the topic"},
	kerr.InvalidRecord.Code:      {Permanent, "rejected by the broker as an invalid record"},
	kerr.CorruptMessage.Code:     {Permanent, "rejected by the broker as corrupt"},

	kerr.UnknownTopicOrPartition.Code:            {Unavailable, "the topic does not exist"},
	kerr.UnknownTopicID.Code:                     {Unavailable, "the topic does not exist"},
	kerr.InvalidTopicException.Code:              {Unavailable, "the broker refuses the topic name"},
	kerr.TopicAuthorizationFailed.Code:           {Unavailable, "not authorized to write to the topic"},
	kerr.ClusterAuthorizationFailed.Code:         {Unavailable, "not authorized on the cluster (idempotent write)"},
	kerr.TransactionalIDAuthorizationFailed.Code: {Unavailable, "not authorized for the transactional ID"},
	kerr.SaslAuthenticationFailed.Code:           {Unavailable, "SASL authentication failed"},
	kerr.UnsupportedSaslMechanism.Code:           {Unavailable, "the broker does not support the SASL mechanism"},
	kerr.IllegalSaslState.Code:                   {Unavailable, "SASL authentication failed"},
	kerr.InvalidRequiredAcks.Code:                {Unavailable, "the broker refuses acks=all"},

	kerr.NotLeaderForPartition.Code:        {Retryable, "the partition's leader moved"},
	kerr.LeaderNotAvailable.Code:           {Retryable, "the partition has no leader"},
	kerr.RequestTimedOut.Code:              {Retryable, "the broker timed out"},
	kerr.NetworkException.Code:             {Retryable, "network error"},
	kerr.BrokerNotAvailable.Code:           {Retryable, "broker not available"},
	kerr.NotEnoughReplicas.Code:            {Retryable, "not enough in-sync replicas"},
	kerr.NotEnoughReplicasAfterAppend.Code: {Retryable, "not enough in-sync replicas"},
	kerr.KafkaStorageError.Code:            {Retryable, "the broker's storage failed"},
	kerr.ThrottlingQuotaExceeded.Code:      {Retryable, "throttled by a quota"},
}

// Code returns how Publish classes the Kafka error code, and the text its
// error starts with (after "kafka: "). Codes it does not list are
// Retryable ("broker error").
func Code(code int16) (Class, string) {
	if c, ok := codes[code]; ok {
		return c.class, c.what
	}
	return Retryable, "broker error"
}

// texts lays out the text of an error about one event: the class of
// the failure first, then what explains it (the underlying error's
// text), then the event ID and the topic (when known), quoted:
//
//	kafka: <class>: <detail> (event "<id>", topic "<topic>")
var texts = sinkerr.Layout{Prefix: "kafka", Dest: "topic", Quote: strconv.Quote}

// newError is the error of class what for the event id on topic ("" when
// not known), caused by err: its text is scrubbed of the SASL password,
// and its cause stays available to errors.Is and errors.As (unless its
// text held the password: see scrubbed).
func (s *Sink) newError(what, id, topic string, err error) error {
	return &sinkerr.Error{Text: s.scrub(texts.Text(what, err.Error(), id, topic)), Cause: s.scrubbed(err)}
}

// unsendable is the permanent ErrUnsendable error for the event id.
func (s *Sink) unsendable(id, why string) error {
	return outbox.Permanent(&sinkerr.Error{Text: s.scrub(texts.Text("message cannot be sent as stored", why, id, "")), Sentinel: ErrUnsendable})
}

// scrub replaces the SASL password, wherever it occurs in text, with the
// redaction mark. No franz-go error is known to hold it; this is a
// second line.
func (s *Sink) scrub(text string) string {
	if s.password == "" {
		return text
	}
	return strings.ReplaceAll(text, s.password, secretfmt.Mark)
}

// scrubbed is err, unless the text of some error in its chain holds the
// password: then a stand-in with the scrubbed text, through which
// errors.Is still finds every error of the chain but errors.As and Unwrap
// reach none.
func (s *Sink) scrubbed(err error) error {
	if s.password == "" || !chainContains(err, s.password) {
		return err
	}
	return &scrubbedError{text: s.scrub(err.Error()), err: err}
}

type scrubbedError struct {
	text string
	err  error
}

func (e *scrubbedError) Error() string        { return e.text }
func (e *scrubbedError) Is(target error) bool { return errors.Is(e.err, target) }

// chainContains reports whether the text of err or of any error it wraps
// contains secret (a chain too long to check counts).
func chainContains(err error, secret string) bool {
	return secretfmt.AnyInChain(err, func(e error) bool { return strings.Contains(e.Error(), secret) })
}

// classify turns the error of producing the event id to topic into the
// error Publish returns: retryable, Permanent or Unavailable, its text
// starting with the class. alone says that err came from the record in a
// batch of its own (see Publish); without it a refusal of the record
// itself is retried, since it may have been another record's.
func (s *Sink) classify(ctx context.Context, id, topic string, err error, alone bool) error {
	wrap := func(what string, err error) error { return s.newError(what, id, topic, err) }
	var ke *kerr.Error
	switch {
	case errors.Is(err, ErrClosed):
		return wrap("sink closed", err)
	case errors.Is(err, kgo.ErrClientClosed):
		return wrap("client closed", err)
	case errors.As(err, &ke):
		class, what := Code(ke.Code)
		switch {
		case class == Permanent && !alone:
			return wrap(what+" (with the records batched with it; not yet tried alone)", err)
		case class == Permanent:
			return outbox.Permanent(wrap(what, err))
		case class == Unavailable:
			return outbox.Unavailable(wrap(what, err))
		}
		return wrap(what, err)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		if ctx.Err() == nil {
			// Another record's context ended, and franz-go failed the
			// records buffered with it for the partition.
			return wrap("failed with another record of its partition", err)
		}
		if cerr := s.watch.lastErr(); cerr != nil {
			// The client cannot connect: say why.
			cerr = fmt.Errorf("%w; last connection attempt: %w", err, cerr)
			if class, what := connClass(cerr); class == Unavailable {
				return outbox.Unavailable(wrap(what, cerr))
			}
			return wrap("no acknowledgement in time, cannot connect", cerr)
		}
		return wrap("no acknowledgement in time", err)
	}
	if class, what := connClass(err); class == Unavailable {
		return outbox.Unavailable(wrap(what, err))
	}
	return wrap("produce failed", err)
}

// connClass classes errors of setting up a connection: refused
// credentials and a broker's certificate that does not verify are the
// set-up's to fix (Unavailable); anything else (refused, reset, timed
// out) is retried.
func connClass(err error) (Class, string) {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return Code(ke.Code)
	}
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verify           *tls.CertificateVerificationError
	)
	if errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &verify) {
		return Unavailable, "TLS: the broker's certificate does not verify"
	}
	return Retryable, ""
}
