package outboxprom

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxrelay/outboxrelay/inbox"
)

// DefaultInboxDurationBuckets are the buckets of inbox_process_duration_seconds,
// in seconds: from a duplicate skipped in a millisecond to a handler that
// waited out lock conflicts.
var DefaultInboxDurationBuckets = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10}

// InboxOptions configures InboxMetrics. The zero value means all
// defaults.
type InboxOptions struct {
	// Consumers are consumer names whose series are exported at zero from
	// the start, so that alerts on their rates see a series before the
	// first message. Others appear with their first event. Valid UTF-8.
	Consumers []string
	// DurationBuckets are the buckets of inbox_process_duration_seconds,
	// in seconds, strictly increasing. Defaults to
	// DefaultInboxDurationBuckets.
	DurationBuckets []float64
}

// InboxMetrics is an inbox.Observer (set it as the inbox's Observer, e.g.
// inbox/mysql's Options.Observer) that records into Prometheus metrics.
// One InboxMetrics serves every inbox of a process: each metric carries
// the event's consumer as its consumer label. It is safe for concurrent
// use. It exports:
//
//	inbox_processed_total             counter   messages whose handler's writes committed
//	inbox_duplicates_total            counter   redeliveries skipped without running the handler
//	inbox_handler_failures_total      counter   handler errors and panics (rolled back; the message can be retried)
//	inbox_errors_total                counter   Process calls failed for another reason (database, persistent conflicts, ctx)
//	inbox_conflicts_total             counter   transactions rolled back by a deadlock, lock wait timeout or lost connection, and retried
//	inbox_purged_total                counter   processed IDs deleted by retention
//	inbox_process_duration_seconds    histogram {result} duration of Process calls
type InboxMetrics struct {
	processed, duplicates, handlerFailures, errors, conflicts, purged *prometheus.CounterVec
	duration                                                          *prometheus.HistogramVec
}

var _ inbox.Observer = (*InboxMetrics)(nil)

// NewInboxMetrics registers the inbox metrics with reg and returns the
// observer. It returns an error naming the field for invalid options, and
// one wrapping prometheus.AlreadyRegisteredError when reg already holds
// the inbox metrics.
func NewInboxMetrics(reg prometheus.Registerer, opts InboxOptions) (*InboxMetrics, error) {
	if len(opts.DurationBuckets) == 0 {
		opts.DurationBuckets = DefaultInboxDurationBuckets
	}
	for i := 1; i < len(opts.DurationBuckets); i++ {
		if !(opts.DurationBuckets[i] > opts.DurationBuckets[i-1]) {
			return nil, fmt.Errorf("outboxprom: DurationBuckets %v: must be strictly increasing", opts.DurationBuckets)
		}
	}
	for _, c := range opts.Consumers {
		if !utf8.ValidString(c) {
			return nil, fmt.Errorf("outboxprom: Consumers: %q: must be valid UTF-8", c)
		}
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"consumer"})
	}
	m := &InboxMetrics{
		processed:       counter("inbox_processed_total", "Messages whose handler's writes committed."),
		duplicates:      counter("inbox_duplicates_total", "Redelivered messages skipped without running the handler."),
		handlerFailures: counter("inbox_handler_failures_total", "Handler errors and panics; rolled back, the message can be retried."),
		errors:          counter("inbox_errors_total", "Process calls that failed other than in the handler: database errors, persistent conflicts, cancellation."),
		conflicts:       counter("inbox_conflicts_total", "Transactions rolled back by a deadlock, a lock wait timeout or a lost connection, and retried."),
		purged:          counter("inbox_purged_total", "Processed message IDs deleted by retention."),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "inbox_process_duration_seconds",
			Help: "Duration of Process calls, in seconds, by result.", Buckets: opts.DurationBuckets}, []string{"consumer", "result"}),
	}
	for _, c := range []prometheus.Collector{m.processed, m.duplicates, m.handlerFailures, m.errors, m.conflicts, m.purged, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("outboxprom: register: %w", err)
		}
	}
	for _, c := range opts.Consumers {
		for _, v := range []*prometheus.CounterVec{m.processed, m.duplicates, m.handlerFailures, m.errors, m.conflicts, m.purged} {
			v.WithLabelValues(c)
		}
	}
	return m, nil
}

// Observe records one inbox event.
func (m *InboxMetrics) Observe(_ context.Context, e inbox.Event) {
	consumer := e.Consumer
	if !utf8.ValidString(consumer) {
		consumer = "invalid"
	}
	var counter *prometheus.CounterVec
	switch e.Kind {
	case inbox.EventProcessed:
		counter = m.processed
	case inbox.EventDuplicate:
		counter = m.duplicates
	case inbox.EventHandlerFailed:
		counter = m.handlerFailures
	case inbox.EventFailed:
		counter = m.errors
	case inbox.EventConflict:
		m.conflicts.WithLabelValues(consumer).Inc()
		return
	case inbox.EventPurged:
		m.purged.WithLabelValues(consumer).Add(float64(e.Count))
		return
	default:
		return
	}
	counter.WithLabelValues(consumer).Inc()
	m.duration.WithLabelValues(consumer, e.Kind.String()).Observe(e.Duration.Seconds())
}
