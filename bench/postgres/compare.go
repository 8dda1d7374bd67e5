package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/bench/internal/benchkit"
)

// The compare scenario drains the same backlog several ways, in
// alternating rounds (the order rotating from round to round), and reports
// medians, ratios, the WAL the server wrote, the CPU time it used (with
// -server-pid) and the rows it touched per delivered event. See the arms'
// files for what each does.

// compareConfig is one configuration of the comparison.
type compareConfig = benchkit.Config

// arm is one contender of the comparison.
type arm struct {
	name string
	// prepare makes a backlog of n events of c.Payload bytes, on a fresh
	// table, analysed.
	prepare func(ctx context.Context, b *bench, n int, c compareConfig) error
	// drain delivers the backlog with c.Workers workers, each on a pool
	// of its own, and returns how long that took, from before the first
	// connection to the last outcome committed, and how many deliveries
	// its consumer saw. It closes its pools before it returns.
	drain func(ctx context.Context, b *bench, n int, c compareConfig) (time.Duration, int, error)
	// left counts the events of the backlog not marked delivered (by
	// each of its consumers).
	left func(ctx context.Context, b *bench) (int, error)
	// deliveries is how many deliveries each event gets: 1 (0 says 1 as
	// well), or more for an arm with named consumers.
	deliveries int
}

// allArms are the arms in the order they are reported: the relay first,
// the ceiling last.
func allArms() []arm {
	return []arm{
		{name: "relay", prepare: relayPrepare, drain: relayDrain, left: relayLeft},
		{name: "River", prepare: riverPrepare, drain: riverDrain, left: riverLeft},
		{name: riverDefaultsArm, prepare: riverPrepare, drain: riverDefaultsDrain, left: riverLeft},
		{name: "Watermill", prepare: watermillPrepare, drain: watermillDrain, left: watermillLeft},
		{name: "ceiling", prepare: ceilingPrepare, drain: ceilingDrain, left: ceilingLeft},
	}
}

func armNames() []string {
	var names []string
	for _, a := range allArms() {
		names = append(names, a.name)
	}
	return names
}

func (b *bench) pickArms(names []string) error {
	var picked []arm
	for _, a := range allArms() {
		if slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(strings.TrimSpace(n), a.name) }) {
			picked = append(picked, a)
		}
	}
	if len(picked) != len(names) {
		return fmt.Errorf("%q: the arms are %s", strings.Join(names, ","), strings.Join(armNames(), ", "))
	}
	b.arms = picked
	return nil
}

// measured prepares a backlog and drains it between two readings of the
// counters, then checks (outside them) that every event was delivered
// exactly once (to each of its consumers) and marked delivered. A checkpoint comes first, so that no drain pays for full-page
// images that another did not (the backlog is written after it, and the
// drain follows within the same checkpoint cycle, as a backlog drained
// soon after it is written does).
func (b *bench) measured(ctx context.Context, a arm, n int, c compareConfig) (drainStats, error) {
	if err := b.exec(ctx, "CHECKPOINT"); err != nil {
		return drainStats{}, err
	}
	if err := a.prepare(ctx, b, n, c); err != nil {
		return drainStats{}, fmt.Errorf("prepare: %w", err)
	}
	before, err := b.readCounters(ctx)
	if err != nil {
		return drainStats{}, err
	}
	d, delivered, err := a.drain(ctx, b, n, c)
	if err != nil {
		return drainStats{}, err
	}
	if err := b.quiesce(ctx); err != nil {
		return drainStats{}, err
	}
	after, err := b.readCounters(ctx)
	if err != nil {
		return drainStats{}, err
	}
	left, err := a.left(ctx, b)
	if err != nil {
		return drainStats{}, err
	}
	want := n * max(a.deliveries, 1)
	if b.onDrain != nil {
		b.onDrain(a.name, c, want, delivered, left)
	}
	if delivered != want || left != 0 {
		return drainStats{}, fmt.Errorf("%d events enqueued, %d deliveries of %d due, %d left undelivered", n, delivered, want, left)
	}
	return drainStats{rate: benchkit.PerSec(n, d), counter: after.minus(before), events: n}, nil
}

// count runs a count query on the control connection.
func (b *bench) count(ctx context.Context, q string) (int, error) {
	var n int
	err := b.ctl.QueryRow(ctx, q).Scan(&n)
	return n, err
}

