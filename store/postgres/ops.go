package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/internal/storecore"
)

// The operator contract (backend.Queue), shared by the Store (the
// default consumer) and every ConsumerStore.

// pendingSQL lists the consumer's ({c}) pending records, as (seq,
// leased, event_type, created_at): messages past its walk (less those
// its writer delivered), those of its live ranges, its pending state
// rows, and those its walk passed while their writer held them (and
// still does). A message with a state row is counted by it alone. The
// messages past the walk are read by the (xid, seq) index from the
// position on, and those of a range by the index from the range's
// start, whatever the log behind them holds (OFFSET 0 keeps the planner
// from reading the whole table in seq order instead:
// TestStatsReadsTheBacklogOnly).
const pendingSQL = `SELECT o.seq, false AS leased, o.event_type, o.created_at FROM (
		SELECT * FROM {outbox} o WHERE (o.xid, o.seq) > ((SELECT walked_xid FROM {consumers} WHERE id = {c}), (SELECT walked_seq FROM {consumers} WHERE id = {c}))
		OFFSET 0) o
	WHERE o.seq > (SELECT start_seq FROM {consumers} WHERE id = {c})
		AND NOT ({c} = 0 AND o.writer_token <> 0 AND o.writer_until IS NULL)
		AND NOT EXISTS (SELECT 1 FROM {state} s WHERE s.consumer_id = {c} AND s.seq = o.seq)
UNION ALL SELECT o.seq, r.lease_until > statement_timestamp(), o.event_type, o.created_at FROM {ranges} r
	CROSS JOIN LATERAL (SELECT * FROM {outbox} o
		WHERE (o.xid, o.seq) > (r.from_xid, r.from_seq) AND (o.xid, o.seq) <= (r.to_xid, r.to_seq) OFFSET 0) o
	WHERE r.consumer_id = {c} AND o.seq > (SELECT start_seq FROM {consumers} WHERE id = {c})
		AND NOT EXISTS (SELECT 1 FROM {state} s WHERE s.consumer_id = {c} AND s.seq = o.seq)
UNION ALL SELECT s.seq, s.lease_token > 0 AND s.next_attempt_at > statement_timestamp(), o.event_type, o.created_at
	FROM {state} s JOIN {outbox} o ON o.seq = s.seq
	WHERE s.consumer_id = {c} AND s.status = 'pending'
UNION ALL SELECT h.seq, false, o.event_type, o.created_at FROM {consumers} c, unnest(c.held) AS h(seq)
	JOIN {outbox} o ON o.seq = h.seq AND o.writer_until IS NOT NULL
	WHERE c.id = {c} AND NOT EXISTS (SELECT 1 FROM {state} s WHERE s.consumer_id = {c} AND s.seq = h.seq)`

// statsSQL counts the consumer's pending records and dead letters by
// status and type, with those leased and the age of the oldest.
const statsSQL = `SELECT p.status, p.event_type, count(*), count(*) FILTER (WHERE p.leased),
	coalesce((extract(epoch FROM statement_timestamp() - min(p.created_at)) * 1000000)::bigint, 0)
FROM (SELECT seq, leased, event_type, created_at, 'pending' AS status FROM (` + pendingSQL + `) pp
	UNION ALL SELECT s.seq, false, o.event_type, o.created_at, 'dead' FROM {state} s JOIN {outbox} o ON o.seq = s.seq
	WHERE s.consumer_id = {c} AND s.status = 'dead') p
GROUP BY p.status, p.event_type`

// Stats reports the consumer's backlog: pending records (and of them
// those a worker's lease holds now), dead letters, and the age of the
// oldest pending record, by the database clock.
func (c *channel) Stats(ctx context.Context) (backend.Stats, error) {
	t, err := c.resolve(ctx)
	if err != nil {
		return backend.Stats{}, err
	}
	return storecore.Stats(ctx, c.db, c.wrapper("stats"), t.render(statsSQL))
}

// recordsSQL is the consumer's ({c}) records, every message it is to
// get with its delivery state: a state row's, or else published by its
// writer (consumer 0), pending past the walk or in a live range, and
// published before it. Alias o is the message, s its state row, v.status
// the record's status.
const recordsSQL = `SELECT o.seq, o.event_id, o.event_key, o.event_type, o.payload, o.headers, o.occurred_at, o.created_at,
	v.status, coalesce(s.retry_count, 0), coalesce(s.last_error, ''),
	coalesce(s.next_attempt_at, CASE WHEN {c} = 0 AND o.writer_until > o.created_at THEN o.writer_until ELSE o.created_at END),
	s.finished_at
FROM {outbox} o
JOIN {consumers} c ON c.id = {c} AND o.seq > c.start_seq
LEFT JOIN {state} s ON s.consumer_id = {c} AND s.seq = o.seq
CROSS JOIN LATERAL (SELECT CASE
	WHEN s.status IS NOT NULL THEN s.status
	WHEN {c} = 0 AND o.writer_token <> 0 AND o.writer_until IS NULL THEN 'published'
	WHEN (o.xid, o.seq) > (c.walked_xid, c.walked_seq) OR o.seq = ANY(c.held) THEN 'pending'
	WHEN EXISTS (SELECT 1 FROM {ranges} r WHERE r.consumer_id = {c}
		AND (o.xid, o.seq) > (r.from_xid, r.from_seq) AND (o.xid, o.seq) <= (r.to_xid, r.to_seq)) THEN 'pending'
	ELSE 'published' END AS status) v`

