package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/outboxrelay/outboxrelay/bench/internal/benchkit"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// countingSink accepts everything, as fast as it can.
type countingSink struct{ n atomic.Int64 }

func (s *countingSink) Publish(context.Context, outbox.Message) error {
	s.n.Add(1)
	return nil
}

func (s *countingSink) count() int64 { return s.n.Load() }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// drain runs workers (each on a pool of its own, as instances would be)
// until the sink has taken n records and none is pending, and returns how
// long that took.
func (b *bench) drain(ctx context.Context, n, workers int, sink countedSink, opts outbox.WorkerOptions) (time.Duration, error) {
	lanes := make([]lane, workers)
	for i := range lanes {
		lanes[i] = lane{sink: sink, opts: opts}
	}
	return b.drainLanes(ctx, n, lanes, b.pendingOf(""))
}

// countedSink is a sink that counts what it took.
type countedSink interface {
	outbox.Sink
	count() int64
}

// lane is one worker of a drain: the consumer it delivers for ("" for
// the table's own status columns), its sink and its options.
type lane struct {
	consumer string
	sink     countedSink
	opts     outbox.WorkerOptions
}

// drainLanes runs one worker per lane, each on a pool of its own, until
// the lanes' sinks have taken n records in all and remaining counts
// nothing left (their outcomes are committed), and returns how
// long that took. Until the sinks are done it watches their counters, not
// the database: counting a large backlog every few milliseconds would load
// the server it measures.
func (b *bench) drainLanes(ctx context.Context, n int, lanes []lane, remaining func(context.Context) (int, error)) (time.Duration, error) {
	start := time.Now()
	workers, err := benchkit.StartLanes(ctx, len(lanes), b.pool, func(i int, pool *sql.DB) (*outbox.Worker, error) {
		l := lanes[i]
		store, err := mysql.New(pool, mysql.Options{Table: table})
		if err != nil {
			return nil, err
		}
		var s backend.Store = store
		if l.consumer != "" {
			if s, err = store.Consumer(l.consumer); err != nil {
				return nil, err
			}
		}
		o := l.opts
		o.NodeID, o.Logger = fmt.Sprintf("bench-%d", i), quiet
		return outbox.NewWorker(s, l.sink, o)
	})
	if err != nil {
		return 0, err
	}
	defer workers.Stop()
	sinks := map[countedSink]bool{}
	for _, l := range lanes {
		sinks[l.sink] = true
	}
	// Polling the counters, then the last outcomes being committed, with
	// a 1ms granularity, 10 minutes in all.
	deadline := time.Now().Add(10 * time.Minute)
	var taken int64
	err = benchkit.WaitDone(ctx, "drain: the sinks", 10*time.Minute, time.Millisecond, func() (bool, error) {
		taken = 0
		for s := range sinks {
			taken += s.count()
		}
		return taken >= int64(n), nil
	})
	if err != nil {
		return 0, fmt.Errorf("%w (took %d of %d records)", err, taken, n)
	}
	var left int
	err = benchkit.WaitDone(ctx, "drain: the outcomes", time.Until(deadline), time.Millisecond, func() (bool, error) {
		var err error
		left, err = remaining(ctx)
		return left == 0, err
	})
	if err != nil {
		return 0, fmt.Errorf("%w (%d records still pending)", err, left)
	}
	return time.Since(start), nil
}

// relayRate measures events/s from pending to published.
func (b *bench) relayRate(ctx context.Context, n, batch, workers int) (float64, error) {
	if _, err := b.freshStore(ctx, b.db); err != nil {
		return 0, err
	}
	if err := b.fill(ctx, 0, n, "pending"); err != nil {
		return 0, err
	}
	if _, err := b.db.ExecContext(ctx, "ANALYZE TABLE "+table); err != nil {
		return 0, err
	}
	d, err := b.drain(ctx, n, workers, &countingSink{}, outbox.WorkerOptions{BatchSize: batch, PollInterval: 10 * time.Millisecond})
	return benchkit.PerSec(n, d), err
}

// ceilingRate is the raw loop every relay needs at least: claim a batch of
// due rows with FOR UPDATE SKIP LOCKED, read them, and mark them
// published, in one transaction (claimMinimal), on one connection at a
// time.
func (b *bench) ceilingRate(ctx context.Context, n, batch int) (float64, error) {
	if err := b.prepareMinimal(ctx, n, `'{"gift":"rose","count":1}'`); err != nil {
		return 0, err
	}
	start := time.Now()
	for {
		switch got, err := claimMinimal(ctx, b.db, batch); {
		case err != nil:
			return 0, err
		case got == 0:
			return benchkit.PerSec(n, time.Since(start)), nil
		}
	}
}

