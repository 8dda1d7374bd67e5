package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// sample is what the run measured at one moment. A figure that could
// not be read is -1 (or absent), and the reason is in Errors.
type sample struct {
	// T is the time since the writers started, in seconds.
	T     float64 `json:"t_s"`
	Phase string  `json:"phase"` // warmup, steady or drain
	// EnqueuePerS counts the events of commands that committed in the
	// interval; WriteLatency is how long their Writer.Do calls took (the
	// transaction and the after-commit publish); WriteBehindMs is the
	// most a command started after its time (the writers did not keep
	// up), WriteFailures the commands that failed so far.
	EnqueuePerS   float64                   `json:"enqueue_per_s"`
	WriteLatency  lagFigures                `json:"write_latency"`
	WriteBehindMs float64                   `json:"write_behind_ms"`
	WriteFailures int64                     `json:"write_failures"`
	Consumers     map[string]consumerSample `json:"consumers"`
	Workers       []workerSample            `json:"workers"`
	// ClientConns counts the open connections of the writer's pool and of
	// every worker process's (each Listener holds one more).
	ClientConns int            `json:"client_connections"`
	Server      *serverFigures `json:"server,omitempty"`
	Errors      []string       `json:"errors,omitempty"`
}

// consumerSample is one consumer's figures in a sample.
type consumerSample struct {
	// DeliveredPerS counts first deliveries in the interval, and
	// DeliveriesPerS every delivery, duplicates included.
	DeliveredPerS  float64    `json:"delivered_per_s"`
	DeliveriesPerS float64    `json:"deliveries_per_s"`
	Lag            lagFigures `json:"lag"`
	Duplicates     int64      `json:"duplicates"` // so far
	// The store's Stats: backlog.
	Pending        int     `json:"pending"`
	Leased         int     `json:"leased"`
	Dead           int     `json:"dead"`
	OldestPendingS float64 `json:"oldest_pending_s"`
}

// workerSample is a worker process's latest report.
type workerSample struct {
	workerStatus
	// AgeS is how old the report is: a process that stopped reporting
	// (killed, stuck) shows here.
	AgeS float64 `json:"age_s"`
}

// sampler takes a sample every interval, prints a line of it, and keeps
// them all.
type sampler struct {
	start   time.Time
	warmup  time.Duration
	writing atomic.Bool // false once the writers have stopped
	ledger  *ledger
	load    *load
	recv    *receiver
	writeDB *sql.DB
	// monitor is a small pool of its own for the figures, so that they
	// are read while the writers hold every connection of theirs.
	monitor  *sql.DB
	d        dialect
	database string
	table    string
	queues   map[string]backend.StatsReader
	names    []string
	progress io.Writer

	mu         sync.Mutex
	samples    []sample
	last       time.Time
	lastEvents int64

	cancel context.CancelFunc
	done   chan struct{}
}

// startRun starts sampling every interval, in the background.
func (s *sampler) startRun(every time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		s.run(ctx, every)
	}()
}

// stopRun takes a last sample and stops sampling.
func (s *sampler) stopRun() {
	s.cancel()
	<-s.done
}

// run takes a sample every interval until ctx ends, then a last one.
func (s *sampler) run(ctx context.Context, every time.Duration) {
	s.last = time.Now()
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			s.take(every)
			return
		case <-ticker.C:
			s.take(every)
		}
	}
}

// take measures now and keeps and prints the sample. Database reads are
// bounded by the interval (at least 2s), so a database that hangs delays
// sampling only that long.
func (s *sampler) take(every time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), max(every, 2*time.Second))
	defer cancel()
	now := time.Now()
	secs := now.Sub(s.last).Seconds()
	s.last = now
	events := s.load.events.Load()
	smp := sample{T: now.Sub(s.start).Seconds(), Phase: s.phase(now), EnqueuePerS: float64(events-s.lastEvents) / secs,
		WriteLatency: s.load.takeLatency(), WriteBehindMs: ms(s.load.takeBehind()), WriteFailures: s.load.failures.Load(), Consumers: map[string]consumerSample{}}
	s.lastEvents = events
	for name, iv := range s.ledger.takeInterval() {
		smp.Consumers[name] = consumerSample{DeliveredPerS: float64(iv.Unique) / secs, DeliveriesPerS: float64(iv.Deliveries) / secs,
			Lag: iv.Lag, Duplicates: iv.Duplicates, Pending: -1, Leased: -1, Dead: -1, OldestPendingS: -1}
	}
	s.backlog(ctx, &smp)
	s.workers(now, &smp)
	if f, err := s.d.figures(ctx, s.monitor, s.database, s.table); err != nil {
		smp.Errors = append(smp.Errors, "server figures: "+err.Error())
	} else {
		smp.Server = &f
	}
	s.mu.Lock()
	s.samples = append(s.samples, smp)
	s.mu.Unlock()
	fmt.Fprintln(s.progress, s.line(smp))
}

// phase names the part of the run now is in.
func (s *sampler) phase(now time.Time) string {
	switch {
	case !s.writing.Load():
		return "drain"
	case now.Sub(s.start) < s.warmup:
		return "warmup"
	}
	return "steady"
}

// backlog reads each consumer's Stats into smp.
func (s *sampler) backlog(ctx context.Context, smp *sample) {
	for _, name := range s.names {
		st, err := s.queues[name].Stats(ctx)
		if err != nil {
			smp.Errors = append(smp.Errors, name+" stats: "+s.d.redact(err).Error())
			continue
		}
		c := smp.Consumers[name]
		c.Pending, c.Leased, c.Dead, c.OldestPendingS = st.Pending, st.Leased, st.Dead, st.OldestPending.Seconds()
		smp.Consumers[name] = c
	}
}

// workers copies every worker process's latest report into smp.
func (s *sampler) workers(now time.Time, smp *sample) {
	smp.ClientConns = s.writeDB.Stats().OpenConnections
	statuses := s.recv.workerStatuses()
	for _, slot := range slices.Sorted(maps.Keys(statuses)) {
		st := statuses[slot]
		smp.Workers = append(smp.Workers, workerSample{workerStatus: st, AgeS: math.Round(now.Sub(st.At).Seconds()*10) / 10})
		smp.ClientConns += st.DBOpen
	}
}

// all returns the samples taken so far.
func (s *sampler) all() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

// line is a sample in one line of text, for the operator watching.
func (s *sampler) line(smp sample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%6.0fs %-6s enqueue %4.0f/s (Do %s)", smp.T, smp.Phase, smp.EnqueuePerS, lagText(smp.WriteLatency))
	for _, name := range s.names {
		c := smp.Consumers[name]
		fmt.Fprintf(&b, " | %s %4.0f/s lag %s pending %d", name, c.DeliveredPerS, lagText(c.Lag), c.Pending)
		if c.Duplicates > 0 {
			fmt.Fprintf(&b, " dup %d", c.Duplicates)
		}
	}
	var rss uint64
	for _, w := range smp.Workers {
		rss = max(rss, w.RSSBytes)
	}
	fmt.Fprintf(&b, " | rss ≤%dMiB conns %d", rss>>20, smp.ClientConns)
	if smp.Server != nil {
		fmt.Fprintf(&b, "/%d", smp.Server.Connections)
	}
	if len(smp.Errors) > 0 {
		fmt.Fprintf(&b, " | %d errors: %s", len(smp.Errors), smp.Errors[0])
	}
	return b.String()
}

// fmtMs formats milliseconds for a person: 4.2ms, 850ms, 10.1s.
func fmtMs(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.1fs", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.0fms", v)
	}
	return fmt.Sprintf("%.1fms", v)
}
