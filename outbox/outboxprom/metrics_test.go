package outboxprom

import (
	"context"
	"errors"
	"sort"
	"strings"
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
	m.Observe(ctx, outbox.Event{Kind: outbox.EventLeaseLost, Path: outbox.PathWorker, Count: 3})

	values := gather(t, reg)
	require.Equal(t, 3.0, values[`outbox_lease_lost_total{consumer="default",outbox="room_outbox"}`])
	require.Equal(t, 1.0, values[`outbox_publish_success_total{consumer="default",event_type="RoomUserJoined",outbox="room_outbox",path="after_commit"}`])
	require.Equal(t, 1.0, values[`outbox_publish_success_total{consumer="default",event_type="RoomUserJoined",outbox="room_outbox",path="worker"}`])
	require.Equal(t, 1.0, values[`outbox_publish_failure_total{consumer="default",event_type="RoomUserJoined",outbox="room_outbox",path="after_commit"}`])
	require.Equal(t, 1.0, values[`outbox_dead_total{consumer="default",event_type="RoomUserJoined",outbox="room_outbox"}`])
	require.Equal(t, 1.0, values[`outbox_round_errors_total{consumer="default",op="claim",outbox="room_outbox"}`])
	require.Equal(t, 2.0, values[`outbox_round_errors_total{consumer="default",op="settle",outbox="room_outbox"}`])
	require.Equal(t, 500.0, values[`outbox_purged_total{consumer="default",outbox="room_outbox"}`])
	require.Contains(t, values, `outbox_lease_lost_total{consumer="default",outbox="room_outbox"}`, "exported at zero")
	require.Equal(t, 2, testutil.CollectAndCount(m.latency), "one histogram per path")
	require.Equal(t, 0.0, values[`outbox_sink_held_off{consumer="default",outbox="room_outbox"}`], "exported at zero")
	m.Observe(ctx, outbox.Event{Kind: outbox.EventSinkDown, Path: outbox.PathWorker, Count: 5})
	require.Equal(t, 1.0, gather(t, reg)[`outbox_sink_held_off{consumer="default",outbox="room_outbox"}`], "held off")
	m.Observe(ctx, outbox.Event{Kind: outbox.EventSinkUp, Path: outbox.PathWorker})
	require.Equal(t, 0.0, gather(t, reg)[`outbox_sink_held_off{consumer="default",outbox="room_outbox"}`], "back")
	require.InDelta(t, 0.016, values[`outbox_publish_latency_seconds_sum{consumer="default",outbox="room_outbox",path="after_commit"}`], 1e-9,
		"latency in seconds (15ms and 1ms)")
	requireLint(t, reg)
}

func TestBacklogGaugesReadStatsOnScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	stats := &scriptedStats{stats: backend.Stats{Pending: 7, Leased: 2, Dead: 1, OldestPending: 1500 * time.Millisecond,
		ByType: map[string]backend.TypeStats{"RoomGiftSent": {Pending: 7, Dead: 1}}}}
	_, err := New(reg, Options{Name: "room_outbox", Stats: stats, StatsInterval: time.Hour})
	require.NoError(t, err)

	const l = `{consumer="default",outbox="room_outbox"}`
	values := gather(t, reg)
	require.Equal(t, 7.0, values["outbox_pending"+l])
	require.Equal(t, 2.0, values["outbox_leased"+l])
	require.Equal(t, 1.0, values["outbox_dead_letters"+l])
	require.Equal(t, 1.5, values["outbox_oldest_pending_age_seconds"+l])
	require.Equal(t, 7.0, values[`outbox_backlog{consumer="default",event_type="RoomGiftSent",outbox="room_outbox",status="pending"}`])
	require.Equal(t, 1.0, values[`outbox_backlog{consumer="default",event_type="RoomGiftSent",outbox="room_outbox",status="dead"}`])

	requireLint(t, reg)
	stats.stats.Pending = 9
	gather(t, reg)
	require.Equal(t, 1, stats.reads, "a reading serves scrapes for StatsInterval")

	reg2 := prometheus.NewRegistry()
	failing := &scriptedStats{err: errors.New("database down")}
	_, err = New(reg2, Options{Name: "x", Stats: failing, StatsInterval: -1})
	require.NoError(t, err)
	values = gather(t, reg2)
	_, present := values[`outbox_pending{consumer="default",outbox="x"}`]
	require.False(t, present, "no stale gauge when the store cannot be read")
	require.Equal(t, 1.0, values[`outbox_stats_errors_total{consumer="default",outbox="x"}`])
}

