package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// faultRecord is what happened when one fault of the schedule was
// injected.
type faultRecord struct {
	Fault fault  `json:"fault"`
	Label string `json:"label"`
	// StartS and EndS are seconds since the writers started: when the
	// fault began, and when it was over (the receiver answered again, the
	// database answered again, …).
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	Detail string  `json:"detail,omitempty"`
	Error  string  `json:"error,omitempty"`
	// Duplicates counts, per consumer, the duplicates blamed on this
	// fault: those that arrived after it began and before the next began.
	Duplicates map[string]int64 `json:"duplicates"`
	// RecoveryS is, per consumer, how long after the fault's end the lag
	// p99 of a sampling interval was back under a second (to the end of
	// that interval); -1 if it never was.
	RecoveryS map[string]float64 `json:"recovery_s"`
}

// injector injects the faults of the schedule into a run, one at a
// time, in order, and keeps what happened. A fault that lasts is undone
// when it is over, or when ctx ends, whichever comes first.
type injector struct {
	r     *run
	start time.Time

	mu      sync.Mutex
	records []faultRecord
	begins  []time.Time // when each record's fault began
}

// run injects every fault at its time, until ctx ends.
func (in *injector) run(ctx context.Context, faults []fault) {
	for _, f := range faults {
		if !sleepUntil(ctx, in.start.Add(f.At)) {
			return
		}
		i := in.begin(f)
		detail, err := in.apply(ctx, f)
		in.finish(i, detail, err)
	}
}

func (in *injector) begin(f fault) int {
	now := time.Now()
	in.mu.Lock()
	defer in.mu.Unlock()
	in.records = append(in.records, faultRecord{Fault: f, Label: f.label(), StartS: now.Sub(in.start).Seconds()})
	in.begins = append(in.begins, now)
	in.r.logger.Info("fault", slog.String("fault", f.label()), slog.Duration("for", f.For))
	return len(in.records) - 1
}

func (in *injector) finish(i int, detail string, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	rec := &in.records[i]
	rec.EndS, rec.Detail = time.Since(in.start).Seconds(), detail
	if err != nil {
		rec.Error = in.r.d.redact(err).Error()
		in.r.logger.Warn("the fault failed", slog.String("fault", rec.Label), slog.String("error", rec.Error))
		return
	}
	in.r.logger.Info("the fault is over", slog.String("fault", rec.Label), slog.String("detail", detail))
}

// causeAt names the fault a duplicate that arrived at t is blamed on:
// the latest to begin at or before t, or noCause.
func (in *injector) causeAt(t time.Time) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	for i := len(in.begins) - 1; i >= 0; i-- {
		if !in.begins[i].After(t) {
			return in.records[i].Label
		}
	}
	return noCause
}

// all returns the records so far.
func (in *injector) all() []faultRecord {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]faultRecord(nil), in.records...)
}

// apply injects f and, for one that lasts, waits until it is over and
// undoes it. It returns what it did, for the report.
func (in *injector) apply(ctx context.Context, f fault) (string, error) {
	r := in.r
	switch f.Kind {
	case killWorker:
		slot, _ := strconv.Atoi(f.Param)
		pid, err := r.sup.kill(slot)
		return fmt.Sprintf("SIGKILL to pid %d in slot %d", pid, slot), err
	case killConns:
		ports := r.proxy.upstreamPorts()
		n, err := r.d.killSessions(ctx, r.monitor, r.database, ports)
		return fmt.Sprintf("the server ended %d of the worker processes' %d sessions", n, len(ports)), err
	case dbRestart:
		return in.restartDB(ctx)
	case sinkDown:
		if err := r.recv.down(); err != nil {
			return "", err
		}
		sleepUntil(ctx, time.Now().Add(f.For))
		return "the receiver refused connections", r.recv.up(context.WithoutCancel(ctx))
	case sink503:
		r.recv.refuse.Store(true)
		sleepUntil(ctx, time.Now().Add(f.For))
		r.recv.refuse.Store(false)
		return "the receiver answered 503", nil
	case sinkSlow:
		delay := defaultSlowDelay
		if f.Param != "" {
			delay, _ = time.ParseDuration(f.Param)
		}
		r.recv.delay.Store(int64(delay))
		sleepUntil(ctx, time.Now().Add(f.For))
		r.recv.delay.Store(0)
		return fmt.Sprintf("the receiver answered %v late", delay), nil
	case netStall:
		r.proxy.stall()
		sleepUntil(ctx, time.Now().Add(f.For))
		r.proxy.thaw()
		return "the proxy forwarded nothing", nil
	}
	return "", fmt.Errorf("no fault %q", f.Kind)
}

// restartDB runs --db-restart-cmd (to its end, even if the run is
// interrupted: a database left down helps no one), then waits until the
// database answers again.
func (in *injector) restartDB(ctx context.Context) (string, error) {
	r := in.r
	began := time.Now()
	logPath := filepath.Join(r.cfg.ReportDir, "logs", fmt.Sprintf("db-restart-%d.log", began.Unix()))
	out, err := exec.CommandContext(context.WithoutCancel(ctx), "sh", "-c", r.cfg.DBRestartCmd).CombinedOutput()
	if werr := os.WriteFile(logPath, out, 0o644); werr != nil {
		err = errors.Join(err, werr)
	}
	if err != nil {
		return "", fmt.Errorf("--db-restart-cmd: %w (its output is in %s)", err, logPath)
	}
	took := time.Since(began)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var one int
		err := r.monitor.QueryRowContext(pctx, "SELECT 1").Scan(&one)
		cancel()
		if err == nil {
			return fmt.Sprintf("the command took %v, the database answered after %v", took.Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond)), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the database did not answer within 2m of the restart: %w", err)
		}
		time.Sleep(200 * time.Millisecond) // polling a server that is starting
	}
}

// fillFaultFigures sets each record's duplicates, from the verdicts, and
// its recovery, from the samples.
func fillFaultFigures(records []faultRecord, verdicts map[string]*consumerSummary, samples []sample, every time.Duration) {
	for i := range records {
		rec := &records[i]
		rec.Duplicates, rec.RecoveryS = map[string]int64{}, map[string]float64{}
		for name, v := range verdicts {
			rec.Duplicates[name] = v.DuplicateCauses[rec.Label]
			rec.RecoveryS[name] = recovery(samples, name, rec.EndS, every)
		}
	}
}

// recovery returns how long after end the first sampling interval that
// began at or after it had consumer's lag p99 under a second, counted to
// that interval's end; -1 if none did.
func recovery(samples []sample, consumer string, end float64, every time.Duration) float64 {
	for _, s := range samples {
		if s.T-every.Seconds() < end {
			continue // the interval began before the fault was over
		}
		c := s.Consumers[consumer]
		if c.Lag.Count > 0 && c.Lag.P99Ms < 1000 {
			return s.T - end
		}
	}
	return -1
}