// filters writes the conditions of the operators' filters: type and
// key compare as bytes, and the last error contains the text as the
// store keeps it (storedText).
var filters = storecore.FilterDialect{
	Numbered:      true,
	Type:          "o.event_type = $?::bytea",
	Key:           "o.event_key = $?::bytea",
	Exact:         func(v string) any { return []byte(v) },
	OlderThan:     "o.created_at <= statement_timestamp() - $? * interval '1 microsecond'",
	ErrorContains: "strpos(coalesce(s.last_error, ''), $?) > 0",
	Contains:      func(v string) any { return storedText(v, 4096) },
	Status:        "v.status = $?",
	MinAttempts:   "coalesce(s.retry_count, 0) >= $?",
}

// List returns a page of the consumer's records that match f, in Seq
// order (keyset paging on the primary key, no OFFSET).
func (c *channel) List(ctx context.Context, f backend.ListFilter) ([]outbox.Record, error) {
	fl, err := filters.List(c.what, f)
	if err != nil {
		return nil, err
	}
	t, err := c.resolve(ctx)
	if err != nil {
		return nil, err
	}
	fl.Add("o.seq > $?", f.AfterSeq)
	// Dead letters and failed records have state rows: read only those.
	from := ""
	if storecore.StateRowsOnly(f) {
		from = " AND o.seq IN (SELECT x.seq FROM {state} x WHERE x.consumer_id = {c})"
	}
	if f.Status == outbox.StatusPending {
		from = " AND o.seq IN (SELECT seq FROM (" + pendingSQL + ") p)"
	}
	args := append(fl.Args, f.Limit)
	q := t.render(recordsSQL + " WHERE TRUE" + from + fl.Where() + " ORDER BY o.seq LIMIT $" + strconv.Itoa(len(args)))
	rows, err := queryRecords(ctx, c.db, q, args...)
	if err != nil {
		return nil, c.wrap("list", err)
	}
	return storecore.Records(rows, func(r scanned) outbox.Record { return r.rec }), nil
}

// ErrNotDead is returned by Requeue for a record that exists but is not
// dead (backend.ErrNotDead), as store/mysql's is.
var ErrNotDead = backend.ErrNotDead

// Requeue gives the dead letter id a fresh start: pending, attempts 0,
// due at once. An error wrapping outbox.ErrNotFound if there is no such
// record, ErrNotDead if it is not dead.
func (c *channel) Requeue(ctx context.Context, id string) error {
	t, err := c.resolve(ctx)
	if err != nil {
		return err
	}
	n, err := execCount(ctx, c.db, t.render(`UPDATE {state} s SET status = 'pending', retry_count = 0,
	next_attempt_at = statement_timestamp(), lease_token = 0, finished_at = NULL
FROM {outbox} o WHERE s.consumer_id = {c} AND o.seq = s.seq AND o.event_id = $1 AND s.status = 'dead'`), id)
	if err != nil {
		return c.wrap("requeue", err)
	}
	return storecore.Requeued(ctx, c.what, id, n, c.get)
}

// CountDead counts the dead letters that match f.
func (c *channel) CountDead(ctx context.Context, f backend.DeadFilter) (int, error) {
	t, err := c.resolve(ctx)
	if err != nil {
		return 0, err
	}
	fl := filters.Dead(f)
	return storecore.One[int](ctx, c.db, c.wrapper("count dead"), t.render("SELECT count(*) FROM {state} s JOIN {outbox} o ON o.seq = s.seq WHERE s.consumer_id = {c} AND s.status = 'dead'"+fl.Where()), fl.Args...)
}

// RequeueDead requeues the dead letters that match f, in steps of at
// most opts.BatchSize records (each one statement), and returns how
// many.
func (c *channel) RequeueDead(ctx context.Context, f backend.DeadFilter, opts backend.RequeueOptions) (int, error) {
	opts, err := opts.WithDefaults()
	if err != nil {
		return 0, fmt.Errorf("%s: requeue dead: %w", c.what, safeDriverErr(err))
	}
	t, err := c.resolve(ctx)
	if err != nil {
		return 0, err
	}
	fl := filters.Dead(f)
	limitArg := len(fl.Args) + 1
	q := t.render(`UPDATE {state} s SET status = 'pending', retry_count = 0,
	next_attempt_at = statement_timestamp(), lease_token = 0, finished_at = NULL
WHERE s.consumer_id = {c} AND s.seq IN (SELECT s.seq FROM {state} s JOIN {outbox} o ON o.seq = s.seq
	WHERE s.consumer_id = {c} AND s.status = 'dead'` + fl.Where() + `
	ORDER BY s.seq LIMIT $` + strconv.Itoa(limitArg) + ` FOR UPDATE OF s SKIP LOCKED)`)
	return storecore.RequeueInSteps(opts, func(step int) (int, error) {
		n, err := execCount(ctx, c.db, q, append(append([]any{}, fl.Args...), step)...)
		if err != nil {
			return 0, c.wrap("requeue dead", err)
		}
		return int(n), nil
	})
}

