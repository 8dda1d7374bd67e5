package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/outboxrelay/outboxrelay/bench/internal/benchkit"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// The compare scenario drains the same backlog three ways, in alternating
// rounds, and reports medians, ratios and what the server wrote:
//   - the relay (outbox.Worker on the store's table);
//   - Watermill's SQL subscriber on MySQLQueueSchema, which marks each
//     message acked (per-message state, as the relay keeps), read and
//     acked directly, without the forwarder's envelope around the payload;
//   - the minimal ceiling: a table of id, event_id, a BLOB payload and a
//     TINYINT status with an index on (status, id), drained by one
//     SELECT … FOR UPDATE SKIP LOCKED and one UPDATE per batch under
//     READ COMMITTED, nothing else.

// compareConfig is one configuration of the comparison.
type compareConfig struct {
	benchkit.Config
	// ordered drains the relay with WorkerOptions.Ordering (the backlog
	// has 200 keys); the ceiling and Watermill have no ordering.
	ordered bool
}

// drainStats is one drain: its rate and what the server counted meanwhile.
type drainStats struct {
	rate    float64
	counter counters // deltas over the drain
	events  int
	// written is the redo per event of writing the backlog, where a
	// scenario measures it (consumers: one INSERT … SELECT, the
	// cheapest way to write the rows).
	written float64
}

// counters are server-wide status counters (SHOW GLOBAL STATUS). The
// bench is meant to run on a server nobody else uses meanwhile, so that
// the deltas are the drain's own.
type counters struct {
	redo, updates, rowsUpdated, selects, commits float64
	// rowsRead is what the storage engine was asked for, row by row:
	// index lookups and steps along an index or a table (the
	// Handler_read_* counters). A claim that steps over rows it does not
	// take reads more than it returns.
	rowsRead float64
	// lockWaits and lockWaitMs are the row lock waits and the time spent
	// in them (Innodb_row_lock_waits, Innodb_row_lock_time).
	lockWaits, lockWaitMs float64
	// cpu is the CPU time the server (with -server-pid) and the bench
	// process used.
	cpu cpuTimes
}

var counterNames = map[string]func(*counters) *float64{
	"Innodb_os_log_written": func(c *counters) *float64 { return &c.redo },
	"Com_update":            func(c *counters) *float64 { return &c.updates },
	"Handler_update":        func(c *counters) *float64 { return &c.rowsUpdated },
	"Com_select":            func(c *counters) *float64 { return &c.selects },
	"Com_commit":            func(c *counters) *float64 { return &c.commits },
	"Handler_read_key":      func(c *counters) *float64 { return &c.rowsRead },
	"Handler_read_next":     func(c *counters) *float64 { return &c.rowsRead },
	"Handler_read_prev":     func(c *counters) *float64 { return &c.rowsRead },
	"Handler_read_first":    func(c *counters) *float64 { return &c.rowsRead },
	"Handler_read_last":     func(c *counters) *float64 { return &c.rowsRead },
	"Handler_read_rnd":      func(c *counters) *float64 { return &c.rowsRead },
	"Handler_read_rnd_next": func(c *counters) *float64 { return &c.rowsRead },
	"Innodb_row_lock_waits": func(c *counters) *float64 { return &c.lockWaits },
	"Innodb_row_lock_time":  func(c *counters) *float64 { return &c.lockWaitMs },
}

func (b *bench) readCounters(ctx context.Context) (counters, error) {
	var c counters
	names := make([]string, 0, len(counterNames))
	for name := range counterNames {
		names = append(names, "'"+name+"'")
	}
	rows, err := b.admin.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ("+strings.Join(names, ", ")+")")
	if err != nil {
		return c, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var v float64
		if err := rows.Scan(&name, &v); err != nil {
			return c, err
		}
		if f, ok := counterNames[name]; ok {
			*f(&c) += v // the Handler_read_* counters add up to one figure
		}
	}
	if err := rows.Err(); err != nil {
		return c, err
	}
	c.cpu, err = readCPU(b.serverPID)
	return c, err
}

