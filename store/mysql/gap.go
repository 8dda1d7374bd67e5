package mysql

// Holes in the log. MySQL gives a row its id when the row is inserted,
// not when its transaction commits: a walk that finds id 101 missing and
// 102 committed cannot know from what it reads whether 101 is a
// transaction still open (which will commit it later: it must not be
// passed), or a rollback or a failed insert (it never comes: it must be
// passed, or the walk stalls for good). LOG-DESIGN.md, "Holes", gives
// the facts this rests on. The rule:
//
//   - a walk reads only the run of ids that follow its position without
//     a hole (a consistent read: every row it sees is committed);
//   - at a hole with a later id committed, a locking read that does not
//     wait (FOR UPDATE NOWAIT, in its own READ COMMITTED transaction)
//     asks whether a transaction holds a row there: an insert not yet
//     committed holds its row's lock, so the read fails at once, and the
//     walk waits for it, however long it stays open;
//   - when the read finds nothing, the hole is stamped in {gaps} with the
//     time it was first seen so (once, for every consumer), and passed
//     once it is Options.GapTimeout old and the locking read still finds
//     nothing. What this cannot see is the moment between an INSERT
//     taking its id and putting its row in the table, which has no lock
//     yet: microseconds, unless the server stalls that statement. A row
//     that appears in a passed hole anyway is still delivered, late
//     (lateArrivals).

import (
	"context"
	"database/sql"
	"time"

	"github.com/outboxrelay/outboxrelay/internal/mysqlerr"
)

// DefaultGapTimeout is Options.GapTimeout's default.
const DefaultGapTimeout = time.Second

// gapVerdict is what the step at a hole found.
type gapVerdict int

const (
	// gapHeld: a transaction holds a row in the hole; wait for it.
	gapHeld gapVerdict = iota
	// gapFilled: rows of the hole committed meanwhile; walk again.
	gapFilled
	// gapAging: nothing there, not yet GapTimeout old; come back.
	gapAging
	// gapPassed: the walk moved past the hole.
	gapPassed
)

