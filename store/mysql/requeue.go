package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// ErrNotDead is returned by Requeue for a record that exists but is not
// dead (backend.ErrNotDead).
var ErrNotDead = backend.ErrNotDead

// Requeue gives the dead letter with message ID id a fresh start: status
// pending, retry_count 0, due at once. Its last_error stays for the
// record until the next attempt. It returns an error wrapping
// outbox.ErrNotFound if there is no such record, and ErrNotDead if it is
// not dead (nothing is changed).
//
// A requeued record is due at once for workers without Ordering. In
// ordering mode it is its key's oldest pending record again, so later
// messages of the key wait until it is delivered; the ones delivered
// while it was dead went before it. So that no two records of a key are
// ever in flight at once, ordered claims take it only once no record of
// its key is in flight any more: as soon as the one in flight at the
// requeue is settled (published, failed or released), or when its lease
// would have ended.
func (s *channel) Requeue(ctx context.Context, id string) error {
	n, err := s.requeue(ctx, "status = 'dead' AND event_id = ? AND "+exactID, []any{id, id}, 1)
	if err != nil {
		return s.wrap("requeue", err)
	}
	if n == 1 {
		return nil
	}
	rec, err := s.get(ctx, id)
	if errors.Is(err, outbox.ErrNotFound) {
		return fmt.Errorf("%s: requeue %q: %w", s.what, id, outbox.ErrNotFound)
	}
	return fmt.Errorf("%s: requeue %q: status %s: %w", s.what, id, rec.Status, ErrNotDead)
}

// requeue gives up to limit dead letters that match where a fresh start,
// in one short transaction, and returns how many. It locks the dead
// letters, then every pending record of their keys (waiting for claims in
// progress, and keeping new ones off until it commits), and makes each
// due now; a record whose key has a record in flight waits for it, for
// ordered claims (see Requeue), until the last live lease of its key
// would end.
func (s *channel) requeue(ctx context.Context, where string, args []any, limit int) (int, error) {
	var done int
	err := retryTransient(ctx, func() error {
		done = 0
		tx, err := s.db.BeginTx(ctx, readCommitted)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		dead, err := s.lockDead(ctx, tx, where, args, limit)
		if err != nil || len(dead) == 0 {
			return err
		}
		leaseEnds, err := s.keyLeases(ctx, tx, dead)
		if err != nil {
			return err
		}
		byWait := map[time.Time][]uint64{}
		for _, d := range dead {
			byWait[leaseEnds[d.key]] = append(byWait[leaseEnds[d.key]], d.seq)
		}
		for wait, seqs := range byWait {
			n, err := requeueSQL(s.t, wait, seqs).exec(ctx, tx)
			if err != nil {
				return err
			}
			done += int(n)
		}
		return tx.Commit()
	})
	return done, err
}

type deadLetterRow struct {
	seq uint64
	key string
}

// lockDead locks up to limit dead letters that match where, oldest first.
func (s *channel) lockDead(ctx context.Context, tx *sql.Tx, where string, args []any, limit int) ([]deadLetterRow, error) {
	rows, err := lockDeadSQL(s.t, where, args, limit).query(ctx, tx)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []deadLetterRow
	for rows.Next() {
		var d deadLetterRow
		if err := rows.Scan(&d.seq, &d.key); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// keyLeases locks the pending records of the dead letters' keys and
// returns, per key, when its last live lease ends (absent: none).
func (s *channel) keyLeases(ctx context.Context, tx *sql.Tx, dead []deadLetterRow) (map[string]time.Time, error) {
	var keys []string
	seen := map[string]bool{}
	for _, d := range dead {
		if d.key != "" && !seen[d.key] {
			seen[d.key] = true
			keys = append(keys, d.key)
		}
	}
	ends := map[string]time.Time{}
	if len(keys) == 0 {
		return ends, nil
	}
	rows, err := keyLeasesSQL(s.t, keys).query(ctx, tx)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			key    string
			end    dbTime
			leased bool
		)
		if err := rows.Scan(&key, &end, &leased); err != nil {
			return nil, err
		}
		if leased && end.t.After(ends[key]) {
			ends[key] = end.t
		}
	}
	return ends, rows.Err()
}

// DeadFilter selects dead letters (see backend.DeadFilter).
type DeadFilter = backend.DeadFilter

