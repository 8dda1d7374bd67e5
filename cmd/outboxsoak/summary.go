package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// summary is a run's result: summary.json, and what report.md shows.
type summary struct {
	Program      string                      `json:"program"`
	Label        string                      `json:"label,omitempty"`
	Config       *config                     `json:"config"`
	Server       string                      `json:"server"`
	Scratch      bool                        `json:"scratch_database"`
	Started      time.Time                   `json:"started"`
	WritingEnded time.Time                   `json:"writing_ended"`
	Drained      time.Time                   `json:"drained"`
	Ended        time.Time                   `json:"ended"`
	Totals       totals                      `json:"totals"`
	Consumers    map[string]*consumerSummary `json:"consumers"`
	// Pass is true when every consumer got every committed event, nothing
	// that did not commit, and (with ordering) every key in order.
	Pass bool `json:"pass"`
	// Unverified says why the run could not be verified (the database did
	// not answer at the end); such a run fails.
	Unverified string        `json:"unverified,omitempty"`
	Failures   []string      `json:"failures,omitempty"`
	Faults     []faultRecord `json:"faults,omitempty"`
	// Checks are the endurance checks (endurance.go).
	Checks  []check  `json:"checks,omitempty"`
	Samples []sample `json:"samples"`
}

// totals are the run's figures over all consumers.
type totals struct {
	// Commands counts the commands Writer.Do reported done, and
	// WriteFailures those it failed; Events counts the events that
	// committed, from the database (the rooms' seq), which also holds a
	// command whose commit succeeded but whose Do reported an error.
	Commands      int64   `json:"commands"`
	WriteFailures int64   `json:"write_failures"`
	Events        int64   `json:"events_committed"`
	EnqueuePerS   float64 `json:"enqueue_per_s"`
	// WorkerProcesses counts the worker processes started in all;
	// WorkerCrashes those that exited without being asked to.
	WorkerProcesses int `json:"worker_processes"`
	WorkerCrashes   int `json:"worker_crashes"`
	// Refused counts deliveries the receiver could not book.
	Refused int64 `json:"refused"`
}

// consumerSummary is one consumer's result.
type consumerSummary struct {
	verdict
	Backlog backlogFigures `json:"backlog"`
}

// backlogFigures are a consumer's pending records over the run.
type backlogFigures struct {
	// Start is the first sample after the warm-up, EndOfWrites the last
	// before the writers stopped, End the last of the run (after the
	// drain), Max the largest of all.
	Start             int     `json:"start"`
	Max               int     `json:"max"`
	EndOfWrites       int     `json:"end_of_writes"`
	End               int     `json:"end"`
	MaxOldestPendingS float64 `json:"max_oldest_pending_s"`
}

// summarize verifies the run against the database and gathers its
// figures.
func (r *run) summarize() (*summary, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	places, err := r.readCommitted(ctx)
	started, crashes := r.sup.counts()
	sum := &summary{Program: "outboxsoak", Label: r.cfg.Label, Config: r.cfg, Server: r.server, Scratch: r.scratch,
		Started: r.started, WritingEnded: r.writingEnded, Drained: r.drained, Ended: r.ended,
		Totals: totals{Commands: r.load.commands.Load(), WriteFailures: r.load.failures.Load(),
			WorkerProcesses: started, WorkerCrashes: crashes, Refused: r.recv.refused.Load()},
		Consumers: map[string]*consumerSummary{}, Samples: r.sampler.all()}
	if err != nil {
		sum.Unverified = "could not read what committed: " + r.d.redact(err).Error()
	}
	for name, v := range r.ledger.verify(places) {
		if err != nil { // nothing is known to have committed: only what was delivered counts
			v.Committed, v.Phantoms = 0, 0
		}
		r.describeLost(ctx, name, v)
		sum.Consumers[name] = &consumerSummary{verdict: *v, Backlog: backlogOf(sum.Samples, name)}
		sum.Totals.Events = v.Committed
	}
	sum.Faults = r.injector.all()
	fillFaultFigures(sum.Faults, sum.Consumers, sum.Samples, r.cfg.SampleEvery)
	sum.Checks = enduranceChecks(sum)
	if secs := r.writingEnded.Sub(r.started).Seconds(); secs > 0 {
		sum.Totals.EnqueuePerS = math.Round(float64(sum.Totals.Events)/secs*10) / 10
	}
	sum.judge()
	return sum, nil
}

