package outboxprom

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// backlog is a collector that reads the store's Stats when scraped.
type backlog struct {
	stats           backend.StatsReader
	interval        time.Duration
	timeout         time.Duration
	names           names
	pending, leased *prometheus.Desc
	dead, oldest    *prometheus.Desc
	byType          *prometheus.Desc
	errors          prometheus.Counter

	mu     sync.Mutex
	last   backend.Stats
	readAt time.Time
}

func newBacklog(n names, opts Options) *backlog {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, n.labels)
	}
	return &backlog{
		stats: opts.Stats, interval: opts.StatsInterval, timeout: opts.StatsTimeout, names: n,
		pending: desc(n.pending, "Pending messages (the backlog)."),
		leased:  desc(n.leased, "Pending messages a worker holds right now."),
		dead:    desc(n.deadLetters, "Dead letters kept in the store."),
		oldest:  desc(n.oldest, "Age of the oldest pending message, in "+n.unitName+"."),
		byType:  desc(n.backlog, "Pending messages and dead letters by type.", "status", "event_type"),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: n.statsErrors, ConstLabels: n.labels,
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
	gauge(b.oldest, b.names.in(st.OldestPending))
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
