package outboxotel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxotel"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value, len(s.Attributes))
	for _, a := range s.Attributes {
		m[a.Key] = a.Value
	}
	return m
}

// seen is a sink that records the span context each call got.
type seen struct {
	mu    sync.Mutex
	ctxs  map[string]context.Context
	err   error
	panic bool
}

func (s *seen) Publish(ctx context.Context, msg outbox.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctxs == nil {
		s.ctxs = map[string]context.Context{}
	}
	s.ctxs[msg.ID] = ctx
	if s.panic {
		panic("sink bug")
	}
	return s.err
}

func (s *seen) ctx(id string) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctxs[id]
}

func TestWrapSinkMakesOnePublishSpanLinkedToTheWriter(t *testing.T) {
	t.Parallel()
	exp, tp := tracing(t)
	ctx, writer := writerSpan(t, tp)
	msg := outbox.Message{ID: "evt-1", Key: "order-1", Type: "OrderPaid"}
	outboxotel.Inject(ctx, &msg, outboxotel.WithPropagator(propagator))
	writer.End()
	exp.Reset()

	next := &seen{}
	sink := outboxotel.WrapSink(next, outboxotel.WithTracerProvider(tp), outboxotel.WithPropagator(propagator),
		outboxotel.WithSystem("nats"), outboxotel.WithDestination(func(m outbox.Message) string { return "orders." + m.Type }))
	require.NoError(t, sink.Publish(context.Background(), msg))

	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	s := spans[0]
	require.Equal(t, "publish orders.OrderPaid", s.Name)
	require.Equal(t, trace.SpanKindProducer, s.SpanKind)
	require.Equal(t, codes.Unset, s.Status.Code)
	require.Equal(t, outboxotel.ScopeName, s.InstrumentationScope.Name)
	require.False(t, s.Parent.IsValid(), "linked, not a child of the writer")
	require.Len(t, s.Links, 1)
	require.Equal(t, writer.SpanContext().TraceID(), s.Links[0].SpanContext.TraceID())
	require.Equal(t, writer.SpanContext().SpanID(), s.Links[0].SpanContext.SpanID())
	require.Equal(t, map[attribute.Key]attribute.Value{
		"messaging.system":           attribute.StringValue("nats"),
		"messaging.operation.type":   attribute.StringValue("send"),
		"messaging.operation.name":   attribute.StringValue("publish"),
		"messaging.destination.name": attribute.StringValue("orders.OrderPaid"),
		"messaging.message.id":       attribute.StringValue("evt-1"),
		"outbox.message.key":         attribute.StringValue("order-1"),
	}, attrs(s))

	// The sink inside continues the trace from the publish span.
	inner := trace.SpanContextFromContext(next.ctx("evt-1"))
	require.Equal(t, s.SpanContext.SpanID(), inner.SpanID())
	out := propagation.MapCarrier{}
	propagator.Inject(next.ctx("evt-1"), out)
	require.Contains(t, out[outbox.HeaderTraceParent], s.SpanContext.SpanID().String())
}

func TestWrapSinkDefaults(t *testing.T) {
	t.Parallel()
	exp, tp := tracing(t)
	sink := outboxotel.WrapSink(&seen{}, outboxotel.WithTracerProvider(tp), outboxotel.WithSystem(""),
		outboxotel.WithDestination(nil), outboxotel.WithPropagator(nil))
	require.NoError(t, sink.Publish(context.Background(), outbox.Message{ID: "evt-1", Type: "OrderPaid"}))
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	require.Equal(t, "publish OrderPaid", spans[0].Name)
	a := attrs(spans[0])
	require.Equal(t, outboxotel.DefaultSystem, a["messaging.system"].AsString())
	require.Equal(t, "OrderPaid", a["messaging.destination.name"].AsString())
	require.NotContains(t, a, attribute.Key("outbox.message.key"), "no key, no attribute")
}

func TestWrapSinkRecordsFailures(t *testing.T) {
	t.Parallel()
	plain := errors.New("upstream said 503")
	for _, tc := range []struct {
		name      string
		err       error
		permanent bool
		errType   string
	}{
		{"transient", plain, false, "*errors.errorString"},
		{"permanent", outbox.Permanent(fmt.Errorf("group gone: %w", plain)), true, outboxotel.ErrorTypePermanent},
		{"timeout", fmt.Errorf("send: %w", context.DeadlineExceeded), false, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			exp, tp := tracing(t)
			sink := outboxotel.WrapSink(&seen{err: tc.err}, outboxotel.WithTracerProvider(tp))
			err := sink.Publish(context.Background(), outbox.Message{ID: "evt-1", Type: "OrderPaid"})
			require.Equal(t, tc.err, err, "the error is returned as the sink gave it")
			require.Equal(t, tc.permanent, outbox.IsPermanent(err))

			spans := exp.GetSpans()
			require.Len(t, spans, 1)
			s := spans[0]
			require.Equal(t, codes.Error, s.Status.Code)
			require.Equal(t, tc.err.Error(), s.Status.Description)
			require.Len(t, s.Events, 1)
			require.Equal(t, "exception", s.Events[0].Name)
			a := attrs(s)
			require.Equal(t, tc.permanent, a[outboxotel.AttrPermanent].AsBool())
			require.Equal(t, tc.errType, a["error.type"].AsString())
		})
	}
}

