package outboxotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxrelay/outboxrelay/internal/safetext"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// Attributes of publish spans that the semantic conventions do not name.
const (
	// AttrMessageKey is the message's Key, when it has one.
	AttrMessageKey = attribute.Key("outbox.message.key")
	// AttrPermanent is true on a failed publish whose error the sink
	// marked with outbox.Permanent, and false on other failures.
	AttrPermanent = attribute.Key("outbox.error.permanent")
)

// OperationName is the messaging.operation.name of publish spans, and the
// first word of their names.
const OperationName = "publish"

// ErrorTypePermanent is the error.type of a failed publish whose error
// the sink marked with outbox.Permanent.
const ErrorTypePermanent = "outbox.permanent"

// WrapSink returns a Sink that starts a span around each next.Publish.
//
// The span, of kind PRODUCER and named "publish <destination>", links to
// the writer's span found in the message's headers (see Inject); a message
// with no trace context, or a malformed one, gets a span with no link. Its
// parent is whatever span ctx holds (none on the worker's own path). The
// writer's baggage, if the headers carry one and ctx has none, is put in
// the context next sees, with the span.
//
// When next fails, the span records the error, its status is Error with
// the error text (shortened as the worker shortens the stored last error),
// and error.type and outbox.error.permanent are set. When next panics, the
// span ends with status Error and the panic goes on to the worker, which
// turns it into an error.
//
// The returned Sink is safe for concurrent use if next is, and returns
// exactly what next returns.
func WrapSink(next outbox.Sink, opts ...Option) outbox.Sink {
	c := newConfig(opts)
	return &tracingSink{
		next:   next,
		config: c,
		tracer: c.provider.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
	}
}

type tracingSink struct {
	next outbox.Sink
	config
	tracer trace.Tracer
}

// Publish implements outbox.Sink.
func (s *tracingSink) Publish(ctx context.Context, msg outbox.Message) (err error) {
	writer := s.propagator.Extract(context.Background(), propagation.MapCarrier(msg.Headers))
	if bag := baggage.FromContext(writer); bag.Len() > 0 && baggage.FromContext(ctx).Len() == 0 {
		ctx = baggage.ContextWithBaggage(ctx, bag)
	}
	dest := s.destination(msg)
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(s.system),
		semconv.MessagingOperationTypeSend,
		semconv.MessagingOperationName(OperationName),
		semconv.MessagingDestinationName(dest),
		semconv.MessagingMessageID(msg.ID),
	}
	if msg.Key != "" {
		attrs = append(attrs, AttrMessageKey.String(msg.Key))
	}
	start := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...)}
	if sc := trace.SpanContextFromContext(writer); sc.IsValid() {
		start = append(start, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	name := OperationName
	if dest != "" {
		name += " " + dest
	}
	ctx, span := s.tracer.Start(ctx, name, start...)
	defer func() {
		if r := recover(); r != nil {
			span.SetStatus(codes.Error, "sink panicked")
			span.End()
			panic(r)
		}
		span.End()
	}()
	err = s.next.Publish(ctx, msg)
	if err != nil {
		failed(span, err)
	}
	return err
}

// failed marks span as a failed publish.
func failed(span trace.Span, err error) {
	permanent := outbox.IsPermanent(err)
	errType := semconv.ErrorType(err)
	switch {
	case permanent:
		errType = semconv.ErrorTypeKey.String(ErrorTypePermanent)
	case errors.Is(err, context.DeadlineExceeded):
		errType = semconv.ErrorTypeKey.String("timeout")
	case errors.Is(err, context.Canceled):
		errType = semconv.ErrorTypeKey.String("canceled")
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, safetext.Truncate(err.Error(), maxStatusBytes))
	span.SetAttributes(errType, AttrPermanent.Bool(permanent))
}

// maxStatusBytes bounds the error text of a span's status: as much as the
// stores keep of it (backend.MaxLastErrorBytes).
const maxStatusBytes = 512