func (c counters) minus(o counters) counters {
	return counters{c.redo - o.redo, c.updates - o.updates, c.rowsUpdated - o.rowsUpdated, c.selects - o.selects, c.commits - o.commits, c.rowsRead - o.rowsRead, c.lockWaits - o.lockWaits, c.lockWaitMs - o.lockWaitMs,
		cpuTimes{server: c.cpu.server - o.cpu.server, bench: c.cpu.bench - o.cpu.bench}}
}

// measured runs drain between two readings of the counters.
func (b *bench) measured(ctx context.Context, n int, drain func() (time.Duration, error)) (drainStats, error) {
	before, err := b.readCounters(ctx)
	if err != nil {
		return drainStats{}, err
	}
	d, err := drain()
	if err != nil {
		return drainStats{}, err
	}
	after, err := b.readCounters(ctx)
	if err != nil {
		return drainStats{}, err
	}
	return drainStats{rate: benchkit.PerSec(n, d), counter: after.minus(before), events: n}, nil
}

// fillPayload is the SQL expression of a payload of size bytes for row n:
// distinct per row, JSON-like, and not all one byte.
func fillPayload(size int) string {
	return fmt.Sprintf("RPAD(CONCAT('{\"gift\":\"rose\",\"n\":', n, ',\"pad\":\"', SHA2(n, 256)), %d, SHA2(n + 1, 256))", size)
}

// relayDrain drains n pending records of size bytes with the relay.
func (b *bench) relayDrain(ctx context.Context, n int, c compareConfig) (drainStats, error) {
	if _, err := b.freshStore(ctx, b.db); err != nil {
		return drainStats{}, err
	}
	if err := b.fillSized(ctx, 0, n, "pending", fillPayload(c.Payload)); err != nil {
		return drainStats{}, err
	}
	if _, err := b.db.ExecContext(ctx, "ANALYZE TABLE "+table); err != nil {
		return drainStats{}, err
	}
	return b.measured(ctx, n, func() (time.Duration, error) {
		return b.drain(ctx, n, c.Workers, &countingSink{}, outbox.WorkerOptions{BatchSize: c.Batch, PollInterval: 10 * time.Millisecond, Ordering: c.ordered})
	})
}

const minimalTable = "bench_minimal"

// prepareMinimal makes the minimal table afresh with n rows of payload (an
// SQL expression of n).
func (b *bench) prepareMinimal(ctx context.Context, n int, payload string) error {
	for _, q := range []string{
		"DROP TABLE IF EXISTS " + minimalTable,
		"CREATE TABLE " + minimalTable + " (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, event_id VARCHAR(64) NOT NULL," +
			" payload BLOB NOT NULL, status TINYINT NOT NULL DEFAULT 0, KEY idx_status (status, id)) ENGINE=InnoDB",
		"INSERT INTO " + minimalTable + " (event_id, payload) SELECT CONCAT('e-', n), " + payload + " FROM " + numbers(n),
		"ANALYZE TABLE " + minimalTable,
	} {
		if _, err := b.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%.60s: %w", q, err)
		}
	}
	return nil
}

// minimalDrain drains n rows of the minimal table: workers goroutines, each
// on a connection of its own, each transaction one locking SELECT and one
// UPDATE.
func (b *bench) minimalDrain(ctx context.Context, n int, c compareConfig) (drainStats, error) {
	if err := b.prepareMinimal(ctx, n, fillPayload(c.Payload)); err != nil {
		return drainStats{}, err
	}
	pool, err := b.pool()
	if err != nil {
		return drainStats{}, err
	}
	defer pool.Close()
	return b.measured(ctx, n, func() (time.Duration, error) {
		start := time.Now()
		err := benchkit.Drain(c.Workers, func(int) (int, error) {
			for {
				got, err := claimMinimal(ctx, pool, c.Batch)
				if !rolledBack(err) {
					return got, err
				}
				// a deadlock victim: any claimer tries again
			}
		})
		return time.Since(start), err
	})
}

