package uitest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxprom"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// TestPrometheusOnEveryStore: outboxprom's backlog gauges read a store's
// Stats on scrape, and its counters follow a worker's deliveries, the
// same on every store.
func TestPrometheusOnEveryStore(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		const table = "room_outbox"
		store, db := kind.open(t, table)
		ctx := context.Background()
		var msgs []outbox.Message
		for i := range 3 {
			msgs = append(msgs, outbox.Message{ID: fmt.Sprintf("gift-%d", i), Key: "room-1", Type: "RoomGiftSent", Payload: []byte(`{}`)})
		}
		require.NoError(t, store.Enqueue(ctx, db, nil, msgs...))
		kill(t, store, "gift-0")

		reg := prometheus.NewPedanticRegistry()
		m, err := outboxprom.New(reg, outboxprom.Options{Name: table, Stats: store, StatsInterval: -1})
		require.NoError(t, err)
		gauge := func(name string) float64 { return metricSum(t, reg, name) }
		require.Equal(t, 2.0, gauge("outbox_pending"))
		require.Equal(t, 1.0, gauge("outbox_dead_letters"))

		w, err := outbox.NewWorker(store, outboxtest.NewRecorder(), outbox.WorkerOptions{
			Name: table, PollInterval: 20 * time.Millisecond, Observer: m, Logger: outboxtest.Logger(t)})
		require.NoError(t, err)
		wctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _ = w.Run(wctx) }()
		t.Cleanup(func() { stop(); wg.Wait() })

		outboxtest.EventuallyWithin(t, 30*time.Second, "both pending messages delivered and counted", func() bool {
			return gauge("outbox_pending") == 0 && metricSum(t, reg, "outbox_publish_success_total") == 2
		})
		require.Equal(t, 1.0, gauge("outbox_dead_letters"), "the dead letter stays until requeued")
	})
}

// metricSum sums the gauge or counter values of the metric name over its
// label sets.
func metricSum(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}
