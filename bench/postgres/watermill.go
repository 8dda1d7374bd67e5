package main

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	"github.com/outboxrelay/outboxrelay/bench/internal/benchkit"
)

// Watermill's PostgreSQL queue: watermill-sql v4's PostgreSQLQueueSchema
// (a table per topic: a serial offset, the payload, JSON metadata, an
// acked flag; no index but the primary key) with its
// PostgreSQLQueueOffsetsAdapter, which marks each message acked, the
// per-message state the relay keeps too (DeleteOnAck false, its default).
// The payload column is BYTEA, as its doc advises for a payload that is
// not JSON. One subscriber per worker, each on a pgx pool of its own
// (BeginnerFromPgx), SubscribeBatchSize the batch, PollInterval 10 ms as
// the relay's; each message is acked as it arrives. The subscriber selects
// a batch FOR UPDATE (no SKIP LOCKED) under REPEATABLE READ and acks it
// in the same transaction: that is its design, and what several
// subscribers on one topic get.

const watermillTopic = "bench_queue"

func watermillSchema(c compareConfig) wmsql.PostgreSQLQueueSchema {
	return wmsql.PostgreSQLQueueSchema{SubscribeBatchSize: c.Batch, GeneratePayloadType: func(string) string { return "BYTEA" }}
}

func watermillPrepare(ctx context.Context, b *bench, n int, c compareConfig) error {
	schema := watermillSchema(c)
	queries, err := schema.SchemaInitializingQueries(wmsql.SchemaInitializingQueriesParams{Topic: watermillTopic})
	if err != nil {
		return err
	}
	table := schema.MessagesTable(watermillTopic)
	stmts := []string{"DROP TABLE IF EXISTS " + table}
	for _, q := range queries {
		stmts = append(stmts, q.Query)
	}
	stmts = append(stmts,
		fmt.Sprintf("INSERT INTO %s (uuid, payload, metadata) SELECT gen_random_uuid(), %s, '{}' FROM generate_series(0, %d) n", table, fillPayload(c.Payload), n-1),
		"VACUUM ANALYZE "+table)
	return b.exec(ctx, stmts...)
}

func watermillLeft(ctx context.Context, b *bench) (int, error) {
	return b.count(ctx, "SELECT count(*) FROM "+watermillSchema(compareConfig{}).MessagesTable(watermillTopic)+" WHERE NOT acked")
}

func watermillDrain(ctx context.Context, b *bench, n int, c compareConfig) (time.Duration, int, error) {
	schema := watermillSchema(c)
	txs := &txWatch{open: map[*watchedTx]time.Time{}}
	var got atomic.Int64
	var lastAt atomic.Int64 // UnixNano of the n-th receipt
	var subs benchkit.Subscribers
	defer subs.Close()
	start := time.Now()
	cfg := wmsql.SubscriberConfig{SchemaAdapter: schema, OffsetsAdapter: wmsql.PostgreSQLQueueOffsetsAdapter{}, PollInterval: 10 * time.Millisecond}
	open := func() (wmsql.Beginner, func(), error) {
		pool, err := b.pool(ctx, 2)
		if err != nil {
			return nil, nil, err
		}
		return &watchedBeginner{Beginner: wmsql.BeginnerFromPgx(pool), watch: txs}, pool.Close, nil
	}
	received := func() {
		if got.Add(1) == int64(n) {
			lastAt.Store(time.Now().UnixNano())
		}
	}
	if err := subs.Start(ctx, c.Workers, watermillTopic, cfg, open, received); err != nil {
		return 0, 0, err
	}
	// Done when every message has arrived and every transaction that was
	// open when the last one arrived has ended: the acks are committed.
	err := waitDone(ctx, "watermill", 5*time.Minute, func() (bool, error) {
		if got.Load() < int64(n) {
			return false, nil
		}
		return !txs.openSince(time.Unix(0, lastAt.Load())), nil
	})
	d := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("%w (%d of %d received)", err, got.Load(), n)
	}
	return d, int(got.Load()), nil
}

// txWatch knows which of a subscriber's transactions are open and since
// when.
type txWatch struct {
	mu   sync.Mutex
	open map[*watchedTx]time.Time
}

// openSince reports whether a transaction begun before t is still open.
func (w *txWatch) openSince(t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, began := range w.open {
		if !began.After(t) {
			return true
		}
	}
	return false
}

type watchedBeginner struct {
	wmsql.Beginner
	watch *txWatch
}

func (b *watchedBeginner) BeginTx(ctx context.Context, opts *sql.TxOptions) (wmsql.Tx, error) {
	began := time.Now()
	tx, err := b.Beginner.BeginTx(ctx, opts)
	if err != nil {
		return tx, err
	}
	w := &watchedTx{Tx: tx, watch: b.watch}
	b.watch.mu.Lock()
	b.watch.open[w] = began
	b.watch.mu.Unlock()
	return w, nil
}

type watchedTx struct {
	wmsql.Tx
	watch *txWatch
}

func (t *watchedTx) end() {
	t.watch.mu.Lock()
	delete(t.watch.open, t)
	t.watch.mu.Unlock()
}

func (t *watchedTx) Commit() error {
	defer t.end()
	return t.Tx.Commit()
}

func (t *watchedTx) Rollback() error {
	defer t.end()
	return t.Tx.Rollback()
}
