package outboxprom

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// scriptedStats returns what the test sets, as a store would.
type scriptedStats struct {
	stats backend.Stats
	err   error
	reads int
}

func (s *scriptedStats) Stats(context.Context) (backend.Stats, error) {
	s.reads++
	return s.stats, s.err
}

func TestObserverCounts(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, Options{Name: "room_outbox"})
	require.NoError(t, err)
	ctx := context.Background()
	joined := outbox.Record{Message: outbox.Message{Type: "RoomUserJoined"}}
	m.Observe(ctx, outbox.Event{Kind: outbox.EventPublished, Path: "after_commit", Record: joined, Latency: 15 * time.Millisecond})
	m.Observe(ctx, outbox.Event{Kind: outbox.EventPublishFailed, Path: "after_commit", Record: joined, Latency: time.Millisecond})
	m.Observe(ctx, outbox.Event{Kind: outbox.EventPublished, Path: "worker", Record: joined, Latency: 3 * time.Millisecond})
	m.Observe(ctx, outbox.Event{Kind: outbox.EventDead, Record: joined})
	m.Observe(ctx, outbox.Event{Kind: outbox.EventClaimFailed})
	m.Observe(ctx, outbox.Event{Kind: outbox.EventSettleFailed})
	m.Observe(ctx, outbox.Event{Kind: outbox.EventSettleFailed})
	m.Observe(ctx, outbox.Event{Kind: outbox.EventPurged, Count: 500})

	require.Equal(t, 1.0, testutil.ToFloat64(m.success.WithLabelValues("after_commit", "RoomUserJoined")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.success.WithLabelValues("worker", "RoomUserJoined")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.failure.WithLabelValues("after_commit", "RoomUserJoined")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.dead.WithLabelValues("RoomUserJoined")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.roundErrors.WithLabelValues("claim")))
	require.Equal(t, 2.0, testutil.ToFloat64(m.roundErrors.WithLabelValues("settle")))
	require.Equal(t, 500.0, testutil.ToFloat64(m.purged))
	require.Equal(t, 2, testutil.CollectAndCount(m.latency), "one histogram per path")
	requireLint(t, reg)
}

func TestBacklogGaugesReadStatsOnScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	stats := &scriptedStats{stats: backend.Stats{Pending: 7, Leased: 2, Dead: 1, OldestPending: 1500 * time.Millisecond,
		ByType: map[string]backend.TypeStats{"RoomGiftSent": {Pending: 7, Dead: 1}}}}
	_, err := New(reg, Options{Name: "room_outbox", Stats: stats, StatsInterval: time.Hour})
	require.NoError(t, err)

	values := gather(t, reg)
	require.Equal(t, 7.0, values["room_outbox_pending_total"])
	require.Equal(t, 2.0, values["room_outbox_leased"])
	require.Equal(t, 1.0, values["room_outbox_dead_letters"])
	require.Equal(t, 1500.0, values["room_outbox_oldest_pending_age_ms"])
	require.Equal(t, 7.0, values[`room_outbox_backlog{event_type="RoomGiftSent",status="pending"}`])

	requireLint(t, reg)
	stats.stats.Pending = 9
	gather(t, reg)
	require.Equal(t, 1, stats.reads, "a reading serves scrapes for StatsInterval")

	reg2 := prometheus.NewRegistry()
	failing := &scriptedStats{err: errors.New("database down")}
	_, err = New(reg2, Options{Name: "x", Stats: failing, StatsInterval: -1})
	require.NoError(t, err)
	values = gather(t, reg2)
	_, present := values["x_pending_total"]
	require.False(t, present, "no stale gauge when the store cannot be read")
	require.Equal(t, 1.0, values["x_stats_errors_total"])
}

func TestNameIsValidated(t *testing.T) {
	_, err := New(prometheus.NewRegistry(), Options{Name: "room-outbox"})
	require.ErrorContains(t, err, `Name "room-outbox"`)
	reg := prometheus.NewRegistry()
	_, err = New(reg, Options{Name: "dup"})
	require.NoError(t, err)
	_, err = New(reg, Options{Name: "dup"})
	require.ErrorContains(t, err, "register", "twice on one registry")
}

// seedNames are the seed's metric names that promlint objects to (units in
// milliseconds; a gauge named _total). The seed's names are binding, so
// these, and only these, are allowed.
var seedNames = map[string]bool{
	"room_outbox_publish_latency_ms":    true,
	"room_outbox_oldest_pending_age_ms": true,
	"room_outbox_pending_total":         true,
}

func requireLint(t *testing.T, reg prometheus.Gatherer) {
	t.Helper()
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	for _, p := range problems {
		require.True(t, seedNames[p.Metric], "promlint: %s: %s", p.Metric, p.Text)
	}
}

// gather returns every sample by name and labels.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			if len(m.GetLabel()) > 0 {
				key += "{"
				for i, l := range m.GetLabel() {
					if i > 0 {
						key += ","
					}
					key += l.GetName() + `="` + l.GetValue() + `"`
				}
				key += "}"
			}
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}
