package mysql

// The operator contract (backend.Queue), shared by the Store (the
// default consumer) and every ConsumerStore, and retention.

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/internal/storecore"
)

// ListFilter selects records for List (see backend.ListFilter).
type ListFilter = backend.ListFilter

// DeadFilter selects dead letters (see backend.DeadFilter).
type DeadFilter = backend.DeadFilter

// RequeueOptions bounds RequeueDead (see backend.RequeueOptions).
type RequeueOptions = backend.RequeueOptions

// Defaults and bounds of RequeueOptions (backend's).
const (
	DefaultRequeueBatch = backend.DefaultRequeueBatch
	MaxRequeueBatch     = backend.MaxRequeueBatch
)

// ErrNotDead is returned by Requeue for a record that exists but is not
// dead (backend.ErrNotDead).
var ErrNotDead = backend.ErrNotDead

// position is what an operator's read needs of the consumer's registry
// row: where its walk is, where it started, and the held list.
func (s *channel) position(ctx context.Context, t *target) (consumerRow, error) {
	var (
		c    consumerRow
		held []byte
	)
	if err := s.db.QueryRowContext(ctx, t.sql("SELECT walked, start_seq, held FROM {consumers} WHERE id = {c}")).Scan(&c.walked, &c.startSeq, &held); err != nil {
		return c, err
	}
	var err error
	c.held, err = unpackIDs(held)
	return c, err
}

// at resolves the consumer and reads its position, for an operator's
// read (op, in its errors).
func (s *channel) at(ctx context.Context, op string) (*target, consumerRow, error) {
	t, err := s.resolve(ctx)
	if err != nil {
		return nil, consumerRow{}, err
	}
	c, err := s.position(ctx, t)
	if err != nil {
		return nil, consumerRow{}, s.wrap(op, err)
	}
	return t, c, nil
}

// pendingSQL lists the consumer's pending records as (id, leased,
// event_type, created_at): messages past its walk (less those their
// writer delivered), those of its live ranges, its pending state rows,
// and those its walk passed while their writer held them (and still
// does; {list} is the held list, 0 when empty). A message with a state
// row is counted by it alone. Arguments: walked, start_seq, start_seq,
// the held ids. The messages past the walk are read by the primary key
// from the position on, and those of a range from the range's start,
// whatever the log behind them holds.
const pendingSQL = `SELECT o.id, 0 AS leased, o.event_type, o.created_at FROM {outbox} o
	LEFT JOIN {state} s FORCE INDEX ({primary}) ON s.consumer_id = {c} AND s.id = o.id
	WHERE o.id > ? AND o.id > ? AND s.id IS NULL AND NOT ({c} = 0 AND ` + byWriter + `)
UNION ALL SELECT o.id, r.lease_until > UTC_TIMESTAMP(6), o.event_type, o.created_at FROM {ranges} r
	JOIN {outbox} o ON o.id > r.from_id AND o.id <= r.to_id
	LEFT JOIN {state} s FORCE INDEX ({primary}) ON s.consumer_id = {c} AND s.id = o.id
	WHERE r.consumer_id = {c} AND o.id > ? AND s.id IS NULL AND NOT ({c} = 0 AND ` + byWriter + `) AND o.id NOT IN ({list})
UNION ALL SELECT s.id, s.lease_token <> 0 AND s.next_attempt_at > UTC_TIMESTAMP(6), o.event_type, o.created_at
	FROM {state} s JOIN {outbox} o ON o.id = s.id
	WHERE s.consumer_id = {c} AND s.status = 'pending'
UNION ALL SELECT o.id, 0, o.event_type, o.created_at FROM {outbox} o
	LEFT JOIN {state} s FORCE INDEX ({primary}) ON s.consumer_id = {c} AND s.id = o.id
	WHERE o.id IN ({list}) AND o.writer_until <> ` + noTime + ` AND s.id IS NULL`

