package outboxotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxotel"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// The wiring a user does: Inject in the writer's transaction, WrapSink
// around the worker's sink. The message goes through a store and a worker,
// which delivers it after a first failure: two publish spans, both linked
// to the writer's span.
func TestWorkerDeliveryIsLinkedToTheWriter(t *testing.T) {
	t.Parallel()
	exp, tp := tracing(t)
	store := outboxtest.NewStore()

	ctx, writer := writerSpan(t, tp)
	msg := outbox.Message{ID: "evt-1", Key: "order-1", Type: "OrderPaid", Payload: []byte(`{}`)}
	outboxotel.Inject(ctx, &msg, outboxotel.WithPropagator(propagator))
	tx := store.Begin()
	require.NoError(t, store.Enqueue(ctx, tx, nil, msg))
	require.NoError(t, tx.Commit())
	writer.End()

	rec := outboxtest.NewRecorder()
	flaky := outboxtest.NewFlakySink(rec, 1)
	flaky.FailNext(1)
	sink := outboxotel.WrapSink(flaky, outboxotel.WithTracerProvider(tp), outboxotel.WithPropagator(propagator))
	worker, err := outbox.NewWorker(store, sink, outbox.WorkerOptions{
		Name: "orders_outbox", PollInterval: outbox.MinPollInterval, Logger: outboxtest.Logger(t),
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(runCtx) }()
	require.NoError(t, rec.WaitDistinct(ctx, 1))
	stop()
	require.NoError(t, <-done)

	var publishes []string
	for _, s := range exp.GetSpans() {
		if s.Name != "publish OrderPaid" {
			continue
		}
		publishes = append(publishes, s.Status.Code.String())
		require.Equal(t, trace.SpanKindProducer, s.SpanKind)
		require.Len(t, s.Links, 1)
		require.Equal(t, writer.SpanContext().SpanID(), s.Links[0].SpanContext.SpanID())
	}
	require.Equal(t, []string{"Error", "Unset"}, publishes)
	require.Equal(t, msg.Headers, rec.Messages()[0].Headers, "the sink gets the headers as written")
}

// Without options, the global TracerProvider and propagator are used. Not
// parallel: it sets the globals.
func TestDefaultsAreTheGlobals(t *testing.T) {
	exp, tp := tracing(t)
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
	})
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})

	ctx, writer := writerSpan(t, tp)
	msg := outbox.Message{ID: "evt-1", Type: "OrderPaid"}
	outboxotel.Inject(ctx, &msg)
	require.True(t, outbox.ValidTraceParent(msg.Headers[outbox.HeaderTraceParent]))
	writer.End()
	exp.Reset()

	require.NoError(t, outboxotel.WrapSink(outboxtest.NewRecorder()).Publish(context.Background(), msg))
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	require.Len(t, spans[0].Links, 1)
}
