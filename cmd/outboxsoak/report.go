package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The report's files, in the report directory.
const (
	summaryFile = "summary.json"
	reportFile  = "report.md"
	plotsDir    = "plots"
)

// makeReportDir creates dir, refusing one that holds a report already.
func makeReportDir(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, summaryFile)); err == nil {
		return fmt.Errorf("--report %s: holds a report already; name another directory", dir)
	}
	return os.MkdirAll(filepath.Join(dir, plotsDir), 0o755)
}

// writeReport writes summary.json, the plots and report.md into dir.
func writeReport(dir string, sum *summary) error {
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, summaryFile), b, 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, plotsDir), 0o755); err != nil {
		return err
	}
	drawn, plotErr := drawCharts(filepath.Join(dir, plotsDir), sum)
	f, err := os.Create(filepath.Join(dir, reportFile))
	if err != nil {
		return errors.Join(plotErr, err)
	}
	writeMarkdown(f, sum, drawn)
	return errors.Join(plotErr, f.Close())
}

// readSummary reads dir's summary.json.
func readSummary(dir string) (*summary, error) {
	b, err := os.ReadFile(filepath.Join(dir, summaryFile))
	if err != nil {
		return nil, err
	}
	var sum summary
	if err := json.Unmarshal(b, &sum); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, summaryFile), err)
	}
	if sum.Config == nil {
		return nil, fmt.Errorf("%s: no config", filepath.Join(dir, summaryFile))
	}
	if sum.Config.PlotFormat == "" {
		sum.Config.PlotFormat = "svg"
	}
	return &sum, nil
}

// writeMarkdown writes the report page: the verdict, the run, each
// consumer's figures, and the plots.
func writeMarkdown(w io.Writer, s *summary, drawn []chart) {
	c := s.Config
	title := "outboxsoak on " + c.Driver
	if s.Label != "" {
		title += " (" + s.Label + ")"
	}
	fmt.Fprintf(w, "# %s\n\n", title)
	if s.Pass {
		fmt.Fprintf(w, "**Pass**: every committed event reached every consumer, nothing else did")
		if c.Tuning.Ordering {
			fmt.Fprintf(w, ", and every key kept its order")
		}
		fmt.Fprintf(w, ".\n\n")
	} else {
		fmt.Fprintf(w, "**Fail**:\n\n")
		for _, f := range s.Failures {
			fmt.Fprintf(w, "- %s\n", f)
		}
		fmt.Fprintln(w)
	}
	writeRunTable(w, s)
	writeConsumerTable(w, s)
	writeFaultTable(w, s)
	writeChecks(w, s.Checks)
	fmt.Fprintf(w, "Lag is from the event's write in its transaction (just before the commit) to the receiver, for first deliveries; the backlog is the store's `Stats` (pending, including records under a head start), sampled every %v.\n\n", c.SampleEvery)
	for _, ch := range drawn {
		fmt.Fprintf(w, "![%s](%s/%s)\n\n", ch.title, plotsDir, ch.file)
	}
}

func writeRunTable(w io.Writer, s *summary) {
	c := s.Config
	db := c.Target
	if s.Scratch {
		db += " (scratch, dropped afterwards)"
		if c.KeepDatabase {
			db = c.Target + " (scratch, kept)"
		}
	}
	workers := fmt.Sprintf("%d processes, each a worker for %s", c.Workers, strings.Join(c.consumers(), " and "))
	if c.Listener && c.Driver == "postgres" {
		workers += " and a postgres.Listener"
	}
	rows := [][2]string{
		{"server", s.Server},
		{"database", db},
		{"writers", fmt.Sprintf("%v events/s for %v through `Writer.Do` (%d writers, %d event(s) per transaction, %d rooms), warm-up %v", c.Rate, c.Duration, c.Writers, c.EventsPerTx, c.Rooms, c.Warmup)},
		{"workers", workers},
		{"worker options", describeTuning(c.Tuning)},
		{"written", fmt.Sprintf("%d events committed (%.1f/s), %d commands done, %d failed", s.Totals.Events, s.Totals.EnqueuePerS, s.Totals.Commands, s.Totals.WriteFailures)},
		{"drain", fmt.Sprintf("%v after the writers stopped (at most %v)", s.Drained.Sub(s.WritingEnded).Round(100*time.Millisecond), c.Drain)},
		{"worker processes", fmt.Sprintf("%d started, %d exited on their own", s.Totals.WorkerProcesses, s.Totals.WorkerCrashes)},
	}
	fmt.Fprintf(w, "| run | |\n| --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s |\n", r[0], strings.ReplaceAll(r[1], "|", `\|`))
	}
	fmt.Fprintln(w)
}

