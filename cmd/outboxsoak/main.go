// Command outboxsoak runs the outbox under steady load for as long as it
// is told, and checks every event end to end: a soak (issue 40), for
// this repository's endurance runs and for teams who want to see the
// outbox on their own database before they trust it.
//
//	outboxsoak run --driver mysql|postgres --dsn DSN [flags]
//
// It writes events at a steady rate through Writer.Do (a business row
// and its events in one transaction, published right after the commit),
// runs worker processes (this program again, with a hidden subcommand)
// that deliver them, for the default consumer and a named one, to a
// counting receiver of its own, and verifies by ID that no committed
// event was lost, which were duplicated, and that each key kept its
// order. It can inject faults on a schedule (--faults, --fault-every):
// worker processes killed, their sessions killed, a database restart,
// the receiver down, refusing or slow, the network to the database
// stalled. Every few seconds it samples throughput, lag, backlog, the
// worker processes' memory and goroutines, connections and table sizes.
// The report (summary.json, report.md and SVG plots) goes to --report.
// See docs/endurance.md.
//
// Exit codes: 0 the run passed; 1 it failed (an event lost, out of
// order, …); 2 a bad flag; 3 the run could not be made (no database, …).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // the run failed its checks
	exitUsage  = 2
	exitError  = 3 // the run could not be made
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// realMain runs the command in args and returns its exit code.
func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runCommand(args[1:], stdout, stderr)
	case "report":
		return reportCommand(args[1:], stdout, stderr)
	case workerCommand:
		return workerMain(args[1:], stderr)
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "outboxsoak: unknown command %q; try outboxsoak -h\n", args[0])
	return exitUsage
}

// usage prints the program's usage, with the run command's flags.
func usage(w io.Writer) {
	fmt.Fprint(w, `outboxsoak runs the outbox under steady load and checks every event end to end.

Usage:

  outboxsoak run --driver mysql|postgres --dsn DSN [flags]
  outboxsoak report [--plot-format svg|png] DIR   draw a run's report again from DIR/summary.json

For example, 15 minutes at 200 events/s with a named consumer, in order:

  outboxsoak run --driver mysql --dsn 'root@tcp(127.0.0.1:3306)/' --ordering --report soak-mysql
  outboxsoak run --driver postgres --dsn 'postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable' --ordering --report soak-pg

With faults, at set times or one every 2-5 minutes:

  outboxsoak run ... --faults 'kill-worker@2m,kill-conns@3m,sink-down@6m+15s,sink-slow:2s@8m+20s,net-stall@9m+10s'
  outboxsoak run ... --fault-every 2m-5m --db-restart-cmd 'pg_ctl -D /my/own/server -m fast -w restart'

It creates a scratch database on the server (or, with --use-dsn-database,
writes into the DSN's), runs --workers worker processes that deliver to a
counting receiver of its own, writes events for --duration, waits up to
--drain for the last ones, and writes summary.json, report.md and plots
into --report. It prints a line per sample while it runs, and the verdict
at the end. Exit codes: 0 passed, 1 failed (lost, out of order, ...),
2 bad flag, 3 could not run.

Flags of run:

`)
	var cfg config
	fs := newRunFlags(&cfg, w)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintln(w, "\nSee docs/endurance.md for what it measures and how to read the report.")
}

// runCommand is outboxsoak run.
func runCommand(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseRunFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "outboxsoak run: %v\n", err)
		return exitUsage
	}
	stderr = &syncWriter{w: stderr} // the log and the sampler's lines, from several goroutines
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second interrupt ends the program at once
	}()
	sum, err := soak(ctx, cfg, logger, stderr)
	if sum != nil {
		printVerdict(stdout, sum)
	}
	if err != nil {
		fmt.Fprintf(stderr, "outboxsoak run: %v\n", err)
		return exitError
	}
	if !sum.Pass {
		return exitFailed
	}
	return exitOK
}

// printVerdict prints the run's result in a few lines.
func printVerdict(w io.Writer, s *summary) {
	verdict := "PASS"
	if !s.Pass {
		verdict = "FAIL: " + strings.Join(s.Failures, "; ")
	}
	fmt.Fprintf(w, "outboxsoak %s on %s: %d events committed (%.1f/s), %d write failures\n", s.Config.Driver, s.Server, s.Totals.Events, s.Totals.EnqueuePerS, s.Totals.WriteFailures)
	for _, name := range s.Config.consumers() {
		v := s.Consumers[name]
		if v == nil {
			continue
		}
		fmt.Fprintf(w, "  %-10s lost %d, duplicates %d, order violations %d; lag after warm-up p50 %s p99 %s max %s; backlog start %d max %d end of writes %d end %d\n",
			name, v.Lost, v.Duplicates, v.OrderViolations, fmtMs(v.Lag.Steady.P50Ms), fmtMs(v.Lag.Steady.P99Ms), fmtMs(v.Lag.Steady.MaxMs),
			v.Backlog.Start, v.Backlog.Max, v.Backlog.EndOfWrites, v.Backlog.End)
	}
	for _, c := range s.Checks {
		fmt.Fprintf(w, "  check: %s: %s\n", c.Name, c.result())
	}
	fmt.Fprintf(w, "  %s; report in %s\n", verdict, s.Config.ReportDir)
}

// reportCommand is outboxsoak report: the report of a run drawn again
// from its summary.json, say in another plot format.
func reportCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("plot-format", "", "the plots' format: svg or png (default: the run's)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "outboxsoak report: want one argument, the report's directory")
		return exitUsage
	}
	dir := fs.Arg(0)
	sum, err := readSummary(dir)
	if err != nil {
		fmt.Fprintf(stderr, "outboxsoak report: %v\n", err)
		return exitError
	}
	switch *format {
	case "":
	case "svg", "png":
		sum.Config.PlotFormat = *format
	default:
		fmt.Fprintf(stderr, "outboxsoak report: --plot-format %q: must be svg or png\n", *format)
		return exitUsage
	}
	if sum.Checks == nil {
		// A summary of an older build: its endurance checks, worked
		// out from its samples.
		sum.Checks = enduranceChecks(sum)
		sum.judge()
	}
	if err := writeReport(dir, sum); err != nil {
		fmt.Fprintf(stderr, "outboxsoak report: %v\n", err)
		return exitError
	}
	printVerdict(stdout, sum)
	return exitOK
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
