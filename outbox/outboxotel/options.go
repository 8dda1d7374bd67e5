package outboxotel

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// Defaults of the options.
const (
	// DefaultSystem is the messaging.system of publish spans when
	// WithSystem is not given.
	DefaultSystem = "outbox"
	// DefaultMaxInjectBytes bounds the headers Inject adds to a message,
	// measured as the store keeps them (JSON). It leaves most of the MySQL
	// store's default MaxHeaderBytes (16 KiB) to the writer's own headers.
	DefaultMaxInjectBytes = 4 << 10
)

// ScopeName is the instrumentation scope of the tracer WrapSink uses.
const ScopeName = "github.com/outboxrelay/outboxrelay/outbox/outboxotel"

// Option configures Inject, InjectHeaders and WrapSink. Each option says
// which of them it affects; the others ignore it.
type Option func(*config)

type config struct {
	provider    trace.TracerProvider
	propagator  propagation.TextMapPropagator
	system      string
	destination func(outbox.Message) string
	maxInject   int
}

func newConfig(opts []Option) config {
	c := config{
		system:      DefaultSystem,
		destination: func(m outbox.Message) string { return m.Type },
		maxInject:   DefaultMaxInjectBytes,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.provider == nil {
		c.provider = otel.GetTracerProvider()
	}
	if c.propagator == nil {
		c.propagator = otel.GetTextMapPropagator()
	}
	return c
}

// WithTracerProvider sets the TracerProvider WrapSink starts spans with.
// Defaults to the global one (otel.GetTracerProvider); nil means the
// default.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.provider = tp }
}

// WithPropagator sets the propagator Inject writes headers with and
// WrapSink reads them with. Defaults to the global one
// (otel.GetTextMapPropagator); nil means the default. Writer and worker
// must use propagators that agree on the headers.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.propagator = p }
}

// WithSystem sets messaging.system on publish spans: the system the sink
// delivers to, such as "nats" or "tencent_im". Defaults to DefaultSystem;
// "" means the default. WrapSink only.
func WithSystem(system string) Option {
	return func(c *config) {
		if system != "" {
			c.system = system
		}
	}
}

// WithDestination sets how a message's destination is named, for
// messaging.destination.name and the span name "publish <destination>".
// Defaults to the message's Type; nil means the default. Keep the names
// few (a subject or queue, not a per-message value): they name spans.
// WrapSink only.
func WithDestination(fn func(outbox.Message) string) Option {
	return func(c *config) {
		if fn != nil {
			c.destination = fn
		}
	}
}

// WithMaxInjectBytes bounds the headers Inject adds to one message, in
// bytes as a JSON object (how the MySQL store measures MaxHeaderBytes).
// Defaults to DefaultMaxInjectBytes; n <= 0 means the default. Inject and
// InjectHeaders only.
func WithMaxInjectBytes(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxInject = n
		}
	}
}
