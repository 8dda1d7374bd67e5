package main

import (
	"strings"
	"testing"
	"time"
)

// longRun is an hour's samples every 5s after a minute of warm-up, with
// worker RSS rss(t) MiB and tables of table(t) MiB (t in seconds since
// the writers started).
func longRun(minutes int, rss, table func(t float64) float64) *summary {
	cfg := &config{Consumer: "activity", Tuning: tuning{Retention: 10 * time.Minute}}
	s := &summary{Config: cfg, Totals: totals{Events: 1}, Consumers: map[string]*consumerSummary{defaultConsumer: {}, "activity": {}}}
	for t := 0.0; t <= float64(minutes*60); t += 5 {
		phase := "steady"
		if t < 60 {
			phase = "warmup"
		}
		s.Samples = append(s.Samples, sample{T: t, Phase: phase, ClientConns: 23,
			Workers: []workerSample{{workerStatus: workerStatus{RSSBytes: uint64(rss(t) * (1 << 20)), HeapBytes: 4 << 20, Goroutines: 30}}},
			Server:  &serverFigures{Connections: 27, Tables: map[string]tableFigures{"soak_outbox": {DataBytes: int64(table(t) * (1 << 20))}}}})
	}
	return s
}

func checkNamed(t *testing.T, cs []check, name string) check {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, cs)
	return check{}
}

func TestEnduranceChecks(t *testing.T) {
	flat := func(float64) float64 { return 20 }
	bounded := func(t float64) float64 { return 5 + 10*min(t, 900)/900 } // grows for 15 minutes, then stays
	s := longRun(61, flat, bounded)
	s.Faults = []faultRecord{{Label: "sink-down@5m", RecoveryS: map[string]float64{defaultConsumer: 4, "activity": 6}}}
	s.Checks = enduranceChecks(s)
	s.judge()
	for _, c := range s.Checks {
		if c.Held == nil || !*c.Held || !c.Judged {
			t.Errorf("%s: %s (%s)", c.Name, c.result(), c.Figure)
		}
	}
	if !s.Pass {
		t.Errorf("failures: %v", s.Failures)
	}
	if c := checkNamed(t, s.Checks, "lag p99 under 1s again after each fault"); !strings.Contains(c.Figure, "6s (sink-down@5m, activity)") {
		t.Errorf("recovery figure %q", c.Figure)
	}

	// RSS that grows by half over the hour, tables that grow without
	// bound, a consumer that took a minute to recover: each fails it.
	s = longRun(61, func(t float64) float64 { return 20 + 10*t/3660 }, func(t float64) float64 { return 5 + t/60 })
	s.Faults = []faultRecord{{Label: "net-stall@9m", RecoveryS: map[string]float64{defaultConsumer: 4, "activity": 61}}}
	s.Consumers["activity"].Backlog.End = 3
	s.Checks = enduranceChecks(s)
	s.judge()
	for _, name := range []string{"worker RSS flat", "table size bounded by retention", "lag p99 under 1s again after each fault", "nothing pending after the drain"} {
		if c := checkNamed(t, s.Checks, name); c.Held == nil || *c.Held {
			t.Errorf("%s: %s (%s)", name, c.result(), c.Figure)
		}
		if !strings.Contains(strings.Join(s.Failures, "\n"), "endurance: "+name) {
			t.Errorf("no failure for %s in %v", name, s.Failures)
		}
	}
	if c := checkNamed(t, s.Checks, "worker goroutines flat"); c.Held == nil || !*c.Held {
		t.Errorf("goroutines: %s", c.result())
	}

	// A short run: the flatness checks cannot tell, and nothing is judged.
	s = longRun(5, func(t float64) float64 { return 20 + t }, flat)
	s.Faults = []faultRecord{{Label: "kill-worker@1m", RecoveryS: map[string]float64{defaultConsumer: 40, "activity": 2}}}
	s.Checks = enduranceChecks(s)
	s.judge()
	if !s.Pass {
		t.Errorf("a short run failed on its endurance checks: %v", s.Failures)
	}
	if c := checkNamed(t, s.Checks, "worker RSS flat"); c.Held != nil || c.Judged {
		t.Errorf("RSS in a short run: %+v", c)
	}
	if c := checkNamed(t, s.Checks, "lag p99 under 1s again after each fault"); c.Held == nil || *c.Held || c.Judged {
		t.Errorf("recovery in a short run: %+v", c)
	}
}