// pending renders pendingSQL (within text, at {pending}) for c.
func pending(t *target, text string, c consumerRow, args ...any) statement {
	held := c.held
	if len(held) == 0 {
		held = []uint64{0}
	}
	list := strings.Repeat(", ?", len(held))[2:]
	q := strings.Replace(t.sql(text), "{pending}", strings.ReplaceAll(t.sql(pendingSQL), "{list}", list), 1)
	h := anyArgs(held)
	all := append([]any{c.walked, c.startSeq, c.startSeq}, h...)
	all = append(all, h...)
	return statement{text: q, args: append(all, args...)}
}

// statsSQL counts the consumer's pending records and dead letters by
// status and type, with those leased and the age of the oldest.
const statsSQL = `SELECT p.status, p.event_type, COUNT(*), COALESCE(SUM(p.leased), 0),
	COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(p.created_at), UTC_TIMESTAMP(6)), 0)
FROM (SELECT pp.id, pp.leased, pp.event_type, pp.created_at, 'pending' AS status FROM ({pending}) pp
	UNION ALL SELECT s.id, 0, o.event_type, o.created_at, 'dead' FROM {state} s JOIN {outbox} o ON o.id = s.id
	WHERE s.consumer_id = {c} AND s.status = 'dead') p
GROUP BY p.status, p.event_type`

// Stats reports the consumer's backlog: pending records (and of them
// those a worker's lease holds now), dead letters, the age of the
// oldest pending record, by the database clock, and both counts by
// type. It reads the backlog (what is past the walk, in ranges or in
// state rows), never the delivered history.
func (s *channel) Stats(ctx context.Context) (backend.Stats, error) {
	t, c, err := s.at(ctx, "stats")
	if err != nil {
		return backend.Stats{}, err
	}
	st := pending(t, statsSQL, c)
	return storecore.Stats(ctx, s.db, s.wrapper("stats"), st.text, st.args...)
}

// recordStatus is the status of message o for the consumer ({c}, its
// state row s): the state row's (as text: in a CASE with text, MariaDB
// sends an ENUM's index in the binary protocol of prepared statements);
// or else published by its writer (consumer 0); pending past the
// position or on the held list ({held}), both as read before (the
// argument, and records' held list: a walk that moved the position since
// has put what it passed on the held list, in a range or in a state
// row, never only behind the position), or in a live range; published
// before it.
const recordStatus = `CASE
	WHEN s.status IS NOT NULL THEN CAST(s.status AS CHAR)
	WHEN {c} = 0 AND ` + byWriter + ` THEN 'published'
	WHEN o.id > ? OR o.id IN ({held}) THEN 'pending'
	WHEN EXISTS (SELECT 1 FROM {ranges} r WHERE r.consumer_id = {c} AND o.id > r.from_id AND o.id <= r.to_id) THEN 'pending'
	ELSE 'published' END`

// recordsSQL is the consumer's records: every message it is to get, with
// its delivery state, in recordColumns' order (see scanRecord), and the
// status again as st. Alias o is the message, s its state row.
const recordsSQL = `SELECT o.id, o.event_id, o.event_key, o.event_type, o.payload, o.headers, o.occurred_at, o.created_at,
	` + recordStatus + ` AS st, COALESCE(s.retry_count, 0), NULLIF(s.last_error, ''),
	COALESCE(s.next_attempt_at, IF({c} = 0 AND o.writer_until > o.created_at, o.writer_until, o.created_at)),
	IF(s.status = 'published', s.finished_at, NULL)
FROM {outbox} o
JOIN {consumers} c ON c.id = {c} AND o.id > c.start_seq
LEFT JOIN {state} s FORCE INDEX ({primary}) ON s.consumer_id = {c} AND s.id = o.id`

// records renders recordsSQL followed by rest, with the position and
// the held list of registry row c, and args.
func records(t *target, c consumerRow, rest string, args ...any) statement {
	held := c.held
	if len(held) == 0 {
		held = []uint64{0}
	}
	q := strings.Replace(t.sql(recordsSQL+rest), "{held}", strings.Repeat(", ?", len(held))[2:], 1)
	return statement{text: q, args: append(append([]any{c.walked}, anyArgs(held)...), args...)}
}