// compare runs every arm for each configuration, in alternating rounds,
// and reports medians.
func (b *bench) compare(ctx context.Context, sz sizes) ([]row, error) {
	var rows []row
	n := sz.compareEvents
	for _, c := range sz.compareConfigs {
		name := func(k int) string { return b.arms[k].name + ", " + benchkit.FormatConfigs([]compareConfig{c}) }
		results, err := benchkit.Alternate(sz.compareRounds, len(b.arms), name, func(k int) (drainStats, error) { return b.measured(ctx, b.arms[k], n, c) })
		if err != nil {
			return nil, err
		}
		med := map[string]drainStats{}
		for i, a := range b.arms {
			med[a.name] = medianStats(results[i])
		}
		rows = append(rows, compareRows(b.arms, med, c, n, sz.compareRounds)...)
	}
	return rows, nil
}

// compareRows reports one configuration: each arm's rate against the
// ceiling, the relay's against River (tuned and at its defaults) and
// Watermill, then WAL, server CPU (with -server-pid) and rows per
// delivered event.
func compareRows(arms []arm, med map[string]drainStats, c compareConfig, n, rounds int) []row {
	what := fmt.Sprintf("%d worker(s), batch %d, %d B payload, %d events, median of %d", c.Workers, c.Batch, c.Payload, n, rounds)
	ceiling, hasCeiling := med["ceiling"]
	relay, hasRelay := med["relay"]
	var rows []row
	for _, a := range arms {
		st := med[a.name]
		name := a.name
		if alters := relayAlters(); name == "relay" && len(alters) > 0 {
			name += " (" + strings.Join(alters, "; ") + ")"
		}
		r := row{Scenario: "compare: " + name + ", " + what, Figure: benchkit.EvRate(st.rate)}
		if hasCeiling && a.name != "ceiling" {
			r.Reference, r.Ratio = "ceiling "+benchkit.EvRate(ceiling.rate), a.name+"/ceiling "+benchkit.Ratio(st.rate, ceiling.rate)
			if a.name == "relay" && c.Workers == 1 {
				r.Target = "≥ 0.75"
			}
		}
		rows = append(rows, r)
	}
	if hasRelay {
		for _, peer := range []string{"River", riverDefaultsArm, "Watermill"} {
			if st, ok := med[peer]; ok {
				rows = append(rows, row{Scenario: "compare: relay vs " + peer + ", " + what, Figure: benchkit.EvRate(relay.rate),
					Reference: peer + " " + benchkit.EvRate(st.rate), Ratio: "relay/" + peer + " " + benchkit.Ratio(relay.rate, st.rate), Target: "≥ 1.2"})
			}
		}
	}
	for _, a := range arms {
		st := med[a.name]
		r := row{Scenario: "compare: WAL, server CPU and rows per delivered event, " + a.name + ", " + what,
			Figure: fmt.Sprintf("%.0f B WAL", st.perEvent(st.counter.wal)), Reference: st.rowsPerEvent() + "; " + perBatch(st, c.Batch) + "; CPU " + st.cpuPerEvent()}
		if server, ok := st.serverCPU(); ok {
			r.Figure += fmt.Sprintf(", server CPU %.1f µs", server)
		}
		if hasCeiling && a.name != "ceiling" {
			r.Ratio = "WAL/ceiling's " + benchkit.Ratio(st.perEvent(st.counter.wal), ceiling.perEvent(ceiling.counter.wal))
			if server, ok := st.serverCPU(); ok {
				ceilingServer, _ := ceiling.serverCPU()
				r.Ratio += "; server CPU/ceiling's " + benchkit.Ratio(server, ceilingServer)
			}
			if a.name == "relay" {
				r.Target = "WAL ≤ 2"
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// perBatch is the commits per batch of size events, and whether a
// checkpoint fell in the drain (its full-page images count in the WAL).
func perBatch(s drainStats, size int) string {
	out := fmt.Sprintf("%.1f commits per %d events", s.counter.commits*float64(size)/float64(s.events), size)
	if s.counter.checkpoints > 0 {
		out += fmt.Sprintf(", %.0f checkpoint(s) during the drain", s.counter.checkpoints)
	}
	return out
}

// medianStats is the drain of median rate; its counters go with it.
func medianStats(xs []drainStats) drainStats {
	sorted := slices.Clone(xs)
	slices.SortFunc(sorted, func(a, b drainStats) int {
		switch {
		case a.rate < b.rate:
			return -1
		case a.rate > b.rate:
			return 1
		}
		return 0
	})
	return sorted[len(sorted)/2]
}

// waitDone polls done every 2 ms until it reports true (benchkit.WaitDone).
func waitDone(ctx context.Context, what string, limit time.Duration, done func() (bool, error)) error {
	return benchkit.WaitDone(ctx, what, limit, 2*time.Millisecond, done)
}
