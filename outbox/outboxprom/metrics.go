package outboxprom

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Defaults of Options.
const (
	DefaultStatsInterval = 2 * time.Second
	DefaultStatsTimeout  = 2 * time.Second
	// DefaultConsumer is the consumer label of a worker on a table's own
	// store, which delivers for the table's default consumer.
	DefaultConsumer = "default"
)

// DefaultLatencyBuckets are publish latency buckets in seconds, from a
// local sink (1ms) to a slow remote API and its timeout (5s).
var DefaultLatencyBuckets = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5}

// Options configures Metrics. Several Metrics can share a registry when
// their Name or Consumer differ: a service's workers, one per consumer,
// export the same metrics with their own labels.
type Options struct {
	// Store, if set, is the store the worker claims from: it names the
	// outbox and the consumer (backend.Capabilities: Outbox, Consumer),
	// and is read for the backlog gauges when it reports its backlog
	// (backend.StatsReader). Name, Consumer and Stats may then be left
	// empty; given as well, they must agree with it (New refuses a Name
	// or Consumer that does not, and a Stats that is another store), so
	// that a name given twice cannot label the metrics wrong.
	Store backend.Store
	// Name is the worker's name (WorkerOptions.Name), e.g.
	// "orders_outbox": the outbox label of every metric. Required; valid
	// UTF-8. With LegacyNames it prefixes every metric name instead, and
	// must be letters, digits, underscores and colons.
	Name string
	// Consumer is the named consumer the worker delivers for (store/mysql:
	// the name given to Store.Consumer): the consumer label of every
	// metric. Defaults to DefaultConsumer, for a worker on the table's own
	// store. Valid UTF-8. Not used with LegacyNames.
	Consumer string
	// Stats, if set, is read when the registry is scraped (at most once
	// per StatsInterval) for the backlog gauges. Give the store the
	// worker claims from, so that the gauges are the consumer's.
	Stats backend.StatsReader
	// StatsInterval is how long one Stats reading serves scrapes. Defaults
	// to DefaultStatsInterval; negative means every scrape reads.
	StatsInterval time.Duration
	// StatsTimeout bounds one Stats reading. Defaults to
	// DefaultStatsTimeout.
	StatsTimeout time.Duration
	// LatencyBuckets are the publish latency histogram's buckets, in
	// seconds, strictly increasing. Defaults to DefaultLatencyBuckets.
	// With LegacyNames the histogram is in milliseconds, and each bucket
	// is multiplied by 1000.
	LatencyBuckets []float64
	// LegacyNames registers the metric names of earlier versions instead
	// of the conventional ones: Name as a prefix in place of the outbox
	// and consumer labels, milliseconds in place of seconds, and
	// NAME_pending_total for outbox_pending (see the package doc). There
	// is no lease loss counter under these names.
	//
	// Deprecated: for dashboards and alerts not yet moved to the
	// conventional names; promlint rejects these. It will be removed.
	LegacyNames bool
}

var prefixRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// fromStore fills in Name, Consumer and Stats from o.Store, and refuses
// them when they disagree with it.
func (o Options) fromStore() (Options, error) {
	if o.Store == nil {
		return o, nil
	}
	caps := backend.CapabilitiesOf(o.Store)
	if caps.Outbox == "" {
		return o, fmt.Errorf("outboxprom: Store (%T): it does not name its outbox (Capabilities().Outbox); give Name", o.Store)
	}
	consumer := cmp.Or(caps.Consumer, DefaultConsumer)
	switch {
	case o.Name != "" && o.Name != caps.Outbox:
		return o, fmt.Errorf("outboxprom: Name %q: the store's outbox is %q (leave Name empty: the store names it)", o.Name, caps.Outbox)
	case o.Consumer != "" && o.Consumer != consumer:
		return o, fmt.Errorf("outboxprom: Consumer %q: the store delivers for %q (leave Consumer empty: the store names it)", o.Consumer, consumer)
	}
	o.Name, o.Consumer = caps.Outbox, consumer
	sr, reports := o.Store.(backend.StatsReader)
	switch {
	case o.Stats == nil && reports:
		o.Stats = sr
	case o.Stats != nil && (!reports || !same(o.Stats, sr)):
		return o, fmt.Errorf("outboxprom: Stats (%T): not the Store; leave Stats empty: the store reports its own backlog", o.Stats)
	}
	return o, nil
}

// same says whether a and b are the same value; values of a type that
// cannot be compared are not.
func same(a, b any) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}

// withDefaults returns a copy of o with every default applied.
func (o Options) withDefaults() Options {
	if o.Consumer == "" {
		o.Consumer = DefaultConsumer
	}
	if o.StatsInterval == 0 {
		o.StatsInterval = DefaultStatsInterval
	}
	if o.StatsTimeout <= 0 {
		o.StatsTimeout = DefaultStatsTimeout
	}
	if len(o.LatencyBuckets) == 0 {
		o.LatencyBuckets = DefaultLatencyBuckets
	}
	return o
}