// get reads the consumer's record of message id.
func (s *channel) get(ctx context.Context, id string) (outbox.Record, error) {
	t, c, err := s.at(ctx, "get")
	if err != nil {
		return outbox.Record{}, err
	}
	rows, err := readRows(ctx, s.db, records(t, c, " WHERE o.event_id = ? AND "+strings.Replace(exactID, "event_id", "o.event_id", 1), id, id))
	if err != nil {
		return outbox.Record{}, s.wrap("get", err)
	}
	return storecore.Found(s.what, id, rows, scannedRecord.record)
}

// exactID is the condition, after one on event_id that the index serves,
// that the ID is exactly its argument: event_id compares with PAD SPACE,
// where "x" equals "x " (Enqueue refuses IDs that end in a space, but a
// lookup may name one). event_type filters compare as binary for the
// same reason, and event_key is binary already.
const exactID = "CAST(event_id AS BINARY) = ?"

// filters writes the conditions of the operators' filters: type and
// key compare as binary (event_type compares with PAD SPACE, where "T" =
// "T "; event_key is binary already), and the last error matches a LIKE
// pattern.
var filters = storecore.FilterDialect{
	Type:          "CAST(o.event_type AS BINARY) = ?",
	Key:           "o.event_key = ?",
	Exact:         func(v string) any { return v },
	OlderThan:     "o.created_at <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND",
	ErrorContains: "s.last_error LIKE ? ESCAPE '!'",
	Contains:      func(v string) any { return "%" + escapeLike(v) + "%" },
	MinAttempts:   "COALESCE(s.retry_count, 0) >= ?",
}

// escapeLike makes s match itself in a LIKE pattern with ESCAPE '!' (not
// a backslash, whose meaning in SQL strings depends on the sql_mode).
func escapeLike(s string) string {
	return strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(s)
}

// List returns a page of the consumer's records that match f, in Seq
// order; pass the last one's Seq as the next AfterSeq. It pages by Seq,
// never by OFFSET. Records that cannot be decoded are listed with the
// fields that could be read. A filter on a status of failed records
// (dead, MinAttempts, ErrorContains) reads the state rows only; pending
// the backlog only.
func (s *channel) List(ctx context.Context, f ListFilter) ([]outbox.Record, error) {
	fl, err := filters.List(s.what, f)
	if err != nil {
		return nil, err
	}
	t, c, err := s.at(ctx, "list")
	if err != nil {
		return nil, err
	}
	rest := " WHERE o.id > ?" + fl.Where()
	args := append([]any{f.AfterSeq}, fl.Args...)
	var st statement
	switch {
	case f.Status == outbox.StatusPending:
		// The backlog's ids first: pending is what they are.
		ids, err := column[uint64](ctx, s.db, pending(t, "SELECT p.id FROM ({pending}) p WHERE p.id > ? ORDER BY p.id LIMIT "+strconv.Itoa(f.Limit), c, f.AfterSeq))
		if err != nil {
			return nil, s.wrap("list", err)
		}
		if len(ids) == 0 {
			return nil, nil
		}
		st = records(t, c, rest+" AND o.id IN ("+strings.Repeat(", ?", len(ids))[2:]+") ORDER BY o.id", append(args, anyArgs(ids)...)...)
	case storecore.StateRowsOnly(f):
		// Dead letters and failed records have state rows: read only those.
		rest += " AND s.id IS NOT NULL"
		if f.Status != "" {
			rest += " HAVING st = ?"
			args = append(args, string(f.Status))
		}
		st = records(t, c, rest+" ORDER BY o.id LIMIT "+strconv.Itoa(f.Limit), args...)
	case f.Status != "":
		st = records(t, c, rest+" HAVING st = ? ORDER BY o.id LIMIT "+strconv.Itoa(f.Limit), append(args, string(f.Status))...)
	default:
		st = records(t, c, rest+" ORDER BY o.id LIMIT "+strconv.Itoa(f.Limit), args...)
	}
	rows, err := readRows(ctx, s.db, st)
	if err != nil {
		return nil, s.wrap("list", err)
	}
	return storecore.Records(rows, func(r scannedRecord) outbox.Record { return r.rec }), nil
}