// PurgePublished deletes up to limit messages that every consumer has
// finished with and that were written longer ago than olderThan
// (retention), oldest first, and returns how many. Finished means, for
// each consumer, published (or, with Options.PurgeDead, dead) by its
// state row, or else behind its walk and out of its live ranges (or
// delivered by its writer). A message's state
// rows go with it. It never races a claim: what it deletes no claim
// reads, and it locks the messages with SKIP LOCKED.
func (s *Store) PurgePublished(ctx context.Context, olderThan time.Duration, limit int) (int, error) {
	if olderThan <= 0 || limit < 1 || limit > backend.MaxClaimLimit {
		return 0, fmt.Errorf("postgres store: purge: older than %v, limit %d: want a positive age and a limit of 1 to %d", olderThan, limit, backend.MaxClaimLimit)
	}
	// The state rows of the candidates are locked too, and their status
	// read again once locked: a message one of whose rows another
	// transaction holds (a requeue of a dead letter) or changed since
	// the statement began is left for a later purge.
	n, err := execCount(ctx, s.db, s.t.render(`WITH candidates AS MATERIALIZED (
	SELECT o.seq FROM {outbox} o WHERE `+s.purgeable()+`
	ORDER BY o.created_at LIMIT $2 FOR UPDATE OF o SKIP LOCKED
), final AS MATERIALIZED (
	SELECT x.consumer_id, x.seq FROM {state} x
	WHERE x.seq IN (SELECT seq FROM candidates) AND x.status IN `+s.finished()+`
	FOR UPDATE OF x SKIP LOCKED
), victims AS MATERIALIZED (
	SELECT c.seq FROM candidates c WHERE NOT EXISTS (SELECT 1 FROM {state} x WHERE x.seq = c.seq
		AND NOT EXISTS (SELECT 1 FROM final f WHERE f.consumer_id = x.consumer_id AND f.seq = x.seq))
), gone AS (
	DELETE FROM {state} x USING victims v WHERE x.seq = v.seq
)
DELETE FROM {outbox} o USING victims v WHERE o.seq = v.seq`), olderThan.Microseconds(), limit)
	if err != nil {
		return 0, s.wrap("purge", err)
	}
	return int(n), nil
}

// purgeable is the condition of a message retention may delete; $1 is
// the age in microseconds.
func (s *Store) purgeable() string {
	finished := s.finished()
	// Finished for consumer c: a final state row; or no state row, and
	// delivered by its writer (the default consumer), or behind c's walk,
	// out of its live ranges and its held list.
	return `o.created_at <= statement_timestamp() - $1 * interval '1 microsecond'
	AND NOT EXISTS (SELECT 1 FROM {consumers} c WHERE o.seq > c.start_seq AND NOT (
		EXISTS (SELECT 1 FROM {state} x WHERE x.consumer_id = c.id AND x.seq = o.seq AND x.status IN ` + finished + `)
		OR (NOT EXISTS (SELECT 1 FROM {state} x WHERE x.consumer_id = c.id AND x.seq = o.seq) AND (
			(c.id = 0 AND o.writer_token <> 0 AND o.writer_until IS NULL)
			OR ((o.xid, o.seq) <= (c.walked_xid, c.walked_seq) AND o.seq <> ALL(c.held)
				AND NOT EXISTS (SELECT 1 FROM {ranges} r WHERE r.consumer_id = c.id
					AND (o.xid, o.seq) > (r.from_xid, r.from_seq) AND (o.xid, o.seq) <= (r.to_xid, r.to_seq)))))))`
}

// finished is the list of the statuses retention deletes: published, and
// dead with Options.PurgeDead.
func (s *Store) finished() string {
	if s.opts.PurgeDead {
		return "('published', 'dead')"
	}
	return "('published')"
}

// CountPurgeable counts the messages PurgePublished would delete.
func (s *Store) CountPurgeable(ctx context.Context, olderThan time.Duration) (int, error) {
	if olderThan <= 0 {
		return 0, fmt.Errorf("postgres store: count purgeable: older than %v: want a positive age", olderThan)
	}
	return storecore.One[int](ctx, s.db, s.wrapper("count purgeable"), s.t.render("SELECT count(*) FROM {outbox} o WHERE "+s.purgeable()), olderThan.Microseconds())
}

// PurgeAll deletes everything PurgePublished would, in batches of batch
// messages with pause between them, and returns how many.
func (s *Store) PurgeAll(ctx context.Context, olderThan time.Duration, batch int, pause time.Duration) (int, error) {
	total := 0
	for {
		n, err := s.PurgePublished(ctx, olderThan, batch)
		total += n
		if err != nil || n < batch {
			return total, err
		}
		if pause > 0 {
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return total, ctx.Err()
			case <-t.C:
			}
		}
	}
}
