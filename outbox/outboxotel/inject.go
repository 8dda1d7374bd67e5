package outboxotel

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// The W3C trace context headers, as propagation.TraceContext writes them.
const (
	headerTraceParent = outbox.HeaderTraceParent
	headerTraceState  = "tracestate"
)

// EventHeaderDropped is the name of the span event Inject adds to the
// span in ctx when it leaves a header out (see InjectHeaders).
const EventHeaderDropped = "outboxotel.header_dropped"

// Inject writes the trace context of ctx into msg.Headers, as
// InjectHeaders does, for the writer to call before Store.Enqueue. It
// replaces msg.Headers with a new map when it adds something, so a map
// shared between messages is never written to. It never fails: with no
// trace context in ctx, msg is left as it is.
func Inject(ctx context.Context, msg *outbox.Message, opts ...Option) {
	msg.Headers = InjectHeaders(ctx, msg.Headers, opts...)
}

// InjectHeaders returns headers with the trace context of ctx added by the
// propagator (WithPropagator; the global one by default). It never
// modifies headers: when it adds something it returns a copy, and
// otherwise headers itself. With no span or baggage in ctx, or a
// propagator that writes nothing (the global default until the application
// sets one), nothing is added.
//
// A header the propagator writes replaces one of the same name; every
// other header is kept. When it writes traceparent but no tracestate, a
// tracestate already in headers is dropped, as it belonged to another
// trace.
//
// What it adds passes outbox.Message.Validate (names non-empty, names and
// values valid UTF-8) and stays within WithMaxInjectBytes as stored (a
// JSON object), so tracing cannot make Store.Enqueue fail. Headers are
// added traceparent first, then tracestate, then the others by name; one
// that does not fit, such as a large baggage, is left out whole (a cut
// value would be corrupt), and an event EventHeaderDropped naming it is
// added to the span in ctx.
func InjectHeaders(ctx context.Context, headers map[string]string, opts ...Option) map[string]string {
	c := newConfig(opts)
	carrier := propagation.MapCarrier{}
	c.propagator.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return headers
	}
	out := maps.Clone(headers)
	if out == nil {
		out = make(map[string]string, len(carrier))
	}
	if _, ok := carrier[headerTraceParent]; ok {
		if _, ok := carrier[headerTraceState]; !ok {
			delete(out, headerTraceState)
		}
	}
	left := c.maxInject - len("{}")
	for _, name := range injectOrder(carrier) {
		value := carrier[name]
		size, ok := storedSize(name, value)
		if !ok || size > left {
			dropped(ctx, name, len(value), ok)
			continue
		}
		left -= size
		out[name] = value
	}
	return out
}

// injectOrder lists the carrier's names: traceparent, tracestate, then the
// rest sorted, so that the header that matters most is kept first.
func injectOrder(carrier propagation.MapCarrier) []string {
	rank := func(name string) int {
		switch name {
		case headerTraceParent:
			return 0
		case headerTraceState:
			return 1
		}
		return 2
	}
	names := slices.Collect(maps.Keys(carrier))
	slices.SortFunc(names, func(a, b string) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		if a < b {
			return -1
		}
		return 1
	})
	return names
}

// storedSize is what a header adds to a JSON object of headers, the form
// the MySQL store measures, and whether Message.Validate accepts it.
func storedSize(name, value string) (int, bool) {
	if name == "" || !utf8.ValidString(name) || !utf8.ValidString(value) {
		return 0, false
	}
	n, err := json.Marshal(name)
	if err != nil {
		return 0, false
	}
	v, err := json.Marshal(value)
	if err != nil {
		return 0, false
	}
	return len(n) + len(v) + 2, true // ':' and ','
}

func dropped(ctx context.Context, name string, size int, valid bool) {
	reason := "too large"
	if !valid {
		reason = "empty name or not valid UTF-8"
		name = strings.ToValidUTF8(name, "\uFFFD")
	}
	trace.SpanFromContext(ctx).AddEvent(EventHeaderDropped, trace.WithAttributes(
		attribute.String("outbox.header.name", name),
		attribute.Int("outbox.header.size", size),
		attribute.String("outbox.header.reason", reason),
	))
}