// LastSeq returns the Seq of the last message written to the table (0 for
// none): the count of messages written grows by its difference, which
// tools turn into a rate of writes. Writes that rolled back leave gaps,
// so the difference can be more than what was written.
func (s *Store) LastSeq(ctx context.Context) (int64, error) {
	return storecore.One[int64](ctx, s.db, s.wrapper("last seq"), s.t.sql("SELECT COALESCE(MAX(id), 0) FROM {outbox}"))
}

// requeueSQL gives the consumer's dead letters ({list} of ids) a fresh
// start: pending, attempts 0, due at once.
const requeueSQL = `UPDATE {state} SET status = 'pending', retry_count = 0, next_attempt_at = UTC_TIMESTAMP(6), lease_token = 0,
	finished_at = ` + noTime + `
WHERE consumer_id = {c} AND status = 'dead' AND id IN ({list})`

// Requeue gives the dead letter with message ID id a fresh start: status
// pending, attempts 0, due at once. Its last error stays until the next
// attempt. In ordering mode it is its key's oldest pending record again,
// so later messages of the key wait until it is delivered; the ones
// delivered while it was dead went before it. It returns an error
// wrapping outbox.ErrNotFound if there is no such record, and ErrNotDead
// if it is not dead (nothing is changed).
func (s *channel) Requeue(ctx context.Context, id string) error {
	t, err := s.resolve(ctx)
	if err != nil {
		return err
	}
	var n int64
	err = retryTransient(ctx, func() error {
		var err error
		n, err = execRequeue(ctx, s, t, "SELECT s.id FROM {state} s JOIN {outbox} o ON o.id = s.id WHERE s.consumer_id = {c} AND s.status = 'dead' AND o.event_id = ? AND "+strings.Replace(exactID, "event_id", "o.event_id", 1)+" FOR UPDATE", id, id)
		return err
	})
	if err != nil {
		return s.wrap("requeue", err)
	}
	return storecore.Requeued(ctx, s.what, id, n, s.get)
}

// execRequeue locks the dead letters sel selects and requeues them, in
// one transaction, and returns how many.
func execRequeue(ctx context.Context, s *channel, t *target, sel string, args ...any) (int64, error) {
	var n int64
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		ids, err := column[uint64](ctx, tx, t.render(sel, args...))
		if err != nil || len(ids) == 0 {
			return err
		}
		n, err = t.renderList(requeueSQL, len(ids), anyArgs(ids)...).exec(ctx, tx)
		return err
	})
	return n, err
}

// CountDead counts the dead letters that match f: a dry run of
// RequeueDead.
func (s *channel) CountDead(ctx context.Context, f DeadFilter) (int, error) {
	t, err := s.resolve(ctx)
	if err != nil {
		return 0, err
	}
	fl := filters.Dead(f)
	return storecore.One[int](ctx, s.db, s.wrapper("count dead"), t.sql("SELECT COUNT(*) FROM {state} s JOIN {outbox} o ON o.id = s.id WHERE s.consumer_id = {c} AND s.status = 'dead'"+fl.Where()), fl.Args...)
}

// RequeueDead requeues the dead letters that match f, as Requeue does
// one, in transactions of at most opts.BatchSize records each, oldest
// first, and returns how many. It stops at the first error, having
// committed the batches before it.
func (s *channel) RequeueDead(ctx context.Context, f DeadFilter, opts RequeueOptions) (int, error) {
	opts, err := opts.WithDefaults()
	if err != nil {
		return 0, fmt.Errorf("%s: requeue: %w", s.what, err)
	}
	t, err := s.resolve(ctx)
	if err != nil {
		return 0, err
	}
	fl := filters.Dead(f)
	return storecore.RequeueInSteps(opts, func(step int) (int, error) {
		var n int64
		err := retryTransient(ctx, func() error {
			var err error
			n, err = execRequeue(ctx, s, t, "SELECT s.id FROM {state} s JOIN {outbox} o ON o.id = s.id WHERE s.consumer_id = {c} AND s.status = 'dead'"+
				fl.Where()+" ORDER BY s.id LIMIT "+strconv.Itoa(step)+" FOR UPDATE SKIP LOCKED", fl.Args...)
			return err
		})
		if err != nil {
			return int(n), s.wrap("requeue", err)
		}
		return int(n), nil
	})
}