// relayRounds is how many times each relay and ceiling figure is taken,
// alternating, so that a slow spell of the machine falls on both sides of
// a ratio; the median is reported.
const relayRounds = 3

func (b *bench) relayAndCeiling(ctx context.Context, sz sizes) ([]row, error) {
	var rows []row
	for _, batch := range []int{1, 10, 100, 500} {
		n := sz.relayEvents(batch)
		var ceiling []float64
		relays := map[int][]float64{} // by workers
		for range relayRounds {
			c, err := b.ceilingRate(ctx, n, batch)
			if err != nil {
				return nil, err
			}
			ceiling = append(ceiling, c)
			for _, workers := range []int{1, 3} {
				r, err := b.relayRate(ctx, n, batch, workers)
				if err != nil {
					return nil, err
				}
				relays[workers] = append(relays[workers], r)
			}
		}
		for _, workers := range []int{1, 3} {
			relay, target := median(relays[workers]), ""
			if batch == 100 && workers == 1 {
				target = "≥ 0.75 of the ceiling"
				b.relay100 = relay
			}
			rows = append(rows, row{
				Scenario: fmt.Sprintf("relay, batch %d, %d worker(s), no-op sink, %d events, median of %d", batch, workers, n, relayRounds),
				Figure:   benchkit.EvRate(relay), Reference: "ceiling " + benchkit.EvRate(median(ceiling)), Ratio: benchkit.Ratio(relay, median(ceiling)), Target: target,
			})
		}
	}
	return rows, nil
}

func median(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[len(xs)/2]
}

func (b *bench) backlogScaling(ctx context.Context, sz sizes) ([]row, error) {
	drainBacklog := func(history int) (float64, error) {
		if _, err := b.freshStore(ctx, b.db); err != nil {
			return 0, err
		}
		if history > 0 {
			if err := b.fill(ctx, 0, history, "published"); err != nil {
				return 0, err
			}
		}
		if err := b.fill(ctx, history, sz.backlog, "pending"); err != nil {
			return 0, err
		}
		if _, err := b.db.ExecContext(ctx, "ANALYZE TABLE "+table); err != nil {
			return 0, err
		}
		d, err := b.drain(ctx, sz.backlog, 1, &countingSink{}, outbox.WorkerOptions{BatchSize: 100, PollInterval: 10 * time.Millisecond})
		return benchkit.PerSec(sz.backlog, d), err
	}
	fresh, err := drainBacklog(0)
	if err != nil {
		return nil, err
	}
	big, err := drainBacklog(sz.published)
	if err != nil {
		return nil, err
	}
	return []row{{
		Scenario: fmt.Sprintf("backlog scaling: drain %d pending next to %d published rows", sz.backlog, sz.published),
		Figure:   benchkit.EvRate(big), Reference: "same backlog, fresh table " + benchkit.EvRate(fresh), Ratio: benchkit.Ratio(big, fresh), Target: "within 20% (≥ 0.80)",
	}}, nil
}

// slowSink answers after 20ms, and at most 200 calls/s (Tencent IM's
// round trip and rate limit), as the real one would.
type slowSink struct {
	lim *rate.Limiter
	n   atomic.Int64
}

func (s *slowSink) Publish(ctx context.Context, _ outbox.Message) error {
	if err := s.lim.Wait(ctx); err != nil {
		return err
	}
	time.Sleep(20 * time.Millisecond) // the remote call
	s.n.Add(1)
	return nil
}

func (s *slowSink) count() int64 { return s.n.Load() }

func (b *bench) slowSink(ctx context.Context, sz sizes) ([]row, error) {
	if _, err := b.freshStore(ctx, b.db); err != nil {
		return nil, err
	}
	if err := b.fill(ctx, 0, sz.slowEvents, "pending"); err != nil {
		return nil, err
	}
	const limit = 200
	sink := &slowSink{lim: rate.NewLimiter(limit, 1)}
	d, err := b.drain(ctx, sz.slowEvents, 1, sink, outbox.WorkerOptions{BatchSize: 100, Concurrency: 8, PollInterval: 10 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	got := benchkit.PerSec(sz.slowEvents, d)
	return []row{{
		Scenario: "slow sink: 20ms per call, 200 calls/s limit, 1 worker, Concurrency 8",
		Figure:   fmt.Sprintf("%.0f calls/s", got), Reference: "the limit, 200 calls/s", Ratio: benchkit.Ratio(got, limit), Target: "≥ 0.90",
	}}, nil
}
