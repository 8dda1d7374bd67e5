package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxrelay/outboxrelay/bench/internal/benchkit"
)

// The minimal ceiling: a table of a bigint identity primary key, an
// event_id, a bytea payload and a smallint status, with a partial index of
// the pending rows' ids (the index PostgreSQL allows and MySQL does not),
// drained by one SELECT … FOR UPDATE SKIP LOCKED and one UPDATE per batch
// under READ COMMITTED, one goroutine and connection per worker, nothing
// else: the least a relay that keeps its delivered rows can do.

const ceilingTable = "bench_minimal"

func ceilingPrepare(ctx context.Context, b *bench, n int, c compareConfig) error {
	return b.exec(ctx,
		"DROP TABLE IF EXISTS "+ceilingTable,
		"CREATE TABLE "+ceilingTable+" (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, event_id text NOT NULL,"+
			" payload bytea NOT NULL, status smallint NOT NULL DEFAULT 0)",
		"CREATE INDEX "+ceilingTable+"_pending ON "+ceilingTable+" (id) WHERE status = 0",
		fmt.Sprintf("INSERT INTO %s (event_id, payload) SELECT 'e-' || n, %s FROM generate_series(0, %d) n", ceilingTable, fillPayload(c.Payload), n-1),
		"VACUUM ANALYZE "+ceilingTable)
}

func ceilingLeft(ctx context.Context, b *bench) (int, error) {
	return b.count(ctx, "SELECT count(*) FROM "+ceilingTable+" WHERE status = 0")
}

func ceilingDrain(ctx context.Context, b *bench, n int, c compareConfig) (time.Duration, int, error) {
	start := time.Now()
	pools := make([]*pgxpool.Pool, c.Workers)
	defer func() {
		for _, p := range pools {
			if p != nil {
				p.Close()
			}
		}
	}()
	for i := range pools {
		p, err := b.pool(ctx, 1)
		if err != nil {
			return 0, 0, err
		}
		pools[i] = p
	}
	var delivered atomic.Int64
	err := benchkit.Drain(c.Workers, func(i int) (int, error) {
		got, err := ceilingBatch(ctx, pools[i], c.Batch)
		delivered.Add(int64(got))
		return got, err
	})
	return time.Since(start), int(delivered.Load()), err
}

// ceilingBatch claims and marks one batch; it returns how many rows.
func ceilingBatch(ctx context.Context, p *pgxpool.Pool, batch int) (int, error) {
	tx, err := p.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	got, err := benchkit.Claim(func() (benchkit.Rows, error) {
		return tx.Query(ctx, "SELECT id, event_id, payload FROM "+ceilingTable+" WHERE status = 0 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED", batch)
	}, func(ids []int64) error {
		_, err := tx.Exec(ctx, "UPDATE "+ceilingTable+" SET status = 1 WHERE id = ANY($1)", ids)
		return err
	})
	if err != nil || got == 0 {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, errors.Join(errors.New("ceiling: commit"), err)
	}
	return got, nil
}