// claimMinimal is the minimal ceiling's one transaction on db: it claims
// up to batch due rows of the minimal table with FOR UPDATE SKIP LOCKED,
// reads every column as a relay would, and marks them published. It
// returns how many rows it claimed (0 when none was due).
func claimMinimal(ctx context.Context, db *sql.DB, batch int) (int, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	got, err := benchkit.Claim(func() (benchkit.Rows, error) {
		return tx.QueryContext(ctx, "SELECT id, event_id, payload FROM "+minimalTable+" WHERE status = 0 ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED", batch)
	}, func(ids []int64) error {
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		_, err := tx.ExecContext(ctx, "UPDATE "+minimalTable+" SET status = 1 WHERE id IN ("+strings.Repeat("?, ", len(ids)-1)+"?)", args...)
		return err
	})
	if err != nil || got == 0 {
		return 0, err
	}
	return got, tx.Commit()
}

// rolledBack reports whether err is the server rolling back a
// transaction as a deadlock victim, which concurrent SKIP LOCKED claimers
// can be on MariaDB; nothing of it was applied, and the store's claim
// runs it again too.
func rolledBack(err error) bool {
	var me *mysqldrv.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// watermillDrain drains n messages of size bytes from Watermill's queue
// table with workers subscribers, each on a pool of its own, acking each
// message as it arrives.
func (b *bench) watermillDrain(ctx context.Context, n int, c compareConfig) (drainStats, error) {
	const topic = "bench_queue"
	schema := wmsql.MySQLQueueSchema{SubscribeBatchSize: c.Batch, GeneratePayloadType: func(string) string { return "BLOB" }}
	queries, err := schema.SchemaInitializingQueries(wmsql.SchemaInitializingQueriesParams{Topic: topic})
	if err != nil {
		return drainStats{}, err
	}
	stmts := []string{"DROP TABLE IF EXISTS " + schema.MessagesTable(topic)}
	for _, q := range queries {
		stmts = append(stmts, q.Query)
	}
	stmts = append(stmts,
		"INSERT INTO "+schema.MessagesTable(topic)+" (uuid, payload, metadata) SELECT UUID(), "+fillPayload(c.Payload)+", '{}' FROM "+numbers(n),
		"ANALYZE TABLE "+schema.MessagesTable(topic))
	for _, q := range stmts {
		if _, err := b.db.ExecContext(ctx, q); err != nil {
			return drainStats{}, fmt.Errorf("%.60s: %w", q, err)
		}
	}
	var subs benchkit.Subscribers
	defer subs.Close()
	got := make(chan struct{}, n)
	return b.measured(ctx, n, func() (time.Duration, error) {
		start := time.Now()
		cfg := wmsql.SubscriberConfig{SchemaAdapter: schema, OffsetsAdapter: wmsql.MySQLQueueOffsetsAdapter{}, PollInterval: 10 * time.Millisecond}
		open := func() (wmsql.Beginner, func(), error) {
			pool, err := b.pool()
			if err != nil {
				return nil, nil, err
			}
			return wmsql.BeginnerFromStdSQL(pool), func() { pool.Close() }, nil
		}
		if err := subs.Start(ctx, c.Workers, topic, cfg, open, func() { got <- struct{}{} }); err != nil {
			return 0, err
		}
		for i := 0; i < n; i++ {
			select {
			case <-got:
			case <-time.After(2 * time.Minute):
				return 0, fmt.Errorf("watermill: %d of %d received after 2 minutes", i, n)
			}
		}
		// The acks of the last batch are committed after the last message
		// is acked: wait until none is left unacked.
		var left int
		err := benchkit.WaitDone(ctx, "watermill: the acks", time.Minute, time.Millisecond, func() (bool, error) {
			err := b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+schema.MessagesTable(topic)+" WHERE acked = false").Scan(&left)
			return left == 0, err
		})
		if err != nil {
			return 0, fmt.Errorf("%w (%d messages still unacked)", err, left)
		}
		return time.Since(start), nil
	})
}

