package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// The operator contract (backend.Queue), shared by the Store (the
// default consumer) and every ConsumerStore.

// Stats reports the consumer's backlog: pending records (and of them
// those a worker's lease holds now), dead letters, and the age of the
// oldest pending record, by the database clock.
func (c *channel) Stats(ctx context.Context) (backend.Stats, error) {
	t, err := c.resolve(ctx)
	if err != nil {
		return backend.Stats{}, err
	}
	if t.consumerID != 0 {
		if _, err := c.s.handOver(ctx, t, handOverBatch); err != nil {
			return backend.Stats{}, c.wrap("stats: hand over", err)
		}
	}
	rows, err := c.db.QueryContext(ctx, t.render(`SELECT s.status, {m}.event_type, count(*),
	count(*) FILTER (WHERE s.lease_token > 0 AND s.next_attempt_at > statement_timestamp()),
	coalesce((extract(epoch FROM statement_timestamp() - min({m}.created_at)) * 1000000)::bigint, 0)
FROM {from} WHERE {scope}s.status IN ('pending', 'dead') GROUP BY s.status, {m}.event_type`))
	if err != nil {
		return backend.Stats{}, c.wrap("stats", err)
	}
	defer rows.Close()
	st := backend.Stats{ByType: map[string]backend.TypeStats{}}
	for rows.Next() {
		var (
			status      string
			typ         []byte
			n, leased   int
			oldestMicro int64
		)
		if err := rows.Scan(&status, &typ, &n, &leased, &oldestMicro); err != nil {
			return backend.Stats{}, c.wrap("stats", err)
		}
		ts := st.ByType[string(typ)]
		if status == string(outbox.StatusPending) {
			st.Pending += n
			st.Leased += leased
			ts.Pending += n
			st.OldestPending = max(st.OldestPending, time.Duration(oldestMicro)*time.Microsecond)
		} else {
			st.Dead += n
			ts.Dead += n
		}
		st.ByType[string(typ)] = ts
	}
	if err := rows.Err(); err != nil {
		return backend.Stats{}, c.wrap("stats", err)
	}
	return st, nil
}

// filter renders the conditions of a list or dead-letter filter.
type filter struct {
	conds []string
	args  []any
}

func (f *filter) add(cond string, arg any) {
	f.args = append(f.args, arg)
	f.conds = append(f.conds, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(f.args))))
}

func (f *filter) where() string {
	if len(f.conds) == 0 {
		return ""
	}
	return " AND " + strings.Join(f.conds, " AND ")
}

func deadFilter(f backend.DeadFilter) *filter {
	fl := &filter{}
	if f.Type != "" {
		fl.add("{m}.event_type = $?::bytea", []byte(f.Type))
	}
	if f.Key != "" {
		fl.add("{m}.event_key = $?::bytea", []byte(f.Key))
	}
	if f.OlderThan > 0 {
		fl.add("{m}.created_at <= statement_timestamp() - $? * interval '1 microsecond'", f.OlderThan.Microseconds())
	}
	if f.ErrorContains != "" {
		fl.add("strpos(s.last_error, $?) > 0", storedText(f.ErrorContains, 4096))
	}
	return fl
}

// List returns a page of the consumer's records that match f, in Seq
// order (keyset paging on the primary key, no OFFSET).
func (c *channel) List(ctx context.Context, f backend.ListFilter) ([]outbox.Record, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("%s: list: %w", c.what, safeDriverErr(err))
	}
	t, err := c.resolve(ctx)
	if err != nil {
		return nil, err
	}
	if t.consumerID != 0 {
		if _, err := c.s.handOver(ctx, t, handOverBatch); err != nil {
			return nil, c.wrap("list: hand over", err)
		}
	}
	fl := deadFilter(backend.DeadFilter{Type: f.Type, Key: f.Key, OlderThan: f.OlderThan, ErrorContains: f.ErrorContains})
	if f.Status != "" {
		fl.add("s.status = $?", string(f.Status))
	}
	if f.MinAttempts > 0 {
		fl.add("s.retry_count >= $?", f.MinAttempts)
	}
	fl.add("s.seq > $?", f.AfterSeq)
	args := append(fl.args, f.Limit)
	q := t.render("SELECT {cols} FROM {from} WHERE {scope}TRUE" + fl.where() + " ORDER BY s.seq LIMIT $" + strconv.Itoa(len(args)))
	rows, err := queryRecords(ctx, c.db, q, args...)
	if err != nil {
		return nil, c.wrap("list", err)
	}
	out := make([]outbox.Record, len(rows))
	for i, r := range rows {
		out[i] = r.rec
	}
	return out, nil
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
	res, err := c.db.ExecContext(ctx, t.render(`UPDATE {state} s SET status = 'pending', retry_count = 0,
	next_attempt_at = statement_timestamp(), lease_token = 0, finished_at = NULL
{updfromfirst} WHERE {scope}{m}.event_id = $1 AND s.status = 'dead'{updjoin}`), id)
	if err != nil {
		return c.wrap("requeue", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return c.wrap("requeue", err)
	} else if n == 1 {
		return nil
	}
	r, err := c.get(ctx, id)
	if errors.Is(err, outbox.ErrNotFound) {
		return fmt.Errorf("%s: requeue %q: %w", c.what, id, outbox.ErrNotFound)
	}
	if r.ID == "" && err != nil {
		return err
	}
	return fmt.Errorf("%s: requeue %q: status %s: %w", c.what, id, r.Status, ErrNotDead)
}

