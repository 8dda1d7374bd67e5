package outboxprom

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox"
)

func TestInboxMetricsCount(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewInboxMetrics(reg, InboxOptions{Consumers: []string{"audit"}})
	require.NoError(t, err)
	ctx := context.Background()
	for _, e := range []inbox.Event{
		{Kind: inbox.EventProcessed, Consumer: "activity", ID: "a", Duration: 4 * time.Millisecond, Attempts: 1},
		{Kind: inbox.EventProcessed, Consumer: "activity", ID: "b", Duration: 6 * time.Millisecond, Attempts: 2},
		{Kind: inbox.EventConflict, Consumer: "activity", ID: "b", Attempts: 1, Err: errors.New("deadlock")},
		{Kind: inbox.EventDuplicate, Consumer: "activity", ID: "a", Duration: time.Millisecond},
		{Kind: inbox.EventDuplicate, Consumer: "activity", ID: "a", Duration: time.Millisecond},
		{Kind: inbox.EventDuplicate, Consumer: "activity", ID: "a", Duration: time.Millisecond},
		{Kind: inbox.EventHandlerFailed, Consumer: "activity", ID: "c", Err: errors.New("boom")},
		{Kind: inbox.EventFailed, Consumer: "activity", ID: "d", Err: errors.New("db down")},
		{Kind: inbox.EventPurged, Consumer: "activity", Count: 250},
		{Kind: inbox.EventKind(99), Consumer: "activity"},
	} {
		m.Observe(ctx, e)
	}
	values := gather(t, reg)
	require.Equal(t, 2.0, values[`inbox_processed_total{consumer="activity"}`])
	require.Equal(t, 3.0, values[`inbox_duplicates_total{consumer="activity"}`])
	require.Equal(t, 1.0, values[`inbox_handler_failures_total{consumer="activity"}`])
	require.Equal(t, 1.0, values[`inbox_errors_total{consumer="activity"}`])
	require.Equal(t, 1.0, values[`inbox_conflicts_total{consumer="activity"}`])
	require.Equal(t, 250.0, values[`inbox_purged_total{consumer="activity"}`])
	require.InDelta(t, 0.010, values[`inbox_process_duration_seconds_sum{consumer="activity",result="processed"}`], 1e-9)
	require.Equal(t, 3.0, values[`inbox_process_duration_seconds_count{consumer="activity",result="duplicate"}`])
	require.Equal(t, 1.0, values[`inbox_process_duration_seconds_count{consumer="activity",result="handler_failed"}`])
	for _, name := range []string{"processed", "duplicates", "handler_failures", "errors", "conflicts", "purged"} {
		v, ok := values[`inbox_`+name+`_total{consumer="audit"}`]
		require.True(t, ok, "%s: a declared consumer is exported at zero", name)
		require.Zero(t, v)
	}

	families, err := reg.Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(families).Lint()
	require.NoError(t, err)
	require.Empty(t, problems)
}

func TestInboxMetricsBesideWorkerMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	_, err := New(reg, Options{Name: "activity_outbox"})
	require.NoError(t, err)
	_, err = NewInboxMetrics(reg, InboxOptions{})
	require.NoError(t, err)
	_, err = NewInboxMetrics(reg, InboxOptions{})
	var already prometheus.AlreadyRegisteredError
	require.ErrorAs(t, err, &already, "one InboxMetrics per registry serves every consumer")
}

func TestInboxOptionsValidation(t *testing.T) {
	_, err := NewInboxMetrics(prometheus.NewRegistry(), InboxOptions{DurationBuckets: []float64{1, 1}})
	require.ErrorContains(t, err, "DurationBuckets [1 1]")
	_, err = NewInboxMetrics(prometheus.NewRegistry(), InboxOptions{Consumers: []string{"\xff"}})
	require.ErrorContains(t, err, "Consumers")
}

func TestInboxMetricsInvalidConsumer(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewInboxMetrics(reg, InboxOptions{})
	require.NoError(t, err)
	m.Observe(context.Background(), inbox.Event{Kind: inbox.EventProcessed, Consumer: "bad\xff"})
	require.Equal(t, 1.0, gather(t, reg)[`inbox_processed_total{consumer="invalid"}`])
}

// inboxExported returns the inbox metric families, after an event of
// every kind, by name.
func inboxExported(t *testing.T) map[string]dto.MetricType {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := NewInboxMetrics(reg, InboxOptions{})
	require.NoError(t, err)
	for k := inbox.EventProcessed; k <= inbox.EventPurged; k++ {
		m.Observe(context.Background(), inbox.Event{Kind: k, Consumer: "activity", Count: 1})
	}
	return familyTypes(t, reg)
}

// TestInboxAlertRulesUseExportedMetrics: the inbox alert rules are a
// Prometheus rule file, every rule has a severity and a summary, is per
// consumer, and names only inbox metrics the package exports.
func TestInboxAlertRulesUseExportedMetrics(t *testing.T) {
	known := inboxExported(t)
	require.Len(t, known, 7)
	file := readAlertRules(t, "monitoring/prometheus-inbox-alerts.yaml")
	require.Len(t, file.Groups, 1)
	require.Equal(t, "inbox", file.Groups[0].Name)
	alerts := map[string]bool{}
	for _, r := range file.Groups[0].Rules {
		require.False(t, alerts[r.Alert], "%s twice", r.Alert)
		alerts[r.Alert] = true
		requireKnownMetrics(t, "alert "+r.Alert, r.Expr, known)
		require.Contains(t, r.Expr, "by (consumer)", "alert %s: one alert per consumer", r.Alert)
		_, err := time.ParseDuration(r.For)
		require.NoError(t, err, "alert %s: for", r.Alert)
		require.Contains(t, []string{"info", "warning", "critical"}, r.Labels["severity"], "alert %s", r.Alert)
		require.NotEmpty(t, r.Annotations["summary"], "alert %s", r.Alert)
	}
	for _, want := range []string{"InboxHandlerFailing", "InboxErrors"} {
		require.True(t, alerts[want], "missing alert %s", want)
	}
}
