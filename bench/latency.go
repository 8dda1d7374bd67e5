package main

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/outboxrelay/outboxrelay/bench/internal/benchkit"
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

// sorted is a sorted copy of the latencies so far.
func (s *latencySink) sorted() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.latencies)
	slices.Sort(out)
	return out
}

// latency measures commit → sink at a steady rate: through the
// after-commit path (PublishNow) with the default head start, under which
// PublishNow publishes without a claim; through it with a short head
// start, under which it claims first; and through the worker woken by
// Notify (its poll interval is a second, so it is the wake-up that counts).
func (b *bench) latency(ctx context.Context, sz sizes) ([]row, error) {
	var rows []row
	for _, v := range []struct {
		afterCommit bool
		headStart   time.Duration
	}{{true, outbox.DefaultHeadStart}, {true, shortHeadStart}, {false, 0}} {
		afterCommit := v.afterCommit
		store, err := b.freshStore(ctx, b.db)
		if err != nil {
			return nil, err
		}
		sink := &latencySink{}
		workers, err := benchkit.StartLanes(ctx, latencyWorkers, b.pool, func(i int, pool *sql.DB) (*outbox.Worker, error) {
			workerStore, err := mysql.New(pool, mysql.Options{Table: table})
			if err != nil {
				return nil, err
			}
			return outbox.NewWorker(workerStore, sink, outbox.WorkerOptions{PollInterval: time.Second, Logger: quiet, NodeID: fmt.Sprintf("latency-%d", i)})
		})
		if err != nil {
			return nil, err
		}
		// The writers are one instance: its worker publishes after commit
		// and is the one Notify wakes; the other instances' workers poll.
		sent, elapsed, err := b.produce(ctx, store, workers.Workers[0], sink, sz, afterCommit, v.headStart)
		if err == nil {
			deadline := time.Now().Add(time.Minute)
			for sink.count() < sent && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond) // polling for the last arrivals
			}
		}
		workers.Stop()
		if err != nil {
			return nil, err
		}
		path, target := "worker woken by Notify", "p99 ≤ 20ms"
		if afterCommit {
			path, target = fmt.Sprintf("after-commit PublishNow, HeadStart %v", v.headStart), "p99 ≤ 5ms"
			if v.headStart == outbox.DefaultHeadStart {
				path += ", the default,"
			}
			if v.headStart >= outbox.DefaultPublishTimeout+outbox.DefaultStoreTimeout {
				path += " (PublishNow publishes under the writer's lease: no claim)"
			} else {
				path += " (shorter than PublishTimeout + StoreTimeout: PublishNow claims first)"
			}
		}
		lat := sink.sorted()
		p50, p99 := benchkit.Quantile(lat, 0.50), benchkit.Quantile(lat, 0.99)
		got := benchkit.PerSec(sent, elapsed)
		target += "; " + benchkit.KeptRate(got, sz.latencyRate)
		rows = append(rows, row{
			Scenario:  fmt.Sprintf("latency commit → sink, %s, %d events at %.0f/s, 8 writers, %d workers", path, sent, got, latencyWorkers),
			Figure:    fmt.Sprintf("p50 %.2fms, p99 %.2fms", benchkit.Ms(p50), benchkit.Ms(p99)),
			Reference: "target", Ratio: fmt.Sprintf("p99/target %.2f", benchkit.Ms(p99)/map[bool]float64{true: 5, false: 20}[afterCommit]),
			Target: target,
		})
	}
	return rows, nil
}

// latencyWorkers is how many workers run during the latency scenario,
// each on a pool of its own as instances would be (issue 30: 8 writers
// and 8 workers).
const latencyWorkers = 8

// shortHeadStart is a head start shorter than PublishTimeout plus
// StoreTimeout at their defaults (DefaultHeadStart covers them), so that
// PublishNow claims the message before it publishes: the after-commit
// path as it is for a writer that picks a short head start.
const shortHeadStart = 2 * time.Second

// produce commits events at sz.latencyRate from benchkit.Writers
// writers, each in its own transaction, and hands each to the fast path
// or wakes the worker.
func (b *bench) produce(ctx context.Context, store *mysql.Store, w *outbox.Worker, sink *latencySink, sz sizes, afterCommit bool, headStart time.Duration) (int, time.Duration, error) {
	return benchkit.Pace(sz.latencyRate, sz.latencyFor, func(id string, i int) error {
		m := outbox.Message{ID: id, Key: fmt.Sprintf("room-%d", i%50), Type: "RoomGiftSent", Payload: []byte(`{"gift":"rose"}`)}
		opts := outbox.EnqueueOptions{HeadStart: headStart}
		tx, err := b.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := store.Enqueue(ctx, tx, &opts, m); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		sink.committed.Store(m.ID, time.Now())
		if afterCommit {
			_ = w.PublishNow(ctx, m)
		} else {
			w.Notify()
		}
		return nil
	})
}

// enqueuePayload is the enqueue scenario's payload: 512 bytes, as in the
// comparison with the peers.
var enqueuePayload = []byte(`{"user":"bob","pad":"` + strings.Repeat("x", 512-len(`{"user":"bob","pad":""}`)) + `"}`)

