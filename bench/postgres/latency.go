package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/outboxrelay/outboxrelay/bench/internal/benchkit"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// The latency scenario: 8 writers commit events at latencyRate in all
// (all eight at the same instants, the harder case, each keeping a
// schedule and catching up after a slow commit, as the MySQL bench's
// writers do), each event enqueued in the writer's own transaction, and
// the time from each commit's return to the sink's receipt is measured,
// with LISTEN/NOTIFY waking the worker and with polling only.

// latencyArm is one consumer of the latency scenario: start starts it,
// woken by LISTEN/NOTIFY or not, polling every poll, calling receipt for
// each event it delivers, and returns how a writer enqueues event id in
// its transaction, and how to stop the consumer.
type latencyArm struct {
	name   string
	notify bool
	poll   time.Duration
	start  func(ctx context.Context, b *bench, notify bool, poll time.Duration, receipt func(id string)) (enqueue func(ctx context.Context, tx pgx.Tx, id string) error, stop func(), err error)
}

// latencyArms: the relay and River with LISTEN/NOTIFY and their default
// poll (1 s) as the fallback, then polling only at that poll, and the
// relay polling only every 10 ms (the compare scenario's poll), what
// polling alone needs to come near.
func latencyArms() []latencyArm {
	return []latencyArm{
		{"relay", true, outbox.DefaultPollInterval, relayLatency},
		{"relay", false, outbox.DefaultPollInterval, relayLatency},
		{"relay", false, 10 * time.Millisecond, relayLatency},
		{"River", true, river.FetchPollIntervalDefault, riverLatency},
		{"River", false, river.FetchPollIntervalDefault, riverLatency},
	}
}

// timings are the commit and receipt instants of each event.
type timings struct {
	mu                  sync.Mutex
	committed, received map[string]time.Time
}

func (t *timings) note(m map[string]time.Time, id string) {
	at := time.Now()
	t.mu.Lock()
	if _, dup := m[id]; !dup {
		m[id] = at
	}
	t.mu.Unlock()
}

func (t *timings) counts() (committed, received int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.committed), len(t.received)
}

// latencies are receipt minus commit for every event both saw; a receipt
// before the writer's commit returned counts as zero.
func (t *timings) latencies() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []time.Duration
	for id, c := range t.committed {
		if r, ok := t.received[id]; ok {
			out = append(out, max(0, r.Sub(c)))
		}
	}
	slices.Sort(out)
	return out
}

func (b *bench) latency(ctx context.Context, sz sizes) ([]row, error) {
	var rows []row
	for _, a := range b.latencyArms() {
		r, err := b.latencyOne(ctx, sz, a)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.name, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func (b *bench) latencyArms() []latencyArm {
	var out []latencyArm
	for _, la := range latencyArms() {
		for _, a := range b.arms {
			if a.name == la.name {
				out = append(out, la)
			}
		}
	}
	return out
}

func (b *bench) latencyOne(ctx context.Context, sz sizes, a latencyArm) (row, error) {
	notify := a.notify
	t := &timings{committed: map[string]time.Time{}, received: map[string]time.Time{}}
	enqueue, stop, err := a.start(ctx, b, notify, a.poll, func(id string) { t.note(t.received, id) })
	if err != nil {
		return row{}, err
	}
	writers, err := b.pool(ctx, benchkit.Writers)
	if err != nil {
		stop()
		return row{}, err
	}
	sent, elapsed, err := produce(ctx, writers, sz, enqueue, func(id string) { t.note(t.committed, id) })
	if err == nil {
		err = waitDone(ctx, "latency", time.Minute, func() (bool, error) {
			_, r := t.counts()
			return r >= sent, nil
		})
	}
	stop()
	writers.Close()
	if err != nil {
		return row{}, err
	}
	if err := b.quiesce(ctx); err != nil {
		return row{}, err
	}
	lat := t.latencies()
	got := benchkit.PerSec(sent, elapsed)
	kept := benchkit.KeptRate(got, sz.latencyRate)
	how := "LISTEN/NOTIFY wakes the worker"
	if !notify {
		how = "polling only"
	}
	r := row{
		Scenario: fmt.Sprintf("latency commit → sink, %s, %s (poll %v), %d events at %.0f/s, 8 writers", a.name, how, a.poll, sent, got),
		Figure:   fmt.Sprintf("p50 %.2fms, p99 %.2fms", benchkit.Ms(benchkit.Quantile(lat, 0.50)), benchkit.Ms(benchkit.Quantile(lat, 0.99))),
		Target:   kept,
	}
	if a.name == "relay" && notify && a.poll >= time.Second {
		r.Reference, r.Ratio = "target 5ms", fmt.Sprintf("p99/target %.2f", benchkit.Ms(benchkit.Quantile(lat, 0.99))/5)
		r.Target = "p99 ≤ 5ms; " + kept
	}
	return r, nil
}

// produce commits events from benchkit.Writers writers at
// sz.latencyRate in all, for sz.latencyFor, each event in a transaction
// of its own, and calls committed with each event's ID once its commit
// has returned.
func produce(ctx context.Context, pool *pgxpool.Pool, sz sizes, enqueue func(context.Context, pgx.Tx, string) error, committed func(string)) (int, time.Duration, error) {
	return benchkit.Pace(sz.latencyRate, sz.latencyFor, func(id string, _ int) error {
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return enqueue(ctx, tx, id) }); err != nil {
			return err
		}
		committed(id)
		return nil
	})
}

// riverLatency runs one River client (MaxWorkers 100) with its
// LISTEN/NOTIFY, or poll-only.
func riverLatency(ctx context.Context, b *bench, notify bool, poll time.Duration, receipt func(string)) (func(context.Context, pgx.Tx, string) error, func(), error) {
	if err := riverPrepare(ctx, b, 0, compareConfig{Payload: 256}); err != nil {
		return nil, nil, err
	}
	pool, err := b.pool(ctx, 4)
	if err != nil {
		return nil, nil, err
	}
	cl, err := riverClient(pool, 100, riverTuned(poll), !notify, func(j *river.Job[benchArgs]) { receipt(j.Args.Payload) })
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	if err := cl.Start(ctx); err != nil {
		pool.Close()
		return nil, nil, err
	}
	stop := func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = cl.Stop(stopCtx)
		pool.Close()
	}
	enqueue := func(ctx context.Context, tx pgx.Tx, id string) error {
		_, err := cl.InsertTx(ctx, tx, benchArgs{Payload: id}, nil)
		return err
	}
	return enqueue, stop, nil
}