func TestWrapSinkShortensALongErrorInTheStatus(t *testing.T) {
	t.Parallel()
	exp, tp := tracing(t)
	sink := outboxotel.WrapSink(&seen{err: errors.New(strings.Repeat("x", 100_000))}, outboxotel.WithTracerProvider(tp))
	require.Error(t, sink.Publish(context.Background(), outbox.Message{ID: "evt-1", Type: "OrderPaid"}))
	require.Less(t, len(exp.GetSpans()[0].Status.Description), 10_000)
}

func TestWrapSinkWithoutWriterContextMakesASpanWithoutLink(t *testing.T) {
	t.Parallel()
	for name, headers := range map[string]map[string]string{
		"no headers":         nil,
		"other headers":      {"request_id": "r-1"},
		"garbage":            {outbox.HeaderTraceParent: "not a traceparent"},
		"zero trace id":      {outbox.HeaderTraceParent: "00-00000000000000000000000000000000-b7ad6b7169203331-01"},
		"bad version":        {outbox.HeaderTraceParent: "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		"upper case hex":     {outbox.HeaderTraceParent: "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01"},
		"invalid UTF-8":      {outbox.HeaderTraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b71692033\xff1-01"},
		"huge":               {outbox.HeaderTraceParent: strings.Repeat("0", 1<<20)},
		"control characters": {outbox.HeaderTraceParent: "00-\n\r\x00", "tracestate": "\x00", "baggage": "%%%;\x01"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			exp, tp := tracing(t)
			sink := outboxotel.WrapSink(&seen{}, outboxotel.WithTracerProvider(tp), outboxotel.WithPropagator(propagator))
			require.NoError(t, sink.Publish(context.Background(), outbox.Message{ID: "evt-1", Type: "OrderPaid", Headers: headers}))
			spans := exp.GetSpans()
			require.Len(t, spans, 1)
			require.Empty(t, spans[0].Links)
			require.Equal(t, "publish OrderPaid", spans[0].Name)
		})
	}
}

func TestWrapSinkEndsTheSpanWhenTheSinkPanics(t *testing.T) {
	t.Parallel()
	exp, tp := tracing(t)
	sink := outboxotel.WrapSink(&seen{panic: true}, outboxotel.WithTracerProvider(tp))
	require.PanicsWithValue(t, "sink bug", func() {
		_ = sink.Publish(context.Background(), outbox.Message{ID: "evt-1", Type: "OrderPaid"})
	})
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	require.Equal(t, codes.Error, spans[0].Status.Code)
}

func TestWrapSinkCarriesTheWritersBaggage(t *testing.T) {
	t.Parallel()
	_, tp := tracing(t)
	ctx, _ := writerSpan(t, tp)
	member, err := baggage.NewMember("tenant", "acme")
	require.NoError(t, err)
	bag, err := baggage.New(member)
	require.NoError(t, err)
	msg := outbox.Message{ID: "evt-1", Type: "OrderPaid"}
	outboxotel.Inject(baggage.ContextWithBaggage(ctx, bag), &msg, outboxotel.WithPropagator(propagator))

	next := &seen{}
	sink := outboxotel.WrapSink(next, outboxotel.WithTracerProvider(tp), outboxotel.WithPropagator(propagator))
	require.NoError(t, sink.Publish(context.Background(), msg))
	require.Equal(t, "acme", baggage.FromContext(next.ctx("evt-1")).Member("tenant").Value())
}

func TestWrapSinkConcurrentPublishes(t *testing.T) {
	t.Parallel()
	exp, tp := tracing(t)
	const n = 64
	writers := make(map[string]trace.SpanContext, n)
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		ctx, span := tp.Tracer("writer").Start(context.Background(), "write")
		msgs[i] = outbox.Message{ID: fmt.Sprintf("evt-%d", i), Type: "OrderPaid"}
		outboxotel.Inject(ctx, &msgs[i], outboxotel.WithPropagator(propagator))
		writers[msgs[i].ID] = span.SpanContext()
		span.End()
	}
	exp.Reset()

	rec := outboxtest.NewRecorder()
	sink := outboxotel.WrapSink(rec, outboxotel.WithTracerProvider(tp), outboxotel.WithPropagator(propagator))
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for _, m := range msgs {
		wg.Go(func() { errs <- sink.Publish(context.Background(), m) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, n, rec.Distinct())

	spans := exp.GetSpans()
	require.Len(t, spans, n)
	for _, s := range spans {
		id := attrs(s)["messaging.message.id"].AsString()
		require.Len(t, s.Links, 1, id)
		require.Equal(t, writers[id].SpanID(), s.Links[0].SpanContext.SpanID(), id)
	}
}
