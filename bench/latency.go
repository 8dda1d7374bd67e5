package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// latencySink notes how long after its commit each event arrived.
type latencySink struct {
	committed sync.Map // event ID → time.Time of the commit
	mu        sync.Mutex
	latencies []time.Duration
}

func (s *latencySink) Publish(_ context.Context, m outbox.Message) error {
	at := time.Now()
	if c, ok := s.committed.Load(m.ID); ok {
		s.mu.Lock()
		s.latencies = append(s.latencies, at.Sub(c.(time.Time)))
		s.mu.Unlock()
	}
	return nil
}

func (s *latencySink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.latencies)
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// latency measures commit → sink at a steady rate, once through the
// after-commit path (PublishNow) and once through the worker woken by
// Notify (its poll interval is a second, so it is the wake-up that counts).
func (b *bench) latency(ctx context.Context, sz sizes) ([]row, error) {
	var rows []row
	for _, afterCommit := range []bool{true, false} {
		store, err := b.freshStore(ctx, b.db)
		if err != nil {
			return nil, err
		}
		workerPool, err := b.pool()
		if err != nil {
			return nil, err
		}
		workerStore, err := mysql.New(workerPool, mysql.Options{Table: table})
		if err != nil {
			return nil, err
		}
		sink := &latencySink{}
		w, err := outbox.NewWorker(workerStore, sink, outbox.WorkerOptions{PollInterval: time.Second, Logger: quiet})
		if err != nil {
			return nil, err
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = w.Run(runCtx)
		}()
		sent, elapsed, err := b.produce(ctx, store, w, sink, sz, afterCommit)
		if err == nil {
			deadline := time.Now().Add(time.Minute)
			for sink.count() < sent && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond) // polling for the last arrivals
			}
		}
		stop()
		<-done
		workerPool.Close()
		if err != nil {
			return nil, err
		}
		path, target := "worker woken by Notify", "p99 ≤ 20ms"
		if afterCommit {
			path, target = "after-commit PublishNow", "p99 ≤ 5ms"
		}
		sink.mu.Lock()
		p50, p99 := quantile(sink.latencies, 0.50), quantile(sink.latencies, 0.99)
		sink.mu.Unlock()
		rows = append(rows, row{
			scenario:  fmt.Sprintf("latency commit → sink, %s, %d events at %.0f/s", path, sent, perSec(sent, elapsed)),
			figure:    fmt.Sprintf("p50 %.2fms, p99 %.2fms", ms(p50), ms(p99)),
			reference: "target", ratio: fmt.Sprintf("p99/target %.2f", ms(p99)/map[bool]float64{true: 5, false: 20}[afterCommit]),
			target: target,
		})
	}
	return rows, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// produce commits events at a steady rate from several writers, each in
// its own transaction, and hands each to the fast path or wakes the worker.
func (b *bench) produce(ctx context.Context, store *mysql.Store, w *outbox.Worker, sink *latencySink, sz sizes, afterCommit bool) (int, time.Duration, error) {
	const writers = 8
	total := int(float64(sz.latencyRate) * sz.latencyFor.Seconds())
	interval := time.Duration(float64(time.Second) * writers / float64(sz.latencyRate))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		sent  int
		first error
	)
	start := time.Now()
	for wr := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for i := 0; i < total/writers; i++ {
				<-tick.C
				m := outbox.Message{ID: fmt.Sprintf("lat-%d-%d", wr, i), Key: fmt.Sprintf("room-%d", i%50), Type: "RoomGiftSent", Payload: []byte(`{"gift":"rose"}`)}
				opts := outbox.EnqueueOptions{}
				if afterCommit {
					opts.HeadStart = outbox.DefaultHeadStart
				}
				err := func() error {
					tx, err := b.db.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					if err := store.EnqueueWithOptions(ctx, tx, opts, m); err != nil {
						tx.Rollback()
						return err
					}
					return tx.Commit()
				}()
				if err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
				sink.committed.Store(m.ID, time.Now())
				if afterCommit {
					_ = w.PublishNow(ctx, m)
				} else {
					w.Notify()
				}
				mu.Lock()
				sent++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return sent, time.Since(start), first
}

// enqueueOverhead times a one-row business transaction with and without
// the outbox insert, alternating rounds to spread the noise.
func (b *bench) enqueueOverhead(ctx context.Context, sz sizes) ([]row, error) {
	store, err := b.freshStore(ctx, b.db)
	if err != nil {
		return nil, err
	}
	if _, err := b.db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS biz (id BIGINT AUTO_INCREMENT PRIMARY KEY, room VARCHAR(64) NOT NULL, v VARCHAR(255) NOT NULL) ENGINE=InnoDB"); err != nil {
		return nil, err
	}
	// extra is what the transaction does besides its business row: nothing,
	// an empty statement (the floor: one more round trip), or the outbox.
	const (
		nothing = iota
		emptyStatement
		outboxInsert
	)
	run := func(extra, round, n int) (time.Duration, error) {
		start := time.Now()
		for i := range n {
			tx, err := b.db.BeginTx(ctx, nil)
			if err != nil {
				return 0, err
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO biz (room, v) VALUES (?, ?)", "room-1", "bob joined"); err != nil {
				tx.Rollback()
				return 0, err
			}
			if extra == emptyStatement {
				if _, err := tx.ExecContext(ctx, "SELECT 1"); err != nil {
					tx.Rollback()
					return 0, err
				}
			}
			if extra == outboxInsert {
				m := outbox.Message{ID: fmt.Sprintf("enq-%d-%d", round, i), Key: "room-1", Type: "RoomUserJoined", Payload: []byte(`{"user":"bob"}`)}
				if err := store.Enqueue(ctx, tx, m); err != nil {
					tx.Rollback()
					return 0, err
				}
			}
			if err := tx.Commit(); err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}
	var took [3]time.Duration
	const rounds = 4
	for r := range rounds {
		for extra := range took {
			d, err := run(extra, r, sz.enqueueTxs/rounds)
			if err != nil {
				return nil, err
			}
			took[extra] += d
		}
	}
	n := sz.enqueueTxs
	over := func(extra int) string {
		return fmt.Sprintf("%+.1f%% time per transaction", 100*(took[extra].Seconds()/took[nothing].Seconds()-1))
	}
	return []row{{
		scenario:  fmt.Sprintf("enqueue overhead: one-row business transaction, %d commits each way", n),
		figure:    fmt.Sprintf("%.0f tx/s with the outbox insert", perSec(n, took[outboxInsert])),
		reference: fmt.Sprintf("%.0f tx/s without", perSec(n, took[nothing])),
		ratio:     over(outboxInsert), target: "≤ +15%",
	}, {
		scenario:  "floor: the same transaction with an empty statement (SELECT 1) instead",
		figure:    fmt.Sprintf("%.0f tx/s", perSec(n, took[emptyStatement])),
		reference: fmt.Sprintf("%.0f tx/s without", perSec(n, took[nothing])),
		ratio:     over(emptyStatement), target: "(what one more round trip costs here)",
	}}, nil
}
