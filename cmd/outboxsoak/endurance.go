package main

import (
	"fmt"
	"io"
	"math"
	"time"
)

// The endurance checks: what a long run must show besides nothing lost
// and every key in order (docs/endurance.md, "What it checks"). They are
// worked out from the samples for every run, and judged (a check that
// does not hold fails the run) only when the steady part of the run
// lasted judgedAfter or more: in a short run the warm-up's growth and
// the faults' aftermath are all there is to see.

// enduranceWindow is how much of the run's steady part each end of a
// flatness check averages: the first after the warm-up, the last before
// the writers stop.
const enduranceWindow = 10 * time.Minute

// judgedAfter is the least steady part a run needs for its endurance
// checks to be judged.
const judgedAfter = 3 * enduranceWindow

// flatGrowth is how much a figure may grow from the first window to the
// last and still count as flat.
const flatGrowth = 0.10

// recoveryLimit is how soon after a fault's end every consumer's lag p99
// must be back under a second.
const recoveryLimit = 30 * time.Second

// check is one endurance check's result.
type check struct {
	Name   string `json:"name"`
	Figure string `json:"figure"`
	Limit  string `json:"limit"`
	// Held says whether the figure is within the limit; nil when the run
	// cannot tell (Why says why).
	Held *bool  `json:"held,omitempty"`
	Why  string `json:"why,omitempty"`
	// Judged is true when a check that does not hold fails the run.
	Judged bool `json:"judged"`
}

func held(b bool) *bool { return &b }

// enduranceChecks works the checks out of s's samples, faults and
// verdicts.
func enduranceChecks(s *summary) []check {
	var steady []sample
	for _, x := range s.Samples {
		if x.Phase == "steady" {
			steady = append(steady, x)
		}
	}
	span := 0.0
	if len(steady) > 1 {
		span = steady[len(steady)-1].T - steady[0].T
	}
	judged := span >= judgedAfter.Seconds()
	var out []check
	for _, f := range []struct {
		name, unit string
		of         func(sample) (float64, bool)
	}{
		{"worker RSS", "MiB", workerMax(func(w workerSample) float64 { return float64(w.RSSBytes) / (1 << 20) })},
		{"worker Go heap", "MiB", workerMax(func(w workerSample) float64 { return float64(w.HeapBytes) / (1 << 20) })},
		{"worker goroutines", "", workerMax(func(w workerSample) float64 { return float64(w.Goroutines) })},
		{"client connections", "", func(x sample) (float64, bool) { return float64(x.ClientConns), true }},
		{"server sessions", "", func(x sample) (float64, bool) {
			if x.Server == nil {
				return 0, false
			}
			return float64(x.Server.Connections), true
		}},
	} {
		c := flatCheck(f.name+" flat", f.unit, steady, steady[0:0], f.of)
		c.Judged = judged
		out = append(out, c)
	}
	out = append(out, tableCheck(s, steady, judged), recoveryCheck(s, judged), backlogCheck(s, judged))
	return out
}

// workerMax is a sample's largest figure of one worker process: a
// process started again after a kill starts small, the others go on.
func workerMax(of func(workerSample) float64) func(sample) (float64, bool) {
	return func(x sample) (float64, bool) {
		m, ok := 0.0, false
		for _, w := range x.Workers {
			m, ok = math.Max(m, of(w)), true
		}
		return m, ok
	}
}

// flatCheck compares the mean of of over the first enduranceWindow of
// samples (or of from, when given) with its mean over the last.
func flatCheck(name, unit string, samples, from []sample, of func(sample) (float64, bool)) check {
	c := check{Name: name, Limit: fmt.Sprintf("the last %v's mean at most %.0f%% above the first %v's", enduranceWindow, flatGrowth*100, enduranceWindow)}
	if len(from) == 0 {
		from = samples
	}
	if len(samples) < 2 || samples[len(samples)-1].T-from[0].T < 2*enduranceWindow.Seconds() {
		c.Why = fmt.Sprintf("needs %v of samples", 2*enduranceWindow)
		return c
	}
	first, okF := windowMean(from, from[0].T, of)
	last, okL := windowMean(samples, samples[len(samples)-1].T-enduranceWindow.Seconds(), of)
	if !okF || !okL {
		c.Why = "not sampled"
		return c
	}
	c.Figure = fmt.Sprintf("%s → %s", num(first, unit), num(last, unit))
	if first > 0 {
		c.Figure += fmt.Sprintf(" (%+.1f%%)", (last/first-1)*100)
	}
	c.Held = held(last <= first*(1+flatGrowth))
	return c
}

