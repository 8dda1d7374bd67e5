package activityservice

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxrelay/outboxrelay/inbox"
)

// newInboxObserver counts the inbox's outcomes:
// activity_inbox_events_total{kind="processed|duplicate|handler_failed|failed|conflict|purged"}
// (purged counts IDs).
func newInboxObserver(reg prometheus.Registerer) inbox.Observer {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "activity_inbox_events_total",
		Help: "What the inbox did, by kind: processed, duplicate (skipped), handler_failed, failed, conflict (retried), purged (IDs).",
	}, []string{"kind"})
	reg.MustRegister(c)
	return inbox.ObserverFunc(func(_ context.Context, e inbox.Event) {
		n := 1
		if e.Kind == inbox.EventPurged {
			n = e.Count
		}
		c.WithLabelValues(e.Kind.String()).Add(float64(n))
	})
}
