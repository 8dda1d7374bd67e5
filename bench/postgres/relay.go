package main

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of database/sql, which the store requires

	"github.com/outboxrelay/outboxrelay/bench/internal/benchkit"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// The relay: outbox.Worker.Run on store/postgres's table, a sink that
// does nothing, one worker per pool (database/sql on pgx's stdlib
// driver, as the store requires), WorkerOptions{BatchSize: the batch,
// PollInterval: 10 ms}. The backlog has 200 keys, as the MySQL bench's;
// the worker does not order by them.

const relayTable = "bench_outbox"

// relayDB opens a database/sql pool on the bench database.
func (b *bench) relayDB() (*sql.DB, error) {
	return benchkit.OpenDB("pgx", b.dsn, 4)
}

// relayFresh recreates the outbox table empty, through the store's
// Migrate.
func relayFresh(ctx context.Context, b *bench, opts postgres.Options) error {
	if err := b.exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS %[1]s, %[1]s_consumers, %[1]s_consumption, %[1]s_state, %[1]s_ranges", relayTable)); err != nil {
		return err
	}
	db, err := b.relayDB()
	if err != nil {
		return err
	}
	defer db.Close()
	opts.Table = relayTable
	s, err := postgres.New(db, opts)
	if err != nil {
		return err
	}
	return s.Migrate(ctx)
}

// Experiments on the store's table, for an A/B of a schema change
// (-relay-fillfactor, -relay-toast); off by default.
var (
	// relayFillfactor, when positive, sets the outbox table's fillfactor
	// before the backlog is written, so that an update can put the new
	// row version on the page of the old one, and PostgreSQL then logs
	// only the bytes that changed.
	relayFillfactor int
	// relayToast moves payloads out of line (toast_tuple_target 128,
	// STORAGE EXTERNAL), so that an update of the status columns
	// rewrites a row without its payload.
	relayToast bool
)

// relayAlters are the statements of the experiments in effect.
func relayAlters() []string {
	var out []string
	if relayFillfactor > 0 {
		out = append(out, fmt.Sprintf("ALTER TABLE %s SET (fillfactor = %d)", relayTable, relayFillfactor))
	}
	if relayToast {
		out = append(out, "ALTER TABLE "+relayTable+" SET (toast_tuple_target = 128)", "ALTER TABLE "+relayTable+" ALTER payload SET STORAGE EXTERNAL")
	}
	return out
}

func relayPrepare(ctx context.Context, b *bench, n int, c compareConfig) error {
	if err := relayFresh(ctx, b, postgres.Options{}); err != nil {
		return err
	}
	if err := b.exec(ctx, relayAlters()...); err != nil {
		return err
	}
	return relayFill(ctx, b, n, c)
}

// relayFill writes a backlog of n pending events of c.Payload bytes, on
// 200 keys, into the relay's table, and analyses it.
func relayFill(ctx context.Context, b *bench, n int, c compareConfig) error {
	return b.exec(ctx,
		fmt.Sprintf("INSERT INTO %s (event_id, event_key, event_type, payload, created_at)"+
			" SELECT 'e-' || n, convert_to('room-' || (n %% 200), 'UTF8'), convert_to('RoomGiftSent', 'UTF8'), %s,"+
			" statement_timestamp() - interval '1 second'"+
			" FROM generate_series(0, %d) n", relayTable, fillPayload(c.Payload), n-1),
		"VACUUM ANALYZE "+relayTable)
}

func relayLeft(ctx context.Context, b *bench) (int, error) {
	// What the default consumer has not settled: past its walk, in its
	// live ranges (counted as one each: only zero matters), pending state.
	return b.count(ctx, fmt.Sprintf(`SELECT (SELECT count(*) FROM %[1]s o, %[1]s_consumers c
	WHERE c.id = 0 AND (o.xid, o.seq) > (c.walked_xid, c.walked_seq))
	+ (SELECT count(*) FROM %[1]s_ranges WHERE consumer_id = 0)
	+ (SELECT count(*) FROM %[1]s_state WHERE consumer_id = 0 AND status = 'pending')`, relayTable))
}

// countingSink accepts everything, as fast as it can.
type countingSink struct{ n atomic.Int64 }

func (s *countingSink) Publish(context.Context, outbox.Message) error {
	s.n.Add(1)
	return nil
}

// settleCounter is a consumer's store (the default consumer's or a named
// one's) with a count of the outcomes it wrote: the drain ends when every
// delivery's outcome is committed.
type settleCounter struct {
	backend.Store
	applied *atomic.Int64
}

func (s settleCounter) Settle(ctx context.Context, token string, outcomes []backend.Outcome) (backend.SettleResult, error) {
	res, err := s.Store.Settle(ctx, token, outcomes)
	s.applied.Add(int64(res.Applied))
	return res, err
}