// compare runs the three drains for each configuration, in alternating
// rounds (the order rotating from round to round), and reports medians.
func (b *bench) compare(ctx context.Context, sz sizes) ([]row, error) {
	configs := sz.compareConfigs
	contenders := []struct {
		name  string
		drain func(context.Context, int, compareConfig) (drainStats, error)
	}{{"relay", b.relayDrain}, {"watermill", b.watermillDrain}, {"ceiling", b.minimalDrain}}
	var rows []row
	n := sz.compareEvents
	rates := map[compareConfig]float64{} // the relay's median, by configuration
	for _, c := range configs {
		results, err := benchkit.Alternate(sz.compareRounds, len(contenders), func(k int) string { return contenders[k].name },
			func(k int) (drainStats, error) { return contenders[k].drain(ctx, n, c) })
		if err != nil {
			return nil, err
		}
		relay, wm, ceiling := medianStats(results[0]), medianStats(results[1]), medianStats(results[2])
		what := fmt.Sprintf("%d worker(s), batch %d, %d B payload, %d events, median of %d", c.Workers, c.Batch, c.Payload, n, sz.compareRounds)
		if c.ordered {
			what += ", relay with Ordering (200 keys)"
		}
		rates[c] = relay.rate
		rows = append(rows,
			row{Scenario: "compare: relay, " + what, Figure: benchkit.EvRate(relay.rate), Reference: "minimal ceiling " + benchkit.EvRate(ceiling.rate), Ratio: benchkit.Ratio(relay.rate, ceiling.rate), Target: "≥ 0.8"},
			row{Scenario: "compare: relay vs Watermill queue schema, " + what, Figure: benchkit.EvRate(relay.rate), Reference: "Watermill " + benchkit.EvRate(wm.rate), Ratio: benchkit.Ratio(relay.rate, wm.rate), Target: "≥ 1.2"},
			row{Scenario: "compare: rows read per delivered event (Handler_read_*, server-wide), " + what, Figure: fmt.Sprintf("relay %.2f", relay.perEvent(relay.counter.rowsRead)),
				Reference: fmt.Sprintf("ceiling %.2f, Watermill %.2f", ceiling.perEvent(ceiling.counter.rowsRead), wm.perEvent(wm.counter.rowsRead)),
				Ratio:     benchkit.Ratio(relay.perEvent(relay.counter.rowsRead), ceiling.perEvent(ceiling.counter.rowsRead)), Target: readTarget(c)},
			row{Scenario: "compare: redo per delivered event, " + what, Figure: fmt.Sprintf("relay %.0f B", relay.perEvent(relay.counter.redo)),
				Reference: fmt.Sprintf("ceiling %.0f B, Watermill %.0f B", ceiling.perEvent(ceiling.counter.redo), wm.perEvent(wm.counter.redo)),
				Ratio:     benchkit.Ratio(relay.perEvent(relay.counter.redo), ceiling.perEvent(ceiling.counter.redo)), Target: "≤ 3× the ceiling"},
			row{Scenario: "compare: CPU per delivered event, " + what, Figure: "relay " + relay.cpuPerEvent(),
				Reference: "ceiling " + ceiling.cpuPerEvent() + "; Watermill " + wm.cpuPerEvent(),
				Ratio:     cpuRatio(relay, ceiling), Target: ""},
			row{Scenario: "compare: per batch of " + fmt.Sprint(c.Batch) + " (server-wide), " + what, Figure: "relay " + relay.perBatch(c.Batch),
				Reference: "ceiling " + ceiling.perBatch(c.Batch) + "; Watermill " + wm.perBatch(c.Batch), Ratio: "", Target: ""},
		)
	}
	return append(rows, scaling(configs, rates)...), nil
}