// purgeableSQL is the condition of a message o that retention may
// delete: written at least ? µs ago, not the last message of the log
// (the AUTO_INCREMENT counter may go back to the highest id after a
// crash, LOG-DESIGN.md), and finished for every consumer that is not
// being removed. Finished for consumer c: a final state row; or no state
// row, and delivered by its writer (the default consumer), or behind c's
// walk, out of its live ranges and its held list. (The held list is
// searched as bytes: a match at an offset that is not a multiple of 8
// keeps the message, which errs on the side of keeping it.)
const purgeableSQL = `o.created_at <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
	AND o.id < (SELECT MAX(m.id) FROM {outbox} m)
	AND NOT EXISTS (SELECT 1 FROM {consumers} c WHERE c.removing = 0 AND o.id > c.start_seq AND NOT (
		EXISTS (SELECT 1 FROM {state} x WHERE x.consumer_id = c.id AND x.id = o.id AND x.status IN ({finished}))
		OR (NOT EXISTS (SELECT 1 FROM {state} x WHERE x.consumer_id = c.id AND x.id = o.id) AND (
			(c.id = 0 AND ` + byWriter + `)
			OR (o.id <= c.walked AND LOCATE(UNHEX(LPAD(HEX(o.id), 16, '0')), c.held) = 0
				AND NOT EXISTS (SELECT 1 FROM {ranges} r WHERE r.consumer_id = c.id AND o.id > r.from_id AND o.id <= r.to_id))))))`

// PurgePublished deletes up to limit messages that every consumer has
// finished with and that were written longer ago than olderThan
// (retention), oldest first, and returns how many. Finished means, for
// each consumer, published (or, with Options.PurgeDead, dead) by its
// state row, or else behind its walk and out of its live ranges (or
// delivered by its writer). A message's state rows go with it. It walks
// the log from where the last call stopped (the messages it kept, such
// as dead letters or a slow consumer's, are not read again by every
// call) and never reads past the first message too young to go. It locks
// the messages and their state rows, and decides on what it reads once
// they are locked: a requeue in progress keeps its dead letter.
func (s *Store) PurgePublished(ctx context.Context, olderThan time.Duration, limit int) (int, error) {
	if olderThan <= 0 || limit < 1 || limit > outbox.MaxBatchSize {
		return 0, fmt.Errorf("mysql store: purge: older than %v, limit %d: want a positive age and a limit of 1 to %d", olderThan, limit, outbox.MaxBatchSize)
	}
	deleted := 0
	for range maxPurgeWindows {
		n, swept, err := s.purgeWindow(ctx, olderThan, limit-deleted)
		deleted += n
		if err != nil {
			return deleted, s.wrap("purge", err)
		}
		if swept || deleted >= limit {
			break
		}
	}
	return deleted, nil
}

// maxPurgeWindows bounds the windows one PurgePublished call reads.
const maxPurgeWindows = 64