// deadWhere returns the filter's SQL conditions and their arguments.
func deadWhere(f DeadFilter) (string, []any) {
	conds := matchConds{conds: []string{"status = 'dead'"}}
	conds.match(f.Type, f.Key, f.ErrorContains, f.OlderThan)
	return strings.Join(conds.conds, " AND "), conds.args
}

// escapeLike makes s match itself in a LIKE pattern with ESCAPE '!' (not
// a backslash, whose meaning in SQL strings depends on the sql_mode).
func escapeLike(s string) string {
	return strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(s)
}

// Defaults and bounds of RequeueOptions (backend's).
const (
	DefaultRequeueBatch = backend.DefaultRequeueBatch
	MaxRequeueBatch     = backend.MaxRequeueBatch
)

// RequeueOptions bounds RequeueDead (see backend.RequeueOptions).
type RequeueOptions = backend.RequeueOptions

// RequeueDead requeues the dead letters that match f, as Requeue does
// one, in statements of at most opts.BatchSize rows each, and returns how
// many it requeued. It stops at the first error, having committed the
// batches before it.
func (s *channel) RequeueDead(ctx context.Context, f DeadFilter, opts RequeueOptions) (int, error) {
	opts, err := opts.WithDefaults()
	if err != nil {
		return 0, fmt.Errorf("%s: requeue: %w", s.what, err)
	}
	where, args := deadWhere(f)
	total := 0
	for opts.Limit == 0 || total < opts.Limit {
		n := opts.BatchSize
		if opts.Limit > 0 {
			n = min(n, opts.Limit-total)
		}
		done, err := s.requeue(ctx, where, args, n)
		total += done
		if err != nil {
			return total, s.wrap("requeue", err)
		}
		if done < n {
			break
		}
	}
	return total, nil
}

// CountDead counts the dead letters that match f: a dry run of
// RequeueDead.
func (s *channel) CountDead(ctx context.Context, f DeadFilter) (int, error) {
	where, args := deadWhere(f)
	var n int
	if err := countDeadSQL(s.t, where, args).queryRow(ctx, s.db).Scan(&n); err != nil {
		return 0, s.wrap("count dead", err)
	}
	return n, nil
}

// lockDeadSQL locks up to limit dead letters that match the conditions
// where, oldest first, waiting for claims and settles that hold them.
func lockDeadSQL(t *target, where string, args []any, limit int) statement {
	args = append(args[:len(args):len(args)], limit)
	return t.render("SELECT {seq}, event_key FROM {table} WHERE {scope}{filter} ORDER BY {seq} LIMIT ? FOR UPDATE", args...).withFilter(t.sql(where))
}

// keyLeasesSQL locks the pending records of keys and reads, for each,
// when its claim's lease ends and whether that lease is live.
func keyLeasesSQL(t *target, keys []string) statement {
	return t.renderList("SELECT event_key, lease_until, "+workerLeased+" AND lease_until > UTC_TIMESTAMP(6) FROM {table} WHERE {scope}status = 'pending' AND event_key IN ({list}) FOR UPDATE", len(keys), anyArgs(keys)...)
}

// requeueSQL gives dead letters a fresh start, due now. With a wait (the
// end of the last live lease of their key), they wait for the record in
// flight, for ordered claims, until then at the latest (requeueWaitID:
// see orderedUnclaimed); with none, they hold no lease.
func requeueSQL(t *target, wait time.Time, seqs []uint64) statement {
	args := make([]any, 0, len(seqs)+2)
	if wait.IsZero() {
		args = append(args, 0, formatTime(time.Unix(1, 0)))
	} else {
		args = append(args, int64(requeueWaitID), formatTime(wait))
	}
	for _, seq := range seqs {
		args = append(args, seq)
	}
	return t.renderList("UPDATE {table} SET status = 'pending', retry_count = 0, next_attempt_at = UTC_TIMESTAMP(6), lease_id = ?, lease_until = ? WHERE {scope}status = 'dead' AND {seq} IN ({list})", len(seqs), args...)
}

// countDeadSQL counts the records that match the conditions where.
func countDeadSQL(t *target, where string, args []any) statement {
	return t.render("SELECT COUNT(*) FROM {table} WHERE {scope}{filter}", args...).withFilter(t.sql(where))
}