// readTarget is issue 30's goal for the rows read per delivered event.
func readTarget(c compareConfig) string {
	if c.Workers == 8 {
		return "≤ 1.5"
	}
	return ""
}

// scaling compares the relay at more than 4 workers with the relay at 4
// workers and the same payload (issue 30: adding instances must not make
// the relay slower), in the same run.
func scaling(configs []compareConfig, rates map[compareConfig]float64) []row {
	var rows []row
	for _, c := range configs {
		if c.Workers <= 4 || c.ordered {
			continue
		}
		for _, four := range configs {
			if four.Workers != 4 || four.Payload != c.Payload || four.ordered {
				continue
			}
			rows = append(rows, row{
				Scenario: fmt.Sprintf("compare: relay at %d workers × %d vs 4 workers × %d, %d B payload", c.Workers, c.Batch, four.Batch, c.Payload),
				Figure:   benchkit.EvRate(rates[c]), Reference: "4 workers " + benchkit.EvRate(rates[four]), Ratio: benchkit.Ratio(rates[c], rates[four]), Target: "≥ 1.0",
			})
		}
	}
	return rows
}

// medianStats is the drain of median rate; its counters go with it.
func medianStats(xs []drainStats) drainStats {
	rates := make([]float64, len(xs))
	for i, x := range xs {
		rates[i] = x.rate
	}
	m := median(rates)
	for _, x := range xs {
		if x.rate == m {
			return x
		}
	}
	return xs[0]
}

func (s drainStats) perEvent(v float64) float64 { return v / float64(s.events) }

// cpuPerEvent is the drain's CPU time per delivered event: the server's
// (when its PID is known) and the bench process's.
func (s drainStats) cpuPerEvent() string {
	bench := fmt.Sprintf("bench %.1f µs", s.perEvent(s.counter.cpu.bench)*1e6)
	if s.counter.cpu.server == 0 {
		return bench
	}
	return fmt.Sprintf("server %.1f µs + %s", s.perEvent(s.counter.cpu.server)*1e6, bench)
}

// cpuRatio is a's CPU time per event over b's, server and bench together.
func cpuRatio(a, b drainStats) string {
	return benchkit.Ratio(a.perEvent(a.counter.cpu.server+a.counter.cpu.bench), b.perEvent(b.counter.cpu.server+b.counter.cpu.bench))
}

// perBatch is what the server counted per batch of size events.
func (s drainStats) perBatch(size int) string {
	per := func(v float64) float64 { return v * float64(size) / float64(s.events) }
	return fmt.Sprintf("%.1f UPDATE, %.1f SELECT, %.1f COMMIT, %.0f rows read, %.0f rows updated, %.1f KB redo, %.2f row lock waits (%.1f ms)",
		per(s.counter.updates), per(s.counter.selects), per(s.counter.commits), per(s.counter.rowsRead), per(s.counter.rowsUpdated), per(s.counter.redo)/1024,
		per(s.counter.lockWaits), per(s.counter.lockWaitMs))
}

// numbers is a derived table of the integers 0 … n-1, named nums, column n:
// a cross join of as many tables of ten digits as n needs.
func numbers(n int) string {
	digits := "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4" +
		" UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	var terms, tables []string
	for i, scale := 0, 1; scale < max(n, 2); i, scale = i+1, scale*10 {
		terms = append(terms, fmt.Sprintf("%d*d%d.d", scale, i))
		tables = append(tables, fmt.Sprintf("%s d%d", digits, i))
	}
	return fmt.Sprintf("(SELECT %s AS n FROM %s) nums WHERE n < %d", strings.Join(terms, " + "), strings.Join(tables, ", "), n)
}
