package outboxprom

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// metricRE finds the metric names in a PromQL expression: every metric
// is outbox_* or inbox_*, and the labels (outbox, consumer, …) have no
// underscore after "outbox".
var metricRE = regexp.MustCompile(`\b(?:outbox|inbox)_[a-zA-Z0-9_:]*`)

// exported returns the metric families the package registers, after an
// event of every kind and a backlog reading, by name.
func exported(t *testing.T) map[string]dto.MetricType {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, Options{Name: "room_outbox", Stats: &scriptedStats{stats: backend.Stats{Pending: 1, OldestPending: time.Second}}})
	require.NoError(t, err)
	observeAll(m)
	return familyTypes(t, reg)
}

// familyTypes returns the types of the metric families reg gathers, by
// name.
func familyTypes(t *testing.T, reg prometheus.Gatherer) map[string]dto.MetricType {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]dto.MetricType{}
	for _, f := range families {
		out[f.GetName()] = f.GetType()
	}
	return out
}

// requireKnownMetrics checks that expr names at least one metric and only
// metrics the package exports (a histogram's series by their suffixes).
func requireKnownMetrics(t *testing.T, where, expr string, known map[string]dto.MetricType) {
	t.Helper()
	names := metricRE.FindAllString(expr, -1)
	require.NotEmpty(t, names, "%s: no outbox metric in %q", where, expr)
	for _, name := range names {
		if _, ok := known[name]; ok {
			continue
		}
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			base = strings.TrimSuffix(base, suffix)
		}
		require.Equal(t, dto.MetricType_HISTOGRAM, known[base], "%s: %s is not a metric of outboxprom (in %q)", where, name, expr)
	}
}

// TestDashboardUsesExportedMetrics: the Grafana dashboard is valid JSON,
// every query names only metrics the package exports, and every panel
// follows the outbox and consumer variables.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	known := exported(t)
	raw, err := os.ReadFile("monitoring/grafana-dashboard.json")
	require.NoError(t, err)
	var dash struct {
		UID        string
		Templating struct {
			List []struct {
				Name, Definition string
			}
		}
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	require.NoError(t, dec.Decode(&dash))
	require.NotEmpty(t, dash.UID)

	variables := map[string]bool{}
	for _, v := range dash.Templating.List {
		variables[v.Name] = true
		if v.Definition != "" {
			requireKnownMetrics(t, "variable "+v.Name, v.Definition, known)
		}
	}
	require.Equal(t, map[string]bool{"datasource": true, "outbox": true, "consumer": true}, variables)

	var titles []string
	for _, p := range dash.Panels {
		titles = append(titles, p.Title)
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, target := range p.Targets {
			requireKnownMetrics(t, "panel "+p.Title, target.Expr, known)
			for _, name := range metricRE.FindAllString(target.Expr, -1) {
				require.Contains(t, target.Expr, name+`{outbox=~"$outbox", consumer=~"$consumer"}`, "panel %q", p.Title)
			}
		}
	}
	for _, want := range []string{"Pending messages", "Oldest pending age", "Dead letters", "Publish rate", "Publish failure rate", "Lease losses"} {
		require.Contains(t, titles, want)
	}
}

// alertRules is the Prometheus rule file format (the parts it uses).
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// readAlertRules decodes a rule file, refusing unknown keys.
func readAlertRules(t *testing.T, path string) alertRules {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	var file alertRules
	require.NoError(t, dec.Decode(&file))
	return file
}

// TestAlertRulesUseExportedMetrics: the alert rules are a Prometheus rule
// file (no unknown keys), every rule has a severity and a summary, and
// every expression names only metrics the package exports.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	known := exported(t)
	file := readAlertRules(t, "monitoring/prometheus-alerts.yaml")
	require.Len(t, file.Groups, 1)
	require.Equal(t, "outbox", file.Groups[0].Name)
	alerts := map[string]bool{}
	for _, r := range file.Groups[0].Rules {
		require.NotEmpty(t, r.Alert)
		require.False(t, alerts[r.Alert], "%s twice", r.Alert)
		alerts[r.Alert] = true
		requireKnownMetrics(t, "alert "+r.Alert, r.Expr, known)
		require.Contains(t, r.Expr, "by (outbox, consumer", "alert %s: one alert per outbox and consumer", r.Alert)
		if r.For != "" {
			_, err := time.ParseDuration(r.For)
			require.NoError(t, err, "alert %s: for", r.Alert)
		}
		require.Contains(t, []string{"info", "warning", "critical"}, r.Labels["severity"], "alert %s", r.Alert)
		require.NotEmpty(t, r.Annotations["summary"], "alert %s", r.Alert)
	}
	for _, want := range []string{"OutboxOldestPendingTooOld", "OutboxDeadLettersGrowing", "OutboxPublishFailureRateHigh", "OutboxLeaseLost"} {
		require.True(t, alerts[want], "missing alert %s", want)
	}
}