// windowMean is the mean of of over the samples from t0 for
// enduranceWindow.
func windowMean(samples []sample, t0 float64, of func(sample) (float64, bool)) (float64, bool) {
	sum, n := 0.0, 0
	for _, x := range samples {
		if x.T < t0 || x.T > t0+enduranceWindow.Seconds() {
			continue
		}
		if v, ok := of(x); ok {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

func num(v float64, unit string) string {
	if unit == "" {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

// tableCheck: with retention, the outbox's tables stop growing once the
// first messages are old enough to go; the first window begins one
// retention age after the warm-up.
func tableCheck(s *summary, steady []sample, judged bool) check {
	of := func(x sample) (float64, bool) {
		if x.Server == nil || len(x.Server.Tables) == 0 {
			return 0, false
		}
		total := 0.0
		for _, t := range x.Server.Tables {
			total += float64(t.DataBytes + t.IndexBytes)
		}
		return total / (1 << 20), true
	}
	retention := s.Config.Tuning.Retention
	if retention <= 0 || len(steady) == 0 {
		return check{Name: "table size bounded by retention", Why: "no retention (--retention)", Judged: judged}
	}
	var from []sample
	for _, x := range steady {
		if x.T >= steady[0].T+retention.Seconds() {
			from = append(from, x)
		}
	}
	if len(from) == 0 {
		return check{Name: "table size bounded by retention", Why: fmt.Sprintf("the steady part is shorter than the retention age %v", retention), Judged: judged}
	}
	c := flatCheck("table size bounded by retention", "MiB", steady, from, of)
	c.Limit = fmt.Sprintf("from one retention age (%v) after the warm-up: %s", retention, c.Limit)
	c.Judged = judged
	return c
}

// recoveryCheck: after each fault, every consumer's lag p99 is back
// under a second within recoveryLimit.
func recoveryCheck(s *summary, judged bool) check {
	c := check{Name: "lag p99 under 1s again after each fault", Limit: fmt.Sprintf("within %v of the fault's end", recoveryLimit), Judged: judged}
	if len(s.Faults) == 0 {
		c.Why = "no faults"
		return c
	}
	worst, at := 0.0, ""
	ok := true
	for _, f := range s.Faults {
		for name, r := range f.RecoveryS {
			if r < 0 || r > recoveryLimit.Seconds() {
				ok = false
			}
			if r < 0 {
				r = math.Inf(1)
			}
			if r > worst || at == "" {
				worst, at = r, f.Label+", "+name
			}
		}
	}
	if math.IsInf(worst, 1) {
		c.Figure = "never, after " + at
	} else {
		c.Figure = fmt.Sprintf("at worst %.0fs (%s)", worst, at)
	}
	c.Held = held(ok)
	return c
}

// backlogCheck: after the drain no consumer has a pending record left.
func backlogCheck(s *summary, judged bool) check {
	c := check{Name: "nothing pending after the drain", Limit: "0 pending for every consumer", Judged: judged}
	total := 0
	for _, name := range s.Config.consumers() {
		if v := s.Consumers[name]; v != nil {
			total += v.Backlog.End
		}
	}
	c.Figure = fmt.Sprintf("%d pending", total)
	c.Held = held(total == 0)
	return c
}

// writeChecks prints the checks as a table.
func writeChecks(w io.Writer, checks []check) {
	if len(checks) == 0 {
		return
	}
	fmt.Fprintf(w, "## Endurance checks\n\n")
	fmt.Fprintf(w, "Judged (a check that does not hold fails the run) when the steady part lasted %v or more.\n\n", judgedAfter)
	fmt.Fprintf(w, "| check | figure | limit | result |\n| --- | --- | --- | --- |\n")
	for _, c := range checks {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", c.Name, c.Figure, c.Limit, c.result())
	}
	fmt.Fprintln(w)
}

// result is the check's outcome in words.
func (c check) result() string {
	switch {
	case c.Held == nil:
		return "n/a: " + c.Why
	case *c.Held && c.Judged:
		return "holds"
	case *c.Held:
		return "holds (not judged)"
	case c.Judged:
		return "**fails**"
	}
	return "does not hold (not judged: a short run)"
}