// CountDead counts the dead letters that match f.
func (c *channel) CountDead(ctx context.Context, f backend.DeadFilter) (int, error) {
	t, err := c.resolve(ctx)
	if err != nil {
		return 0, err
	}
	fl := deadFilter(f)
	var n int
	if err := c.db.QueryRowContext(ctx, t.render("SELECT count(*) FROM {from} WHERE {scope}s.status = 'dead'"+fl.where()), fl.args...).Scan(&n); err != nil {
		return 0, c.wrap("count dead", err)
	}
	return n, nil
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
	fl := deadFilter(f)
	limitArg := len(fl.args) + 1
	q := t.render(`UPDATE {state} s SET status = 'pending', retry_count = 0,
	next_attempt_at = statement_timestamp(), lease_token = 0, finished_at = NULL
WHERE {scope}s.seq IN (SELECT s.seq FROM {from} WHERE {scope}s.status = 'dead'` + fl.where() + `
	ORDER BY s.seq LIMIT $` + strconv.Itoa(limitArg) + ` FOR UPDATE OF s SKIP LOCKED)`)
	total := 0
	for {
		step := opts.BatchSize
		if opts.Limit > 0 {
			step = min(step, opts.Limit-total)
		}
		if step <= 0 {
			return total, nil
		}
		res, err := c.db.ExecContext(ctx, q, append(append([]any{}, fl.args...), step)...)
		if err != nil {
			return total, c.wrap("requeue dead", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, c.wrap("requeue dead", err)
		}
		total += int(n)
		if int(n) < step {
			return total, nil
		}
	}
}

// PurgePublished deletes up to limit messages that every consumer has
// finished with longer ago than olderThan (retention), oldest first, and
// returns how many. Finished means published by the default consumer
// (the outbox table's status) and by every named consumer that is to get
// the message, handed over to it; with Options.PurgeDead, dead counts as
// finished too. The age counts from the default consumer's finish. A
// message's named-consumer state goes with it. It never races a claim:
// it deletes only finished records, which no claim touches, and locks
// them with SKIP LOCKED, re-checking their status, so that a record a
// requeue holds is passed over.
func (s *Store) PurgePublished(ctx context.Context, olderThan time.Duration, limit int) (int, error) {
	if olderThan <= 0 || limit < 1 || limit > backend.MaxClaimLimit {
		return 0, fmt.Errorf("postgres store: purge: older than %v, limit %d: want a positive age and a limit of 1 to %d", olderThan, limit, backend.MaxClaimLimit)
	}
	res, err := s.db.ExecContext(ctx, s.t.render(`WITH victims AS (
	SELECT o.seq FROM {outbox} o WHERE `+s.purgeable()+`
	ORDER BY o.finished_at LIMIT $2 FOR UPDATE OF o SKIP LOCKED
), gone AS (
	DELETE FROM {consumption} x USING victims v WHERE x.seq = v.seq
)
DELETE FROM {outbox} o USING victims v WHERE o.seq = v.seq`), olderThan.Microseconds(), limit)
	if err != nil {
		return 0, s.wrap("purge", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, s.wrap("purge", err)
	}
	return int(n), nil
}

// purgeable is the condition of a message retention may delete; $1 is
// the age in microseconds.
func (s *Store) purgeable() string {
	finished := "('published')"
	if s.opts.PurgeDead {
		finished = "('published', 'dead')"
	}
	return `o.status IN ` + finished + ` AND o.finished_at <= statement_timestamp() - $1 * interval '1 microsecond'
	AND NOT EXISTS (SELECT 1 FROM {consumers} c WHERE o.seq > c.start_seq AND (
		(o.xid, o.seq) > (c.cursor_xid, c.cursor_seq)
		OR NOT EXISTS (SELECT 1 FROM {consumption} x WHERE x.consumer_id = c.id AND x.seq = o.seq AND x.status IN ` + finished + `)))`
}

// CountPurgeable counts the messages PurgePublished would delete.
func (s *Store) CountPurgeable(ctx context.Context, olderThan time.Duration) (int, error) {
	if olderThan <= 0 {
		return 0, fmt.Errorf("postgres store: count purgeable: older than %v: want a positive age", olderThan)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, s.t.render("SELECT count(*) FROM {outbox} o WHERE "+s.purgeable()), olderThan.Microseconds()).Scan(&n); err != nil {
		return 0, s.wrap("count purgeable", err)
	}
	return n, nil
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