func (s settleCounter) SettleAndClaim(ctx context.Context, st backend.Settlement, p backend.ClaimParams) (backend.SettleResult, backend.Batch, error) {
	res, batch, err := s.Store.Capabilities().SettleAndClaim.SettleAndClaim(ctx, st, p)
	s.applied.Add(int64(res.Applied))
	return res, batch, err
}

// relayDrain runs c.Workers workers for the default consumer, into one
// sink, until their store has written the outcome of every event.
func relayDrain(ctx context.Context, b *bench, n int, c compareConfig) (time.Duration, int, error) {
	var (
		sink    countingSink
		applied atomic.Int64
	)
	lanes := make([]lane, c.Workers)
	for i := range lanes {
		lanes[i] = lane{sink: &sink, applied: &applied}
	}
	d, err := drainLanes(ctx, b, "relay", n, c.Batch, lanes)
	if err != nil {
		return 0, 0, fmt.Errorf("%w (%d published, %d outcomes written, of %d)", err, sink.n.Load(), applied.Load(), n)
	}
	return d, int(sink.n.Load()), nil
}

// lane is one worker of a drain: the consumer it delivers for ("" for
// the default one), its sink, and the count of the outcomes its store
// wrote. Lanes may share a sink and a count.
type lane struct {
	consumer string
	sink     *countingSink
	applied  *atomic.Int64
}

// drainLanes runs one worker per lane, each on a pool of its own and
// claiming batch events at a time, until every lane's count of outcomes
// written has reached n, and returns how long that took; what names the
// drain in the error of a drain that did not end in time.
func drainLanes(ctx context.Context, b *bench, what string, n, batch int, lanes []lane) (time.Duration, error) {
	start := time.Now()
	workers, err := benchkit.StartLanes(ctx, len(lanes), b.relayDB, func(i int, db *sql.DB) (*outbox.Worker, error) {
		l := lanes[i]
		s, err := postgres.New(db, postgres.Options{Table: relayTable})
		if err != nil {
			return nil, err
		}
		var store backend.Store = settleCounter{s, l.applied}
		if l.consumer != "" {
			cs, err := s.Consumer(l.consumer)
			if err != nil {
				return nil, err
			}
			store = settleCounter{cs, l.applied}
		}
		return outbox.NewWorker(store, l.sink, outbox.WorkerOptions{
			BatchSize: batch, PollInterval: 10 * time.Millisecond, NodeID: fmt.Sprintf("bench-%d", i), Logger: quiet,
		})
	})
	if err != nil {
		return 0, err
	}
	defer workers.Stop()
	err = waitDone(ctx, what, 5*time.Minute, func() (bool, error) {
		for _, l := range lanes {
			if l.applied.Load() < int64(n) {
				return false, nil
			}
		}
		return true, nil
	})
	return time.Since(start), err
}

// relayLatency runs one worker (BatchSize 100, the given poll) on a
// store that notifies at every Enqueue and a postgres.Listener that
// wakes the worker, or on a store with DisableNotify and no Listener.
// Writers enqueue one 256 B message per transaction, through PgxTx.
func relayLatency(ctx context.Context, b *bench, notify bool, poll time.Duration, receipt func(string)) (func(context.Context, pgx.Tx, string) error, func(), error) {
	opts := postgres.Options{Table: relayTable, DisableNotify: !notify}
	if err := relayFresh(ctx, b, opts); err != nil {
		return nil, nil, err
	}
	db, err := b.relayDB()
	if err != nil {
		return nil, nil, err
	}
	store, err := postgres.New(db, opts)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	sink := outbox.SinkFunc(func(_ context.Context, m outbox.Message) error {
		receipt(m.ID)
		return nil
	})
	w, err := outbox.NewWorker(store, sink, outbox.WorkerOptions{PollInterval: poll, NodeID: "bench-latency", Logger: quiet})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = w.Run(runCtx)
	}()
	if notify {
		l, err := postgres.NewListener(b.dsn, postgres.ListenerOptions{Table: relayTable, Logger: quiet})
		if err != nil {
			cancel()
			wg.Wait()
			db.Close()
			return nil, nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = l.Run(runCtx, w.Notify)
		}()
	}
	stop := func() {
		cancel()
		wg.Wait()
		db.Close()
	}
	payload := []byte(goPayload(0, 256))
	enqueue := func(ctx context.Context, tx pgx.Tx, id string) error {
		return store.Enqueue(ctx, postgres.PgxTx(tx), nil, outbox.Message{ID: id, Key: "room-" + id[len(id)-1:], Type: "RoomGiftSent", Payload: payload})
	}
	return enqueue, stop, nil
}