func (o Options) validate() error {
	switch {
	case o.Name == "":
		return fmt.Errorf(`outboxprom: Name "": required (the worker's name)`)
	case o.LegacyNames && !prefixRE.MatchString(o.Name):
		return fmt.Errorf("outboxprom: Name %q: with LegacyNames, must be a metric name prefix (letters, digits, _ and :)", o.Name)
	case !utf8.ValidString(o.Name):
		return fmt.Errorf("outboxprom: Name %q: must be valid UTF-8", o.Name)
	case !utf8.ValidString(o.Consumer):
		return fmt.Errorf("outboxprom: Consumer %q: must be valid UTF-8", o.Consumer)
	}
	for i := 1; i < len(o.LatencyBuckets); i++ {
		if !(o.LatencyBuckets[i] > o.LatencyBuckets[i-1]) {
			return fmt.Errorf("outboxprom: LatencyBuckets %v: must be strictly increasing", o.LatencyBuckets)
		}
	}
	return nil
}

// Metrics is an outbox.Observer that records into Prometheus metrics. It
// is safe for concurrent use.
type Metrics struct {
	names            names
	success, failure *prometheus.CounterVec
	latency          *prometheus.HistogramVec
	dead             *prometheus.CounterVec
	roundErrors      *prometheus.CounterVec
	purged           prometheus.Counter
	// leaseLost and sinkHeldOff are nil under LegacyNames.
	leaseLost   prometheus.Counter
	sinkHeldOff prometheus.Gauge
}

var _ outbox.Observer = (*Metrics)(nil)

// New registers the metrics with reg and returns the observer. It
// returns an error naming the field for invalid Options, and one wrapping
// prometheus.AlreadyRegisteredError when reg already holds metrics of the
// same Name and Consumer.
func New(reg prometheus.Registerer, opts Options) (*Metrics, error) {
	opts, err := opts.fromStore()
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	n, buckets := conventional(opts.Name, opts.Consumer), opts.LatencyBuckets
	if opts.LegacyNames {
		n, buckets = legacy(opts.Name), scaled(buckets, 1000)
	}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: n.labels}, labels)
	}
	m := &Metrics{
		names:   n,
		success: counterVec(n.success, "Messages the sink accepted.", "path", "event_type"),
		failure: counterVec(n.failure, "Sink calls that failed.", "path", "event_type"),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: n.latency, ConstLabels: n.labels,
			Help: "Duration of sink calls, in " + n.unitName + ".", Buckets: buckets}, []string{"path"}),
		dead:        counterVec(n.dead, "Messages that became dead letters.", "event_type"),
		roundErrors: counterVec(n.roundErrors, "Worker rounds ended by a store error.", "op"),
		purged: prometheus.NewCounter(prometheus.CounterOpts{Name: n.purged, ConstLabels: n.labels,
			Help: "Published messages deleted by retention."}),
	}
	collectors := []prometheus.Collector{m.success, m.failure, m.latency, m.dead, m.roundErrors, m.purged}
	if n.leaseLost != "" {
		m.leaseLost = prometheus.NewCounter(prometheus.CounterOpts{Name: n.leaseLost, ConstLabels: n.labels,
			Help: "Outcomes not recorded because the worker's lease had expired; the messages are delivered again."})
		collectors = append(collectors, m.leaseLost)
	}
	if n.sinkHeldOff != "" {
		m.sinkHeldOff = prometheus.NewGauge(prometheus.GaugeOpts{Name: n.sinkHeldOff, ConstLabels: n.labels,
			Help: "1 while the worker holds off its sink after failures in a row or an error the sink marked Unavailable, 0 otherwise."})
		collectors = append(collectors, m.sinkHeldOff)
	}
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

func scaled(buckets []float64, f float64) []float64 {
	out := slices.Clone(buckets)
	for i := range out {
		out[i] *= f
	}
	return out
}

// Observe records one worker event.
func (m *Metrics) Observe(_ context.Context, e outbox.Event) {
	switch e.Kind {
	case outbox.EventPublished:
		m.success.WithLabelValues(string(e.Path), e.Record.Type).Inc()
		m.latency.WithLabelValues(string(e.Path)).Observe(m.names.in(e.Latency))
	case outbox.EventPublishFailed:
		m.failure.WithLabelValues(string(e.Path), e.Record.Type).Inc()
		m.latency.WithLabelValues(string(e.Path)).Observe(m.names.in(e.Latency))
	case outbox.EventDead:
		m.dead.WithLabelValues(e.Record.Type).Inc()
	case outbox.EventClaimFailed:
		m.roundErrors.WithLabelValues("claim").Inc()
	case outbox.EventSettleFailed:
		m.roundErrors.WithLabelValues("settle").Inc()
	case outbox.EventPurged:
		m.purged.Add(float64(e.Count))
	case outbox.EventLeaseLost:
		if m.leaseLost != nil {
			m.leaseLost.Add(float64(e.Count))
		}
	case outbox.EventSinkDown:
		if m.sinkHeldOff != nil {
			m.sinkHeldOff.Set(1)
		}
	case outbox.EventSinkUp:
		if m.sinkHeldOff != nil {
			m.sinkHeldOff.Set(0)
		}
	}
}
