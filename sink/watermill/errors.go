package watermill

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
	"github.com/outboxrelay/outboxrelay/internal/sinkerr"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// ErrNoTopic is wrapped by the permanent error that Topic and Publish
// return when a message has no topic: Config.TopicFor failed for it, or
// its answer is not a valid topic. Nothing of such a message is sent.
var ErrNoTopic = errors.New("watermill: no topic for the message")

// ErrUnsendable is wrapped by the permanent error Publish returns when
// Config.Check refuses a message. Nothing of such a message is sent.
var ErrUnsendable = errors.New("watermill: message cannot be sent as stored")

// ErrClosed is the cause of the (retryable) error Publish returns after
// Close.
var ErrClosed = errors.New("watermill: sink closed")

// ErrPublisherPanicked is the cause of the (retryable) error Publish
// returns when the publisher panicked; the panic is logged with its
// stack.
var ErrPublisherPanicked = errors.New("watermill: the publisher panicked")

// texts lays out the text of an error about one event: the class of
// the failure first, then what explains it, then the event ID and the
// topic (when known), quoted:
//
//	watermill: <what>: <detail> (event "<id>", topic "<topic>")
var texts = sinkerr.Layout{Prefix: "watermill", Dest: "topic", Quote: sinkerr.Quote}

// newError is the error of class what for the event id on topic ("" when
// not known), caused by err: its text is scrubbed of the Config.Redact
// texts, and its cause stays available to errors.Is and errors.As
// (unless its text held one of them: see scrubbed).
func (s *Sink) newError(what, id, topic string, err error) error {
	return &sinkerr.Error{Text: s.scrub(texts.Text(what, err.Error(), id, topic)), Cause: s.scrubbed(err)}
}

// noTopic is the permanent ErrNoTopic error for the event id, caused by
// cause (TopicFor's error; nil for a topic that is not valid).
func (s *Sink) noTopic(id, why string, cause error) error {
	return outbox.Permanent(&sinkerr.Error{Text: s.scrub(texts.Text("no topic for the message", why, id, "")), Sentinel: ErrNoTopic, Cause: s.scrubbed(cause)})
}

// unsendable is the permanent ErrUnsendable error for the event id on
// topic, caused by Config.Check's err.
func (s *Sink) unsendable(id, topic string, err error) error {
	return outbox.Permanent(&sinkerr.Error{Text: s.scrub(texts.Text("message cannot be sent as stored", err.Error(), id, topic)), Sentinel: ErrUnsendable, Cause: s.scrubbed(err)})
}

// CheckAMQP is a Config.Check for AMQP 0-9-1 publishers (watermill-amqp):
// it refuses metadata names over 255 bytes, which AMQP cannot carry (a
// field name is a short string) and amqp091-go cuts silently to their
// length modulo 256, so that the message would arrive with another
// header. (Topics over 255 bytes the sink refuses anyway: MaxTopicBytes.)
func CheckAMQP(_ string, msg *message.Message) error {
	for name := range msg.Metadata {
		if len(name) > 255 {
			return fmt.Errorf("header name %s is %d bytes; AMQP field names are at most 255", sinkerr.Quote(name), len(name))
		}
	}
	return nil
}

// classify turns the error of publishing the event id to topic into the
// error Publish returns: retryable, Permanent or Unavailable, its text
// starting with the class.
func (s *Sink) classify(ctx context.Context, id, topic string, err error) error {
	wrap := func(what string, err error) error { return s.newError(what, id, topic, err) }
	switch {
	case errors.Is(err, ErrClosed):
		return wrap("sink closed", err)
	case errors.Is(err, ErrPublisherPanicked):
		return wrap("publish failed", err)
	case ctx.Err() != nil:
		// The context ended: whatever the publisher says (many wrap the
		// context's error), the message did nothing wrong.
		return wrap("no acknowledgement in time", err)
	}
	class := Retryable
	if s.classifyFn != nil {
		class = s.classifyFn(err)
	}
	switch class {
	case Permanent:
		return outbox.Permanent(wrap("refused by the broker", err))
	case Unavailable:
		return outbox.Unavailable(wrap("destination not available", err))
	}
	return wrap("publish failed", err)
}

// scrub replaces every Config.Redact text in text with the redaction
// mark.
func (s *Sink) scrub(text string) string {
	for _, r := range s.redact {
		text = strings.ReplaceAll(text, r, secretfmt.Mark)
	}
	return text
}

// scrubbed is err, unless the text of some error in its chain holds a
// Config.Redact text: then a stand-in with the scrubbed text, through
// which errors.Is still finds the context's errors and the sink's
// sentinels, but errors.As and Unwrap reach nothing.
func (s *Sink) scrubbed(err error) error {
	if err == nil || len(s.redact) == 0 {
		return err
	}
	holds := secretfmt.AnyInChain(err, func(e error) bool {
		for _, r := range s.redact {
			if strings.Contains(e.Error(), r) || strings.Contains(fmt.Sprintf("%#v", e), r) {
				return true
			}
		}
		return false
	})
	if !holds {
		return err
	}
	return secretfmt.Cause(s.scrub(err.Error()), err, ErrClosed, ErrPublisherPanicked)
}

// topicFault says why name is not a valid topic, or "".
func topicFault(name string) string {
	if why := sinkerr.SizeFault(name, MaxTopicBytes, "MaxTopicBytes"); why != "" {
		return why
	}
	if !utf8.ValidString(name) {
		return "is not valid UTF-8"
	}
	if i := strings.IndexFunc(name, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(name[i:])
		return fmt.Sprintf("has the control character %q at byte %d", r, i)
	}
	return ""
}