// TestConsumersShareARegistry: a service's workers, one per consumer (and
// one per outbox), register on one registry and are told apart by their
// labels; the same pair twice is an error.
func TestConsumersShareARegistry(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	var observers []*Metrics
	for _, o := range []Options{
		{Name: "room_outbox"},
		{Name: "room_outbox", Consumer: "activity"},
		{Name: "orders_outbox"},
	} {
		o.Stats = &scriptedStats{stats: backend.Stats{Pending: len(observers) + 1}}
		m, err := New(reg, o)
		require.NoError(t, err, "%+v", o)
		observers = append(observers, m)
	}
	observers[1].Observe(context.Background(), outbox.Event{Kind: outbox.EventDead, Record: outbox.Record{Message: outbox.Message{Type: "T"}}})

	values := gather(t, reg)
	require.Equal(t, 1.0, values[`outbox_pending{consumer="default",outbox="room_outbox"}`])
	require.Equal(t, 2.0, values[`outbox_pending{consumer="activity",outbox="room_outbox"}`])
	require.Equal(t, 3.0, values[`outbox_pending{consumer="default",outbox="orders_outbox"}`])
	require.Equal(t, 1.0, values[`outbox_dead_total{consumer="activity",event_type="T",outbox="room_outbox"}`])
	requireLint(t, reg)

	_, err := New(reg, Options{Name: "room_outbox", Consumer: "activity"})
	var already prometheus.AlreadyRegisteredError
	require.ErrorAs(t, err, &already, "the same outbox and consumer twice")
	require.ErrorContains(t, err, "outboxprom: register")
}

// TestLegacyNames: LegacyNames exports exactly the names, units and
// buckets of earlier versions, for dashboards that use them.
func TestLegacyNames(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	stats := &scriptedStats{stats: backend.Stats{Pending: 7, Leased: 2, Dead: 1, OldestPending: 1500 * time.Millisecond,
		ByType: map[string]backend.TypeStats{"RoomGiftSent": {Pending: 7, Dead: 1}}}}
	m, err := New(reg, Options{Name: "room_outbox", Stats: stats, LegacyNames: true})
	require.NoError(t, err)
	observeAll(m)

	families, err := reg.Gather()
	require.NoError(t, err)
	var got []string
	for _, f := range families {
		got = append(got, f.GetName())
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				require.NotContains(t, []string{"outbox", "consumer"}, l.GetName(), "no new labels on %s", f.GetName())
			}
		}
	}
	require.Equal(t, []string{
		"room_outbox_backlog", "room_outbox_dead_letters", "room_outbox_dead_total", "room_outbox_leased",
		"room_outbox_oldest_pending_age_ms", "room_outbox_pending_total", "room_outbox_publish_failure_total",
		"room_outbox_publish_latency_ms", "room_outbox_publish_success_total", "room_outbox_purged_total",
		"room_outbox_round_errors_total", "room_outbox_stats_errors_total",
	}, got)

	values := gather(t, reg)
	require.Equal(t, 7.0, values["room_outbox_pending_total"])
	require.Equal(t, 1500.0, values["room_outbox_oldest_pending_age_ms"])
	require.Equal(t, 15.0, values[`room_outbox_publish_latency_ms_sum{path="worker"}`])
	var bounds []float64
	for _, f := range families {
		if f.GetName() == "room_outbox_publish_latency_ms" {
			for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
				bounds = append(bounds, b.GetUpperBound())
			}
		}
	}
	require.Equal(t, []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000}, bounds, "the old buckets, in ms")
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{Name: "n"}.withDefaults()
	require.Equal(t, DefaultConsumer, o.Consumer)
	require.Equal(t, DefaultStatsInterval, o.StatsInterval)
	require.Equal(t, DefaultStatsTimeout, o.StatsTimeout)
	require.Equal(t, DefaultLatencyBuckets, o.LatencyBuckets)
	require.False(t, o.LegacyNames)
}

func TestOptionsOverrides(t *testing.T) {
	o := Options{Name: "n", Consumer: "audit", StatsInterval: -1, StatsTimeout: time.Second, LatencyBuckets: []float64{1, 2}}.withDefaults()
	require.Equal(t, "audit", o.Consumer)
	require.Equal(t, time.Duration(-1), o.StatsInterval, "negative: read on every scrape")
	require.Equal(t, time.Second, o.StatsTimeout)
	require.Equal(t, []float64{1, 2}, o.LatencyBuckets)
}

func TestOptionsValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no name", Options{}, `Name "": required`},
		{"name not UTF-8", Options{Name: "room\xff"}, `Name "room\xff": must be valid UTF-8`},
		{"consumer not UTF-8", Options{Name: "n", Consumer: "a\xc3"}, `Consumer "a\xc3": must be valid UTF-8`},
		{"legacy name not a prefix", Options{Name: "room-outbox", LegacyNames: true}, `Name "room-outbox": with LegacyNames`},
		{"buckets out of order", Options{Name: "n", LatencyBuckets: []float64{0.1, 0.05}}, "LatencyBuckets [0.1 0.05]: must be strictly increasing"},
		{"buckets repeated", Options{Name: "n", LatencyBuckets: []float64{1, 1}}, "LatencyBuckets [1 1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			_, err := New(reg, tc.opts)
			require.ErrorContains(t, err, "outboxprom: "+tc.want)
			families, err := reg.Gather()
			require.NoError(t, err)
			require.Empty(t, families, "nothing registered")
		})
	}
	_, err := New(prometheus.NewRegistry(), Options{Name: "room-outbox, ünïcode \n ok"})
	require.NoError(t, err, "any UTF-8 text is a label value")
}

func requireLint(t *testing.T, reg prometheus.Gatherer) {
	t.Helper()
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)
}

// gather returns every sample by name and labels (sorted by name, as the
// registry sorts them); histograms give their _sum and _count.
func gather(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			sort.Strings(labels)
			key := ""
			if len(labels) > 0 {
				key = "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.GetGauge() != nil:
				out[f.GetName()+key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[f.GetName()+key] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[f.GetName()+"_sum"+key] = m.GetHistogram().GetSampleSum()
				out[f.GetName()+"_count"+key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// namedStore is a consumer's store that names its outbox and consumer
// and reports a backlog: what Options.Store reads.
type namedStore struct {
	backend.Store // nil: only Capabilities and Stats are called
	*scriptedStats
	outbox, consumer string
}

func (s namedStore) Capabilities() backend.Capabilities {
	return backend.Capabilities{Outbox: s.outbox, Consumer: s.consumer}
}

// TestTheStoreNamesTheMetrics: given the Store, the metrics take the
// outbox and consumer labels and the backlog from it; a Name, Consumer
// or Stats given as well must agree, and one that does not is refused,
// naming the field, rather than labelling the metrics wrong.
func TestTheStoreNamesTheMetrics(t *testing.T) {
	s := namedStore{scriptedStats: &scriptedStats{stats: backend.Stats{Pending: 4}}, outbox: "room_outbox", consumer: "activity"}
	reg := prometheus.NewRegistry()
	_, err := New(reg, Options{Store: s})
	require.NoError(t, err)
	require.Equal(t, 4.0, gather(t, reg)[`outbox_pending{consumer="activity",outbox="room_outbox"}`])

	_, err = New(prometheus.NewRegistry(), Options{Store: s, Name: "room_outbox", Consumer: "activity", Stats: s})
	require.NoError(t, err, "the same names and store, given twice, agree")

	def := namedStore{scriptedStats: s.scriptedStats, outbox: "room_outbox"}
	reg = prometheus.NewRegistry()
	_, err = New(reg, Options{Store: def, Consumer: DefaultConsumer})
	require.NoError(t, err)
	require.Contains(t, gather(t, reg), `outbox_pending{consumer="default",outbox="room_outbox"}`)

	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Store: s, Name: "orders_outbox"}, `Name "orders_outbox": the store's outbox is "room_outbox"`},
		{Options{Store: s, Consumer: "audit"}, `Consumer "audit": the store delivers for "activity"`},
		{Options{Store: def, Consumer: "activity"}, `Consumer "activity": the store delivers for "default"`},
		{Options{Store: s, Stats: &scriptedStats{}}, "Stats (*outboxprom.scriptedStats): not the Store"},
		{Options{Store: namedStore{scriptedStats: s.scriptedStats}}, "it does not name its outbox"},
	} {
		_, err := New(prometheus.NewRegistry(), tc.opts)
		require.ErrorContains(t, err, tc.want)
	}
}