// readCommitted reads how many events each room committed, trying for
// a minute: the database may be restarting.
func (r *run) readCommitted(ctx context.Context) ([]int64, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		places, err := committedPlaces(ctx, r.db, r.cfg.Rooms)
		if err == nil || time.Now().After(deadline) {
			return places, err
		}
		if !sleepUntil(ctx, time.Now().Add(time.Second)) {
			return nil, err
		}
	}
}

// describeLost fills in the ID and the store's status of each lost
// event in v's sample.
func (r *run) describeLost(ctx context.Context, consumer string, v *verdict) {
	for i, p := range v.LostSample {
		id, err := eventID(ctx, r.db, r.d, p.Room, p.Seq)
		if err != nil || id == "" {
			v.LostSample[i].Status = "no business row"
			continue
		}
		v.LostSample[i].ID = id
		rec, err := r.queues[consumer].Get(ctx, id)
		switch {
		case errors.Is(err, backend.ErrNotFound):
			v.LostSample[i].Status = "not in the store"
		case err != nil:
			v.LostSample[i].Status = "unknown: " + r.d.redact(err).Error()
		default:
			v.LostSample[i].Status = fmt.Sprintf("%s, %d attempts", rec.Status, rec.Attempts)
		}
	}
}

// backlogOf reads consumer's backlog figures from the samples.
func backlogOf(ss []sample, consumer string) backlogFigures {
	b := backlogFigures{Start: -1, EndOfWrites: -1, End: -1}
	for _, s := range ss {
		c, ok := s.Consumers[consumer]
		if !ok || c.Pending < 0 {
			continue
		}
		if b.Start < 0 && s.Phase == "steady" {
			b.Start = c.Pending
		}
		if s.Phase != "drain" {
			b.EndOfWrites = c.Pending
		}
		b.End = c.Pending
		b.Max = max(b.Max, c.Pending)
		b.MaxOldestPendingS = max(b.MaxOldestPendingS, c.OldestPendingS)
	}
	return b
}

// judge sets Pass and Failures.
func (s *summary) judge() {
	s.Failures = nil
	if s.Unverified != "" {
		s.Failures = append(s.Failures, s.Unverified)
	} else if s.Totals.Events == 0 {
		s.Failures = append(s.Failures, "no event committed")
	}
	if s.Totals.Refused > 0 {
		s.Failures = append(s.Failures, fmt.Sprintf("the receiver refused %d deliveries", s.Totals.Refused))
	}
	for _, name := range s.Config.consumers() {
		v := s.Consumers[name]
		if v == nil {
			continue
		}
		for _, f := range []struct {
			n    int64
			what string
		}{
			{v.Lost, "lost (committed, never delivered)"},
			{v.Phantoms, "phantoms (delivered, never committed)"},
			{v.Mismatches, "delivered under two IDs"},
			{v.Strays, "strays (not of this run)"},
		} {
			if f.n > 0 {
				s.Failures = append(s.Failures, fmt.Sprintf("%s: %d %s", name, f.n, f.what))
			}
		}
		if s.Config.Tuning.Ordering && v.OrderViolations > 0 {
			s.Failures = append(s.Failures, fmt.Sprintf("%s: %d per-key order violations", name, v.OrderViolations))
		}
	}
	for _, c := range s.Checks {
		if c.Judged && c.Held != nil && !*c.Held {
			s.Failures = append(s.Failures, fmt.Sprintf("endurance: %s: %s (limit: %s)", c.Name, c.Figure, c.Limit))
		}
	}
	s.Pass = len(s.Failures) == 0
}

// marks are the moments the plots mark: the end of the warm-up, the
// writers' stop, and each fault's start (labelled) and end.
func (s *summary) marks() []mark {
	marks := []mark{{T: s.Config.Warmup.Seconds(), Label: "warm-up ends"}}
	if !s.WritingEnded.IsZero() {
		marks = append(marks, mark{T: s.WritingEnded.Sub(s.Started).Seconds(), Label: "writers stop"})
	}
	for _, f := range s.Faults {
		marks = append(marks, mark{T: f.StartS, Label: string(f.Fault.Kind), Fault: true})
		if f.EndS-f.StartS >= 1 {
			marks = append(marks, mark{T: f.EndS, Fault: true, End: true})
		}
	}
	return marks
}