// stepGap looks at hole h of t's consumer's walk and passes it when the
// rule above allows; wait is how long until it may (gapAging).
func stepGap(ctx context.Context, db *sql.DB, t *target, h hole, timeout time.Duration) (gapVerdict, time.Duration, error) {
	v, err := probeGap(ctx, db, t, h)
	if err != nil || v != gapAging {
		return v, 0, err
	}
	// The consumer's stamp of the hole, when it first saw it so; or
	// earlier, when another consumer saw all of it missing before (the
	// stamp says that at seen_at a later id was committed while these
	// were missing: a fact of the log, not of a consumer), so that the
	// consumers' waits at one hole overlap.
	if _, err := db.ExecContext(ctx, t.sql(`INSERT IGNORE INTO {gaps} (consumer_id, lo, hi, seen_at)
SELECT {c}, ?, ?, COALESCE(MIN(seen_at), UTC_TIMESTAMP(6)) FROM {gaps} WHERE lo = ? AND hi >= ?`), h.at, h.next-1, h.at, h.next-1); err != nil {
		return 0, 0, err
	}
	var hi uint64
	var age int64
	if err := db.QueryRowContext(ctx, t.sql("SELECT hi, TIMESTAMPDIFF(MICROSECOND, seen_at, UTC_TIMESTAMP(6)) FROM {gaps} WHERE consumer_id = {c} AND lo = ?"), h.at).Scan(&hi, &age); err != nil {
		return 0, 0, err
	}
	if left := timeout - time.Duration(age)*time.Microsecond; left > 0 {
		return gapAging, left, nil
	}
	upTo := min(hi, h.next-1)
	var passed bool
	err = inTx(ctx, db, func(tx *sql.Tx) error {
		c, err := lockConsumer(ctx, tx, t, false)
		if err != nil {
			return err
		}
		if c.walked != h.at-1 {
			return nil // another claim moved on meanwhile
		}
		var n int
		if err := tx.QueryRowContext(ctx, t.sql("SELECT COUNT(*) FROM {outbox} WHERE id > ? AND id <= ?"), c.walked, upTo).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil // filled meanwhile
		}
		if _, err := tx.ExecContext(ctx, t.sql("UPDATE {consumers} SET walked = ? WHERE id = {c}"), upTo); err != nil {
			return err
		}
		// What it passed: the ids a row may still appear in, late.
		_, err = tx.ExecContext(ctx, t.sql("UPDATE {gaps} SET hi = ?, passed_at = UTC_TIMESTAMP(6) WHERE consumer_id = {c} AND lo = ?"), upTo, h.at)
		passed = err == nil
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	if passed {
		return gapPassed, 0, nil
	}
	return gapFilled, 0, nil
}

// probeGap asks, without waiting, whether a transaction holds a row in
// hole h: gapHeld if one does, gapFilled if rows committed there
// meanwhile, gapAging if there is nothing. It runs in a READ COMMITTED
// transaction of its own, rolled back: under REPEATABLE READ the read
// would lock the gap against inserts, and a failed lock may end the
// transaction it is in (innodb_rollback_on_timeout).
func probeGap(ctx context.Context, db *sql.DB, t *target, h hole) (gapVerdict, error) {
	tx, err := db.BeginTx(ctx, readCommitted)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	ids, err := column[uint64](ctx, tx, t.render("SELECT id FROM {outbox} WHERE id >= ? AND id < ? FOR UPDATE NOWAIT", h.at, h.next))
	switch {
	case err != nil && isLockNotGranted(err):
		return gapHeld, nil
	case err != nil:
		return 0, err
	case len(ids) > 0:
		return gapFilled, nil
	}
	return gapAging, nil
}

// isLockNotGranted reports a locking read that did not get its lock:
// MariaDB answers NOWAIT with error 1205 (lock wait timeout), MySQL with
// 3572 (ER_LOCK_NOWAIT).
func isLockNotGranted(err error) bool { return mysqlerr.Classify(err) == mysqlerr.LockWait }

// lateWindow is how long after a consumer passed a hole its claims look
// for rows that appear in it (lateArrivals).
func lateWindow(gapTimeout time.Duration) time.Duration { return max(10*gapTimeout, time.Minute) }

// lateArrivals gives a state row, due at once, to every message that
// appeared in a hole t's consumer passed within window (and that it has
// no state row for): the insert was stalled between taking its id and
// putting its row in the table for longer than GapTimeout. It returns
// how many it found.
func lateArrivals(ctx context.Context, db *sql.DB, t *target, window time.Duration) (int, error) {
	late, err := column2(ctx, db, t.render(`SELECT o.id, o.event_key FROM {gaps} g
JOIN {outbox} o ON o.id >= g.lo AND o.id <= g.hi
LEFT JOIN {state} s FORCE INDEX ({primary}) ON s.consumer_id = {c} AND s.id = o.id
WHERE g.consumer_id = {c} AND g.passed_at > UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND AND s.id IS NULL`, window.Microseconds()))
	if err != nil || len(late) == 0 {
		return 0, err
	}
	if _, err := dueStateRowsSQL(t, late).exec(ctx, db); err != nil {
		return 0, err
	}
	return len(late), nil
}

// netEvery is how often a consumer's claims look for late arrivals.
const netEvery = time.Second

// lookForLateArrivals runs lateArrivals for t's consumer when the
// channel's claims have not for netEvery.
func (s *channel) lookForLateArrivals(ctx context.Context, t *target) error {
	now := time.Now().UnixNano()
	last := s.netAt.Load()
	if now-last < int64(netEvery) || !s.netAt.CompareAndSwap(last, now) {
		return nil
	}
	n, err := lateArrivals(ctx, s.db, t, lateWindow(s.gapTimeout))
	s.late.Add(int64(n))
	return err
}

// LateArrivals returns how many messages this consumer's claims found
// in a hole of the log after they had passed it (see Options.GapTimeout)
// since the store was made: each was delivered, late, and perhaps after
// a later message of its key.
func (s *channel) LateArrivals() int64 { return s.late.Load() }
