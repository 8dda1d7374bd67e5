package outboxotel_test

import (
	"context"
	"fmt"
	"log"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxotel"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// The writer injects its trace context into the message in its
// transaction code; the worker's sink is wrapped so that each delivery
// makes a publish span linked to the writer's span. Here the store is
// outboxtest's in-memory one and the spans go to memory; in a service they
// are store/mysql and your exporter, and the propagator and provider are
// usually the globals (otel.SetTextMapPropagator, otel.SetTracerProvider),
// which outboxotel uses when no option is given.
func Example() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	store := outboxtest.NewStore()

	// The writer: a request handler with a span, in its transaction.
	ctx, span := tp.Tracer("orders").Start(context.Background(), "POST /orders/{id}/pay")
	msg := outbox.Message{ID: "evt-1", Key: "order-1", Type: "OrderPaid", Payload: []byte(`{"amount":42}`)}
	outboxotel.Inject(ctx, &msg, outboxotel.WithPropagator(prop))
	tx := store.Begin() // db.BeginTx with store/mysql
	if err := store.Enqueue(ctx, tx, nil, msg); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	span.End()

	// The relay: any sink, wrapped.
	var sink outbox.Sink = outbox.SinkFunc(func(ctx context.Context, m outbox.Message) error {
		return nil // publish to NATS, call an API, …
	})
	sink = outboxotel.WrapSink(sink,
		outboxotel.WithTracerProvider(tp), outboxotel.WithPropagator(prop),
		outboxotel.WithSystem("nats"),
		outboxotel.WithDestination(func(m outbox.Message) string { return "orders." + m.Type }))
	worker, err := outbox.NewWorker(store, sink, outbox.WorkerOptions{Name: "orders_outbox"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := worker.ProcessBatch(context.Background()); err != nil { // worker.Run in a service
		log.Fatal(err)
	}

	for _, s := range exp.GetSpans() {
		linked := len(s.Links) == 1 && s.Links[0].SpanContext.SpanID() == span.SpanContext().SpanID()
		fmt.Printf("%s (%s), linked to the writer: %v\n", s.Name, s.SpanKind, linked)
	}
	// Output:
	// POST /orders/{id}/pay (internal), linked to the writer: false
	// publish orders.OrderPaid (producer), linked to the writer: true
}
