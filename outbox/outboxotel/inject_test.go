package outboxotel_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxotel"
)

// propagator is what an application typically sets as the global one.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// tracing gives a test its own TracerProvider recording into memory.
func tracing(t *testing.T) (*tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return exp, tp
}

// writerSpan starts the span of the request that writes a message.
func writerSpan(t *testing.T, tp trace.TracerProvider) (context.Context, trace.Span) {
	t.Helper()
	ctx, span := tp.Tracer("writer").Start(context.Background(), "POST /orders")
	t.Cleanup(func() { span.End() })
	return ctx, span
}

func TestInjectWritesTraceContextThatExtractReads(t *testing.T) {
	t.Parallel()
	_, tp := tracing(t)
	ctx, span := writerSpan(t, tp)
	member, err := baggage.NewMember("tenant", "acme")
	require.NoError(t, err)
	bag, err := baggage.New(member)
	require.NoError(t, err)
	ctx = baggage.ContextWithBaggage(ctx, bag)

	shared := map[string]string{"request_id": "r-1"}
	msg := outbox.Message{ID: "evt-1", Type: "OrderPaid", Headers: shared}
	outboxotel.Inject(ctx, &msg, outboxotel.WithPropagator(propagator))

	require.Equal(t, map[string]string{"request_id": "r-1"}, shared, "the caller's map is not written to")
	require.Equal(t, "r-1", msg.Headers["request_id"], "other headers are kept")
	require.True(t, outbox.ValidTraceParent(msg.Headers[outbox.HeaderTraceParent]), msg.Headers[outbox.HeaderTraceParent])
	require.Equal(t, "tenant=acme", msg.Headers["baggage"])
	require.NoError(t, msg.Validate())

	got := propagator.Extract(context.Background(), propagation.MapCarrier(msg.Headers))
	sc := trace.SpanContextFromContext(got)
	require.Equal(t, span.SpanContext().TraceID(), sc.TraceID())
	require.Equal(t, span.SpanContext().SpanID(), sc.SpanID())
	require.Equal(t, "acme", baggage.FromContext(got).Member("tenant").Value())
}

func TestInjectWithoutTraceContextLeavesHeaders(t *testing.T) {
	t.Parallel()
	for name, headers := range map[string]map[string]string{
		"nil":   nil,
		"some":  {"request_id": "r-1"},
		"empty": {},
	} {
		msg := outbox.Message{ID: "evt-1", Type: "OrderPaid", Headers: headers}
		outboxotel.Inject(context.Background(), &msg, outboxotel.WithPropagator(propagator))
		require.Equal(t, headers, msg.Headers, name)
	}
	// The global propagator does nothing until one is set: no failure.
	_, tp := tracing(t)
	ctx, _ := writerSpan(t, tp)
	require.Nil(t, outboxotel.InjectHeaders(ctx, nil, outboxotel.WithPropagator(propagation.NewCompositeTextMapPropagator())))
}

func TestInjectReplacesTraceContextAndDropsStaleTraceState(t *testing.T) {
	t.Parallel()
	_, tp := tracing(t)
	ctx, span := writerSpan(t, tp)
	old := map[string]string{
		outbox.HeaderTraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"tracestate":             "vendor=old",
		"request_id":             "r-1",
	}
	got := outboxotel.InjectHeaders(ctx, old, outboxotel.WithPropagator(propagator))
	require.Contains(t, got[outbox.HeaderTraceParent], span.SpanContext().TraceID().String())
	require.NotContains(t, got, "tracestate", "a tracestate belongs to the traceparent it came with")
	require.Equal(t, "r-1", got["request_id"])
	require.Equal(t, "vendor=old", old["tracestate"], "the input is not modified")
}

// Big baggage must not make Enqueue fail on the store's header limit:
// what does not fit is left out, traceparent first kept, and the span
// says what was dropped.
func TestInjectStaysWithinItsBudget(t *testing.T) {
	t.Parallel()
	exp, tp := tracing(t)
	ctx, span := writerSpan(t, tp)
	var members []baggage.Member
	for i := range 40 {
		m, err := baggage.NewMember("k"+strings.Repeat("x", 10)+string(rune('a'+i%26))+string(rune('a'+i/26)), strings.Repeat("v", 150))
		require.NoError(t, err)
		members = append(members, m)
	}
	bag, err := baggage.New(members...)
	require.NoError(t, err)
	ctx = baggage.ContextWithBaggage(ctx, bag)
	require.Greater(t, len(bag.String()), outboxotel.DefaultMaxInjectBytes)

	headers := outboxotel.InjectHeaders(ctx, nil, outboxotel.WithPropagator(propagator))
	require.True(t, outbox.ValidTraceParent(headers[outbox.HeaderTraceParent]))
	require.NotContains(t, headers, "baggage")
	stored, err := json.Marshal(headers)
	require.NoError(t, err)
	require.LessOrEqual(t, len(stored), outboxotel.DefaultMaxInjectBytes)

	// A tighter budget that still fits the traceparent.
	headers = outboxotel.InjectHeaders(ctx, nil, outboxotel.WithPropagator(propagator), outboxotel.WithMaxInjectBytes(80))
	require.Len(t, headers, 1)
	require.Contains(t, headers, outbox.HeaderTraceParent)

	span.End()
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	var dropped []string
	for _, e := range spans[0].Events {
		require.Equal(t, outboxotel.EventHeaderDropped, e.Name)
		for _, a := range e.Attributes {
			if a.Key == "outbox.header.name" {
				dropped = append(dropped, a.Value.AsString())
			}
		}
	}
	require.Equal(t, []string{"baggage", "baggage"}, dropped)
}

// hostile is a propagator that writes what no store would accept.
type hostile struct{}

func (hostile) Inject(_ context.Context, c propagation.TextMapCarrier) {
	c.Set("", "empty name")
	c.Set("bad\xffname", "v")
	c.Set("bad-value", "v\xff")
	c.Set("good", "ok")
}
func (hostile) Extract(ctx context.Context, _ propagation.TextMapCarrier) context.Context { return ctx }
func (hostile) Fields() []string                                                          { return nil }

func TestInjectLeavesOutHeadersValidateWouldRefuse(t *testing.T) {
	t.Parallel()
	msg := outbox.Message{ID: "evt-1", Type: "OrderPaid"}
	outboxotel.Inject(context.Background(), &msg, outboxotel.WithPropagator(hostile{}))
	require.Equal(t, map[string]string{"good": "ok"}, msg.Headers)
	require.NoError(t, msg.Validate())
}