// enqueueOverhead times a one-row business transaction with and without
// the outbox insert, and with an empty statement or the smallest insert
// instead. The four alternate transaction by transaction (in a rotating order), so that
// the drift of the machine's commit speed, which moves a lone figure by
// tens of percent within seconds, falls on all four alike. Message IDs
// are UUIDv7, time-ordered as the example service makes them.
func (b *bench) enqueueOverhead(ctx context.Context, sz sizes) ([]row, error) {
	store, err := b.freshStore(ctx, b.db)
	if err != nil {
		return nil, err
	}
	for _, ddl := range []string{
		"CREATE TABLE IF NOT EXISTS biz (id BIGINT AUTO_INCREMENT PRIMARY KEY, room VARCHAR(64) NOT NULL, v VARCHAR(255) NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE IF NOT EXISTS bare (id BIGINT AUTO_INCREMENT PRIMARY KEY, event_id VARCHAR(64) NOT NULL) ENGINE=InnoDB",
	} {
		if _, err := b.db.ExecContext(ctx, ddl); err != nil {
			return nil, err
		}
	}
	// extra is what the transaction does besides its business row:
	// nothing; an empty statement (one more round trip); the smallest
	// insert (one more round trip and a row to write); or the outbox's.
	const (
		nothing = iota
		emptyStatement
		bareInsert
		outboxInsert
		variants
	)
	one := func(extra int) (time.Duration, error) {
		start := time.Now()
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
		if extra == bareInsert {
			if _, err := tx.ExecContext(ctx, "INSERT INTO bare (event_id) VALUES (?)", uuid.Must(uuid.NewV7()).String()); err != nil {
				tx.Rollback()
				return 0, err
			}
		}
		if extra == outboxInsert {
			m := outbox.Message{ID: uuid.Must(uuid.NewV7()).String(), Key: "room-1", Type: "RoomUserJoined", Payload: enqueuePayload}
			if err := store.Enqueue(ctx, tx, nil, m); err != nil {
				tx.Rollback()
				return 0, err
			}
		}
		if err := tx.Commit(); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	}
	n := sz.enqueueTxs
	runs, err := benchkit.Alternate(n, variants, nil, one)
	if err != nil {
		return nil, err
	}
	var took [variants]time.Duration
	for extra, ds := range runs {
		for _, d := range ds {
			took[extra] += d
		}
	}
	// What each variant writes: redo per transaction, from the server's
	// counter over a run of each variant alone (the counter is
	// server-wide, so the timed run above, interleaved, cannot split it).
	var redo [variants]float64
	m := min(n, 500)
	for extra := range variants {
		before, err := b.readCounters(ctx)
		if err != nil {
			return nil, err
		}
		for range m {
			if _, err := one(extra); err != nil {
				return nil, err
			}
		}
		after, err := b.readCounters(ctx)
		if err != nil {
			return nil, err
		}
		redo[extra] = after.minus(before).redo / float64(m)
	}
	points := func(a, b int) string {
		return fmt.Sprintf("%+.1f points", 100*(took[a].Seconds()-took[b].Seconds())/took[nothing].Seconds())
	}
	over := func(extra int) string {
		return fmt.Sprintf("%+.1f%% time per transaction", 100*(took[extra].Seconds()/took[nothing].Seconds()-1))
	}
	return []row{{
		Scenario:  fmt.Sprintf("enqueue overhead: one-row business transaction, %d B payload, %d commits each way, interleaved", len(enqueuePayload), n),
		Figure:    fmt.Sprintf("%.0f tx/s with the outbox insert", benchkit.PerSec(n, took[outboxInsert])),
		Reference: fmt.Sprintf("%.0f tx/s without", benchkit.PerSec(n, took[nothing])),
		Ratio:     over(outboxInsert),
		// Issue 30: the outbox insert's extra cost within 1.5× the
		// smallest insert's (the old "≤ +15%" and "within 5 points" are
		// retired: below what any 512-byte row costs on this machine).
		Target: fmt.Sprintf("extra cost ≤ 1.5× the smallest insert's: %s, %s the SELECT 1 floor", benchkit.Ratio(took[outboxInsert].Seconds()-took[nothing].Seconds(), took[bareInsert].Seconds()-took[nothing].Seconds()), points(outboxInsert, emptyStatement)),
	}, {
		Scenario:  "floor: the same transaction with an empty statement (SELECT 1) instead",
		Figure:    fmt.Sprintf("%.0f tx/s", benchkit.PerSec(n, took[emptyStatement])),
		Reference: fmt.Sprintf("%.0f tx/s without", benchkit.PerSec(n, took[nothing])),
		Ratio:     over(emptyStatement), Target: "(what one more round trip costs here)",
	}, {
		Scenario:  "floor: the same transaction with the smallest insert instead (a two-column table, no secondary index)",
		Figure:    fmt.Sprintf("%.0f tx/s", benchkit.PerSec(n, took[bareInsert])),
		Reference: fmt.Sprintf("%.0f tx/s without", benchkit.PerSec(n, took[nothing])),
		Ratio:     over(bareInsert), Target: "(what any insert costs here)",
	}, {
		Scenario:  fmt.Sprintf("enqueue redo per transaction (server-wide), %d transactions of each variant in a row", m),
		Figure:    fmt.Sprintf("with the outbox insert %.0f B", redo[outboxInsert]),
		Reference: fmt.Sprintf("without %.0f B, SELECT 1 %.0f B, smallest insert %.0f B", redo[nothing], redo[emptyStatement], redo[bareInsert]),
		Ratio:     fmt.Sprintf("outbox insert %.0f B, smallest insert %.0f B over the transaction", redo[outboxInsert]-redo[nothing], redo[bareInsert]-redo[nothing]),
		Target:    "(what the insert writes)",
	}}, nil
}
