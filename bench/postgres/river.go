package main

import (
	"cmp"
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// River (riverqueue/river v0.51.2 on riverpgxv5): its own schema, migrated
// by rivermigrate; a job kind whose worker does nothing; one client per
// worker, each on a pgx pool of its own, with one queue whose MaxWorkers
// is the batch (a fetch takes up to MaxWorkers jobs, so that is River's
// batch). Completions go through River's batch completer, as in
// production. The backlog is inserted in one transaction of the caller's
// with InsertManyFastTx; the latency scenario inserts each job with
// InsertTx in the writer's transaction.
//
// The compare scenario runs River twice, as two arms:
//   - "River", tuned in its favour: FetchPollInterval is the relay's
//     PollInterval, 10 ms, and FetchCooldown riverCooldown (-river-cooldown,
//     5 ms); River's default of 100 ms caps a client at MaxWorkers jobs
//     per 100 ms;
//   - "River (defaults)": FetchCooldown and FetchPollInterval left unset,
//     so River's own defaults (river.FetchCooldownDefault, 100 ms, and
//     river.FetchPollIntervalDefault, 1 s) apply, as for a user who sets
//     neither.

var riverCooldown = 5 * time.Millisecond

// riverDefaultsArm is the name of the arm that runs River at its default
// fetch settings.
const riverDefaultsArm = "River (defaults)"

// riverFetch is a client's fetch settings; a zero field is left to River,
// which fills in its default.
type riverFetch struct {
	cooldown, poll time.Duration
}

// riverTuned is the tuned arm's fetch settings, and the latency
// scenario's with its own poll.
func riverTuned(poll time.Duration) riverFetch {
	return riverFetch{cooldown: riverCooldown, poll: max(poll, riverCooldown)} // River refuses a poll shorter than the cooldown
}

// riverMaxWorkers, when positive, replaces the batch as River's
// MaxWorkers in the compare scenario.
var riverMaxWorkers int

// benchArgs is the job: the payload, as the relay's message carries it.
type benchArgs struct {
	Payload string `json:"payload"`
}

func (benchArgs) Kind() string { return "bench" }

var riverTables = []string{"river_job", "river_leader", "river_queue", "river_client", "river_client_queue"}

func riverPrepare(ctx context.Context, b *bench, n int, c compareConfig) error {
	pool, err := b.pool(ctx, 1)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := riverMigrate(ctx, b, pool); err != nil {
		return err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: quiet})
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: benchArgs{Payload: goPayload(i, c.Payload)}}
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := client.InsertManyFastTx(ctx, tx, params)
		return err
	}); err != nil {
		return fmt.Errorf("river: insert: %w", err)
	}
	return b.exec(ctx, "VACUUM ANALYZE river_job")
}

// riverMigrate creates River's schema the first time, and empties its
// tables after: a fresh table for every drain, as the other arms get.
func riverMigrate(ctx context.Context, b *bench, pool *pgxpool.Pool) error {
	var exists bool
	if err := b.ctl.QueryRow(ctx, "SELECT to_regclass('river_job') IS NOT NULL").Scan(&exists); err != nil {
		return err
	}
	if exists {
		var present []string
		for _, t := range riverTables {
			var ok bool
			if err := b.ctl.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", t).Scan(&ok); err != nil {
				return err
			}
			if ok {
				present = append(present, t)
			}
		}
		q := "TRUNCATE "
		for i, t := range present {
			if i > 0 {
				q += ", "
			}
			q += t
		}
		return b.exec(ctx, q+" RESTART IDENTITY")
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: quiet})
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

// riverClient makes a client that works the queue with maxWorkers
// workers, calling work for each job, with the fetch settings fetch;
// pollOnly turns its LISTEN/NOTIFY off.
func riverClient(pool *pgxpool.Pool, maxWorkers int, fetch riverFetch, pollOnly bool, work func(*river.Job[benchArgs])) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(_ context.Context, j *river.Job[benchArgs]) error {
		work(j)
		return nil
	}))
	return river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:            quiet,
		FetchCooldown:     fetch.cooldown,
		FetchPollInterval: fetch.poll,
		PollOnly:          pollOnly,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers:           workers,
	})
}

func riverLeft(ctx context.Context, b *bench) (int, error) {
	return b.count(ctx, "SELECT count(*) FROM river_job WHERE state <> 'completed'")
}

// riverDrain is the drain of the tuned arm, riverDefaultsDrain that of
// the arm at River's defaults.
func riverDrain(ctx context.Context, b *bench, n int, c compareConfig) (time.Duration, int, error) {
	return riverDrainWith(ctx, b, n, c, riverTuned(10*time.Millisecond))
}

func riverDefaultsDrain(ctx context.Context, b *bench, n int, c compareConfig) (time.Duration, int, error) {
	return riverDrainWith(ctx, b, n, c, riverFetch{})
}

func riverDrainWith(ctx context.Context, b *bench, n int, c compareConfig, fetch riverFetch) (time.Duration, int, error) {
	var (
		worked    atomic.Int64
		completed atomic.Int64
		clients   []*river.Client[pgx.Tx]
		pools     []*pgxpool.Pool
	)
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, cl := range clients {
			_ = cl.Stop(stopCtx)
		}
		for _, p := range pools {
			p.Close()
		}
	}()
	start := time.Now()
	for range c.Workers {
		pool, err := b.pool(ctx, 4)
		if err != nil {
			return 0, 0, err
		}
		pools = append(pools, pool)
		cl, err := riverClient(pool, cmp.Or(riverMaxWorkers, c.Batch), fetch, false, func(*river.Job[benchArgs]) { worked.Add(1) })
		if err != nil {
			return 0, 0, err
		}
		clients = append(clients, cl)
		// A completed event is sent once the completion is committed.
		events, cancel := cl.SubscribeConfig(&river.SubscribeConfig{ChanSize: n + 1000, Kinds: []river.EventKind{river.EventKindJobCompleted}})
		defer cancel()
		go func() {
			for range events {
				completed.Add(1)
			}
		}()
		if err := cl.Start(ctx); err != nil {
			return 0, 0, err
		}
	}
	err := waitDone(ctx, "river", 5*time.Minute, func() (bool, error) { return completed.Load() >= int64(n), nil })
	d := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("%w (%d worked, %d completed, of %d)", err, worked.Load(), completed.Load(), n)
	}
	return d, int(worked.Load()), nil
}
