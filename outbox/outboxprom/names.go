package outboxprom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// names are the metric names, units and labels of one naming scheme.
type names struct {
	pending, leased, deadLetters, oldest, backlog, statsErrors string
	success, failure, latency, dead, roundErrors, purged       string
	// leaseLost and sinkHeldOff are empty when the scheme has no such
	// metric.
	leaseLost, sinkHeldOff string
	// unit is what one unit of a latency or an age is, and unitName its
	// name in help texts.
	unit     time.Duration
	unitName string
	// labels go on every metric.
	labels prometheus.Labels
}

// conventional are the names by Prometheus' conventions: one prefix,
// base units, _total on counters only, the outbox and the consumer as
// labels.
func conventional(outbox, consumer string) names {
	return names{
		pending: "outbox_pending", leased: "outbox_leased", deadLetters: "outbox_dead_letters",
		oldest: "outbox_oldest_pending_age_seconds", backlog: "outbox_backlog", statsErrors: "outbox_stats_errors_total",
		success: "outbox_publish_success_total", failure: "outbox_publish_failure_total",
		latency: "outbox_publish_latency_seconds", dead: "outbox_dead_total",
		roundErrors: "outbox_round_errors_total", purged: "outbox_purged_total", leaseLost: "outbox_lease_lost_total",
		sinkHeldOff: "outbox_sink_held_off",
		unit:        time.Second, unitName: "seconds",
		labels: prometheus.Labels{"outbox": outbox, "consumer": consumer},
	}
}

// legacy are the names of earlier versions (Options.LegacyNames): the
// worker's name as a prefix, milliseconds, no outbox or consumer label.
func legacy(prefix string) names {
	n := prefix + "_"
	return names{
		pending: n + "pending_total", leased: n + "leased", deadLetters: n + "dead_letters",
		oldest: n + "oldest_pending_age_ms", backlog: n + "backlog", statsErrors: n + "stats_errors_total",
		success: n + "publish_success_total", failure: n + "publish_failure_total",
		latency: n + "publish_latency_ms", dead: n + "dead_total",
		roundErrors: n + "round_errors_total", purged: n + "purged_total",
		unit: time.Millisecond, unitName: "milliseconds",
	}
}

// in converts d to the scheme's unit.
func (n names) in(d time.Duration) float64 { return float64(d) / float64(n.unit) }
