package outboxprom

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// TestPromlintClean: every metric, after every kind of event and a backlog
// reading, passes promlint.
func TestPromlintClean(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	stats := &scriptedStats{stats: backend.Stats{Pending: 3, Leased: 1, Dead: 1, OldestPending: 2 * time.Second,
		ByType: map[string]backend.TypeStats{"OrderPaid": {Pending: 3, Dead: 1}}}}
	m, err := New(reg, Options{Name: "room_outbox", Stats: stats})
	require.NoError(t, err)
	observeAll(m)

	families, err := reg.Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(families).Lint()
	require.NoError(t, err)
	require.Empty(t, problems)
}

// observeAll reports one event of every kind.
func observeAll(m *Metrics) {
	ctx := context.Background()
	rec := outbox.Record{Message: outbox.Message{Type: "OrderPaid"}}
	for _, e := range []outbox.Event{
		{Kind: outbox.EventPublished, Path: outbox.PathWorker, Record: rec, Latency: 15 * time.Millisecond},
		{Kind: outbox.EventPublishFailed, Path: outbox.PathAfterCommit, Record: rec, Latency: time.Millisecond},
		{Kind: outbox.EventDead, Path: outbox.PathWorker, Record: rec},
		{Kind: outbox.EventClaimFailed, Path: outbox.PathWorker},
		{Kind: outbox.EventSettleFailed, Path: outbox.PathWorker},
		{Kind: outbox.EventPurged, Count: 2},
	} {
		m.Observe(ctx, e)
	}
}