// purgeWindow reads the next window of up to 4×limit messages of the
// log old enough to go, from the sweep's cursor, and deletes up to
// limit of them that may go. swept says the window reached the young
// end of the log (the cursor starts over).
func (s *Store) purgeWindow(ctx context.Context, olderThan time.Duration, limit int) (deleted int, swept bool, err error) {
	s.purgeMu.Lock()
	from := s.purgeCursor
	s.purgeMu.Unlock()
	window := 4 * limit
	var next uint64
	err = retryTransient(ctx, func() error {
		deleted, next, swept = 0, from, false
		return inTx(ctx, s.db, func(tx *sql.Tx) error {
			ids, err := column[uint64](ctx, tx, s.t.render(`SELECT id FROM {outbox} WHERE id > ? AND created_at <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
ORDER BY id LIMIT `+strconv.Itoa(window), from, olderThan.Microseconds()))
			if err != nil {
				return err
			}
			swept = len(ids) < window
			if len(ids) == 0 {
				return nil
			}
			next = ids[len(ids)-1]
			// Lock them and their state rows, then decide. A message a
			// settle holds is waited for (briefly), not passed over until
			// the sweep comes round again.
			locked, err := column[uint64](ctx, tx, s.t.renderList("SELECT id FROM {outbox} WHERE id IN ({list}) FOR UPDATE", len(ids), anyArgs(ids)...))
			if err != nil || len(locked) == 0 {
				return err
			}
			if _, err := column[uint64](ctx, tx, s.t.renderList("SELECT id FROM {state} WHERE id IN ({list}) FOR UPDATE", len(locked), anyArgs(locked)...)); err != nil {
				return err
			}
			victims, err := column[uint64](ctx, tx, s.t.renderList("SELECT o.id FROM {outbox} o WHERE o.id IN ({list}) AND "+purgeableSQL+" ORDER BY o.id LIMIT "+strconv.Itoa(limit),
				len(locked), append(anyArgs(locked), olderThan.Microseconds())...))
			if err != nil || len(victims) == 0 {
				return err
			}
			if len(victims) == limit {
				next = victims[len(victims)-1]
				swept = false
			}
			if _, err := s.t.renderList("DELETE FROM {state} WHERE id IN ({list})", len(victims), anyArgs(victims)...).exec(ctx, tx); err != nil {
				return err
			}
			n, err := s.t.renderList("DELETE FROM {outbox} WHERE id IN ({list})", len(victims), anyArgs(victims)...).exec(ctx, tx)
			deleted = int(n)
			return err
		})
	})
	if err != nil {
		return 0, false, err
	}
	s.purgeMu.Lock()
	if swept {
		s.purgeCursor = 0
	} else {
		s.purgeCursor = next
	}
	s.purgeMu.Unlock()
	if swept {
		err = s.purgeGaps(ctx)
	}
	return deleted, swept, err
}

// purgeGaps deletes the consumers' records of holes they passed long
// enough ago that no row appears in them any more (lateArrivals' window).
func (s *Store) purgeGaps(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, s.t.sql("DELETE FROM {gaps} WHERE passed_at <> "+noTime+" AND passed_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND LIMIT 1000"),
		lateWindow(s.gapTimeout).Microseconds())
	return err
}

// PurgeAll deletes every message PurgePublished would, now: one whole
// sweep over the log, in windows of batch messages (one short
// transaction each, pause apart when they deleted something). It returns
// how many it deleted. For operators and tools; workers use
// PurgePublished, which bounds each call.
func (s *Store) PurgeAll(ctx context.Context, olderThan time.Duration, batch int, pause time.Duration) (int, error) {
	if olderThan <= 0 || batch < 1 || batch > outbox.MaxBatchSize {
		return 0, fmt.Errorf("mysql store: purge: older than %v, batch %d: want a positive age and a batch of 1 to %d", olderThan, batch, outbox.MaxBatchSize)
	}
	s.purgeMu.Lock()
	s.purgeCursor = 0 // from the oldest
	s.purgeMu.Unlock()
	deleted := 0
	for {
		n, swept, err := s.purgeWindow(ctx, olderThan, batch)
		deleted += n
		if err != nil {
			return deleted, s.wrap("purge", err)
		}
		if swept {
			return deleted, nil
		}
		if n > 0 && pause > 0 {
			select {
			case <-ctx.Done():
				return deleted, s.wrap("purge", ctx.Err())
			case <-time.After(pause):
			}
		}
	}
}

// CountPurgeable counts the messages PurgePublished would delete now
// (it reads every message old enough: for operators).
func (s *Store) CountPurgeable(ctx context.Context, olderThan time.Duration) (int, error) {
	if olderThan <= 0 {
		return 0, fmt.Errorf("mysql store: count purgeable: older than %v: want a positive age", olderThan)
	}
	return storecore.One[int](ctx, s.db, s.wrapper("count purgeable"), s.t.sql("SELECT COUNT(*) FROM {outbox} o WHERE "+purgeableSQL), olderThan.Microseconds())
}
