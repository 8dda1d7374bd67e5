// Package outboxotel traces outbox messages with OpenTelemetry: it carries
// the writer's trace context in a message's headers and starts a span for
// every delivery.
//
// Two calls do the wiring:
//
//   - Inject, in the writer's transaction code before Store.Enqueue, writes
//     the current trace context (traceparent, tracestate, and baggage if the
//     propagator carries it) into the message's headers.
//   - WrapSink, around the worker's sink, starts a span for each Publish.
//     The span is of kind PRODUCER, is named "publish <destination>", and
//     links to the writer's span rather than being its child: a delivery
//     may come long after the request that wrote the message ended, and may
//     be retried many times. The sink inside gets the span's context, so a
//     sink that propagates trace context itself (into broker headers or an
//     HTTP request) continues the trace from the publish span.
//
// The span carries the OpenTelemetry semantic conventions for messaging
// (semconv v1.43.0): messaging.system, messaging.destination.name,
// messaging.message.id, messaging.operation.type "send" and
// messaging.operation.name "publish"; and outbox.message.key when the
// message has a key. A failed publish records the error, sets the status to
// Error and error.type, and outbox.error.permanent true when the sink marked
// the error with outbox.Permanent.
//
// Both use the global TracerProvider and TextMapPropagator
// (otel.GetTracerProvider, otel.GetTextMapPropagator) unless given others
// with WithTracerProvider and WithPropagator. Note that the global
// propagator does nothing until the application sets one, for example:
//
//	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
//		propagation.TraceContext{}, propagation.Baggage{}))
//
// The package is a module of its own, so that users of outbox who do not
// import it do not require OpenTelemetry. Options are functional options,
// as in OpenTelemetry's own instrumentation libraries.
//
// The outbox package's HeaderTraceParent is the header the W3C trace
// context propagator writes, so the worker's logs and sinks that read that
// header (sink/tencentim) see what Inject wrote.
package outboxotel
