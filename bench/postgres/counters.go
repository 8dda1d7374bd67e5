package main

import (
	"context"
	"fmt"
	"time"
)

// counters are what the server counted: the WAL it wrote (server-wide)
// and the row and transaction statistics of the bench database.
type counters struct {
	wal float64 // bytes, from pg_current_wal_lsn()
	// Rows written, from pg_stat_user_tables summed over the database's
	// tables: inserted, updated (of them HOT, which add no index entry),
	// deleted.
	ins, upd, hotUpd, del float64
	// Rows read: index entries returned by index scans (idx_tup_read of
	// pg_stat_user_indexes) and rows read by sequential scans
	// (seq_tup_read). A claim that steps over entries it does not take
	// reads more than it returns.
	idxRead, seqRead float64
	commits          float64 // xact_commit of pg_stat_database
	checkpoints      float64 // pg_stat_bgwriter, timed and requested
	// cpu is the CPU time the server (with -server-pid: the postmaster
	// and all its children) and the bench process used.
	cpu cpuTimes
}

const countersQuery = `SELECT
	pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0'),
	(SELECT coalesce(sum(n_tup_ins), 0) FROM pg_stat_user_tables),
	(SELECT coalesce(sum(n_tup_upd), 0) FROM pg_stat_user_tables),
	(SELECT coalesce(sum(n_tup_hot_upd), 0) FROM pg_stat_user_tables),
	(SELECT coalesce(sum(n_tup_del), 0) FROM pg_stat_user_tables),
	(SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes),
	(SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_user_tables),
	(SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),
	(SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter)`

// readCounters reads the counters on the control connection, after
// flushing its own pending statistics (a backend publishes its counts
// when it goes idle, at most once a second unless told to) and dropping
// any snapshot of them.
func (b *bench) readCounters(ctx context.Context) (counters, error) {
	var c counters
	if _, err := b.ctl.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		return c, err
	}
	if _, err := b.ctl.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return c, err
	}
	err := b.ctl.QueryRow(ctx, countersQuery).Scan(&c.wal, &c.ins, &c.upd, &c.hotUpd, &c.del, &c.idxRead, &c.seqRead, &c.commits, &c.checkpoints)
	if err != nil {
		return c, err
	}
	c.cpu, err = readCPU(b.serverPID)
	return c, err
}

func (c counters) minus(o counters) counters {
	return counters{c.wal - o.wal, c.ins - o.ins, c.upd - o.upd, c.hotUpd - o.hotUpd, c.del - o.del, c.idxRead - o.idxRead, c.seqRead - o.seqRead, c.commits - o.commits, c.checkpoints - o.checkpoints,
		cpuTimes{server: c.cpu.server - o.cpu.server, bench: c.cpu.bench - o.cpu.bench, measured: c.cpu.measured && o.cpu.measured}}
}

// quiesce waits until no other client backend is connected to the bench
// database, so that the statistics of the arm's connections, which a
// backend publishes when it exits, are in: an arm closes its pools after
// its drain. A backend leaves pg_stat_activity a moment before it
// publishes its counts, hence the short wait after.
func (b *bench) quiesce(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var others int
		err := b.ctl.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`).Scan(&others)
		if err != nil {
			return err
		}
		if others == 0 {
			time.Sleep(50 * time.Millisecond) // the exiting backends' last flush
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("quiesce: %d other connections still open after 30s", others)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

// drainStats is one drain: its rate and what the server counted meanwhile.
type drainStats struct {
	rate    float64
	counter counters // deltas over the drain, the arm's shutdown included
	events  int
}

func (s drainStats) perEvent(v float64) float64 { return v / float64(s.events) }

// serverCPU is the server's CPU time per delivered event, in µs, and
// whether it is known (-server-pid).
func (s drainStats) serverCPU() (float64, bool) {
	return s.perEvent(s.counter.cpu.server) * 1e6, s.counter.cpu.measured
}

// cpuPerEvent is the CPU time per event: the server's (when its PID is
// known) and the bench process's.
func (s drainStats) cpuPerEvent() string {
	bench := fmt.Sprintf("bench %.1f µs", s.perEvent(s.counter.cpu.bench)*1e6)
	if server, ok := s.serverCPU(); ok {
		return fmt.Sprintf("server %.1f µs + %s", server, bench)
	}
	return bench
}

// rowsPerEvent is the rows written and read per delivered event.
func (s drainStats) rowsPerEvent() string {
	c := s.counter
	return fmt.Sprintf("ins %.2f, upd %.2f (HOT %.2f), del %.2f; idx read %.1f, seq read %.1f",
		s.perEvent(c.ins), s.perEvent(c.upd), s.perEvent(c.hotUpd), s.perEvent(c.del), s.perEvent(c.idxRead), s.perEvent(c.seqRead))
}