func describeTuning(t tuning) string {
	var parts []string
	parts = append(parts, fmt.Sprintf("Ordering %v", t.Ordering))
	for _, p := range []struct {
		name string
		set  bool
		val  any
	}{
		{"PollInterval", t.PollInterval > 0, t.PollInterval},
		{"BatchSize", t.BatchSize > 0, t.BatchSize},
		{"Concurrency", t.Concurrency > 0, t.Concurrency},
		{"Retention", t.Retention > 0, t.Retention},
	} {
		if p.set {
			parts = append(parts, fmt.Sprintf("%s %v", p.name, p.val))
		} else {
			parts = append(parts, p.name+" default")
		}
	}
	return strings.Join(parts, ", ")
}

func writeConsumerTable(w io.Writer, s *summary) {
	fmt.Fprintf(w, "| consumer | committed | delivered | lost | duplicates | order violations | lag p50 / p99 / max after warm-up | lag p50 / p99 / max, all | backlog start / max / end of writes / end |\n")
	fmt.Fprintf(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, name := range s.Config.consumers() {
		v := s.Consumers[name]
		if v == nil {
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %s | %s | %d / %d / %d / %d |\n", name, v.Committed, v.Unique, v.Lost, v.Duplicates,
			v.OrderViolations, lagText(v.Lag.Steady), lagText(v.Lag.All), v.Backlog.Start, v.Backlog.Max, v.Backlog.EndOfWrites, v.Backlog.End)
	}
	fmt.Fprintln(w)
	for _, name := range s.Config.consumers() {
		v := s.Consumers[name]
		if v == nil || len(v.LostSample) == 0 {
			continue
		}
		fmt.Fprintf(w, "Lost by %s (first %d):\n\n", name, len(v.LostSample))
		for _, p := range v.LostSample {
			fmt.Fprintf(w, "- room %d place %d, ID %s: %s\n", p.Room, p.Seq, p.ID, p.Status)
		}
		fmt.Fprintln(w)
	}
}

// lagText is "p50 / p99 / max", or "-" with no lag counted.
func lagText(l lagFigures) string {
	if l.Count == 0 {
		return "-"
	}
	return fmtMs(l.P50Ms) + " / " + fmtMs(l.P99Ms) + " / " + fmtMs(l.MaxMs)
}

// writeFaultTable lists the faults: when, for how long, what happened,
// the duplicates blamed on each and how soon each consumer's lag p99 was
// back under a second.
func writeFaultTable(w io.Writer, s *summary) {
	if len(s.Faults) == 0 {
		return
	}
	names := s.Config.consumers()
	fmt.Fprintf(w, "| fault | began | lasted | what happened | duplicates (%s) | lag p99 < 1s again after (%s) |\n", strings.Join(names, ", "), strings.Join(names, ", "))
	fmt.Fprintf(w, "| --- | ---: | ---: | --- | ---: | ---: |\n")
	for _, f := range s.Faults {
		what := f.Detail
		if f.Error != "" {
			what = "failed: " + f.Error
		}
		var dups, recs []string
		for _, n := range names {
			dups = append(dups, fmt.Sprint(f.Duplicates[n]))
			if r := f.RecoveryS[n]; r >= 0 {
				recs = append(recs, fmt.Sprintf("%.0fs", r))
			} else {
				recs = append(recs, "never")
			}
		}
		fmt.Fprintf(w, "| %s | %.0fs | %.1fs | %s | %s | %s |\n", f.Label, f.StartS, f.EndS-f.StartS, strings.ReplaceAll(what, "|", `\|`),
			strings.Join(dups, " / "), strings.Join(recs, " / "))
	}
	fmt.Fprintf(w, "\nA duplicate is blamed on the latest fault that began before it arrived (none: before any fault).\n\n")
}
