// Package outboxprom exports an outbox worker's metrics to Prometheus.
//
// Metrics is an outbox.Observer (set it as WorkerOptions.Observer) that
// counts publishes, failures, dead letters and errors, and a collector that
// reads the store's backlog (backend.StatsReader) when scraped. With Name
// "orders_outbox" it exports:
//
//	orders_outbox_pending_total               gauge    pending records
//	orders_outbox_oldest_pending_age_ms       gauge    age of the oldest pending record
//	orders_outbox_publish_success_total       counter  {path, event_type}
//	orders_outbox_publish_failure_total       counter  {path, event_type}
//	orders_outbox_publish_latency_ms          histogram {path}
//
// and orders_outbox_leased, orders_outbox_dead_letters,
// orders_outbox_backlog {status, event_type} (gauges),
// orders_outbox_dead_total {event_type}, orders_outbox_round_errors_total
// {op}, orders_outbox_purged_total and orders_outbox_stats_errors_total
// (counters).
package outboxprom

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Defaults of Options.
const (
	DefaultStatsInterval = 2 * time.Second
	DefaultStatsTimeout  = 2 * time.Second
)

// DefaultLatencyBuckets are publish latency buckets in milliseconds, from a
// local sink to a slow remote API and its timeout.
var DefaultLatencyBuckets = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000}

// Options configures Metrics.
type Options struct {
	// Name prefixes every metric: the worker's name, e.g. "orders_outbox".
	// Required; letters, digits, underscores and colons.
	Name string
	// Stats, if set, is read when the registry is scraped (at most once
	// per StatsInterval) for the backlog gauges.
	Stats backend.StatsReader
	// StatsInterval is how long one Stats reading serves scrapes. Defaults
	// to DefaultStatsInterval; negative means every scrape reads.
	StatsInterval time.Duration
	// StatsTimeout bounds one Stats reading. Defaults to
	// DefaultStatsTimeout.
	StatsTimeout time.Duration
	// LatencyBuckets are the publish latency histogram's buckets, in
	// milliseconds. Defaults to DefaultLatencyBuckets.
	LatencyBuckets []float64
}

var nameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// Metrics is an outbox.Observer that records into Prometheus metrics.
type Metrics struct {
	success, failure *prometheus.CounterVec
	latency          *prometheus.HistogramVec
	dead             *prometheus.CounterVec
	roundErrors      *prometheus.CounterVec
	purged           prometheus.Counter
}

var _ outbox.Observer = (*Metrics)(nil)

// New registers the metrics with reg and returns the observer.
func New(reg prometheus.Registerer, opts Options) (*Metrics, error) {
	if !nameRE.MatchString(opts.Name) {
		return nil, fmt.Errorf("outboxprom: Name %q: must be a metric name prefix (letters, digits, _ and :)", opts.Name)
	}
	if opts.StatsInterval == 0 {
		opts.StatsInterval = DefaultStatsInterval
	}
	if opts.StatsTimeout <= 0 {
		opts.StatsTimeout = DefaultStatsTimeout
	}
	if len(opts.LatencyBuckets) == 0 {
		opts.LatencyBuckets = DefaultLatencyBuckets
	}
	n := opts.Name + "_"
	m := &Metrics{
		success: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n + "publish_success_total",
			Help: "Messages the sink accepted."}, []string{"path", "event_type"}),
		failure: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n + "publish_failure_total",
			Help: "Sink calls that failed."}, []string{"path", "event_type"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: n + "publish_latency_ms",
			Help: "Duration of sink calls, in milliseconds.", Buckets: opts.LatencyBuckets}, []string{"path"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n + "dead_total",
			Help: "Messages that became dead letters."}, []string{"event_type"}),
		roundErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n + "round_errors_total",
			Help: "Worker rounds ended by a store error."}, []string{"op"}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{Name: n + "purged_total",
			Help: "Published messages deleted by retention."}),
	}
	collectors := []prometheus.Collector{m.success, m.failure, m.latency, m.dead, m.roundErrors, m.purged}
	if opts.Stats != nil {
		collectors = append(collectors, newBacklog(n, opts))
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("outboxprom: register: %w", err)
		}
	}
	return m, nil
}

// Observe records one worker event.
func (m *Metrics) Observe(_ context.Context, e outbox.Event) {
	switch e.Kind {
	case outbox.EventPublished:
		m.success.WithLabelValues(string(e.Path), e.Record.Type).Inc()
		m.latency.WithLabelValues(string(e.Path)).Observe(float64(e.Latency) / float64(time.Millisecond))
	case outbox.EventPublishFailed:
		m.failure.WithLabelValues(string(e.Path), e.Record.Type).Inc()
		m.latency.WithLabelValues(string(e.Path)).Observe(float64(e.Latency) / float64(time.Millisecond))
	case outbox.EventDead:
		m.dead.WithLabelValues(e.Record.Type).Inc()
	case outbox.EventClaimFailed:
		m.roundErrors.WithLabelValues("claim").Inc()
	case outbox.EventSettleFailed:
		m.roundErrors.WithLabelValues("settle").Inc()
	case outbox.EventPurged:
		m.purged.Add(float64(e.Count))
	}
}

// backlog is a collector that reads the store's Stats when scraped.
type backlog struct {
	stats           backend.StatsReader
	interval        time.Duration
	timeout         time.Duration
	pending, leased *prometheus.Desc
	dead, oldest    *prometheus.Desc
	byType          *prometheus.Desc
	errors          prometheus.Counter

	mu     sync.Mutex
	last   backend.Stats
	readAt time.Time
}

func newBacklog(n string, opts Options) *backlog {
	return &backlog{
		stats: opts.Stats, interval: opts.StatsInterval, timeout: opts.StatsTimeout,
		pending: prometheus.NewDesc(n+"pending_total", "Pending messages (the backlog).", nil, nil),
		leased:  prometheus.NewDesc(n+"leased", "Pending messages a worker holds right now.", nil, nil),
		dead:    prometheus.NewDesc(n+"dead_letters", "Dead letters kept in the store.", nil, nil),
		oldest:  prometheus.NewDesc(n+"oldest_pending_age_ms", "Age of the oldest pending message, in milliseconds.", nil, nil),
		byType:  prometheus.NewDesc(n+"backlog", "Pending messages and dead letters by type.", []string{"status", "event_type"}, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: n + "stats_errors_total",
			Help: "Scrapes whose backlog reading failed (the backlog gauges are left out)."}),
	}
}

func (b *backlog) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{b.pending, b.leased, b.dead, b.oldest, b.byType} {
		ch <- d
	}
	b.errors.Describe(ch)
}

func (b *backlog) Collect(ch chan<- prometheus.Metric) {
	st, ok := b.read()
	b.errors.Collect(ch)
	if !ok {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(b.pending, float64(st.Pending))
	gauge(b.leased, float64(st.Leased))
	gauge(b.dead, float64(st.Dead))
	gauge(b.oldest, float64(st.OldestPending)/float64(time.Millisecond))
	for typ, ts := range st.ByType {
		gauge(b.byType, float64(ts.Pending), "pending", typ)
		gauge(b.byType, float64(ts.Dead), "dead", typ)
	}
}

// read returns the cached reading, or a fresh one when it is older than
// the interval.
func (b *backlog) read() (backend.Stats, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.interval > 0 && !b.readAt.IsZero() && time.Since(b.readAt) < b.interval {
		return b.last, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	st, err := b.stats.Stats(ctx)
	if err != nil {
		b.errors.Inc()
		return backend.Stats{}, false
	}
	b.last, b.readAt = st, time.Now()
	return st, true
}
