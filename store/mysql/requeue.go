package mysql

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// ErrNotDead is returned by Requeue for a record that exists but is not
// dead: only dead letters are requeued, so that a requeue can never make a
// published event go out again or disturb one in flight.
var ErrNotDead = errors.New("mysql store: record is not dead")

// Requeue gives the dead letter with message ID id a fresh start: status
// pending, retry_count 0, due at once. Its last_error stays for the
// record until the next attempt. It returns an error wrapping
// outbox.ErrNotFound if there is no such record, and ErrNotDead if it is
// not dead (nothing is changed).
//
// In ordering mode a requeued record is its key's oldest pending record
// again, so later messages of the key wait until it is delivered; the
// ones delivered while it was dead went before it.
func (s *channel) Requeue(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, s.q.requeuePrefix+" WHERE "+s.t.scope+"status = 'dead' AND event_id = ?", id)
	if err != nil {
		return s.wrap("requeue", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	rec, err := s.get(ctx, id)
	if errors.Is(err, outbox.ErrNotFound) {
		return fmt.Errorf("%s: requeue %q: %w", s.what, id, outbox.ErrNotFound)
	}
	return fmt.Errorf("%s: requeue %q: status %s: %w", s.what, id, rec.Status, ErrNotDead)
}

// DeadFilter selects dead letters. Empty fields match everything.
type DeadFilter struct {
	// Type matches event_type exactly.
	Type string
	// Key matches event_key exactly.
	Key string
	// OlderThan matches records created at least this long ago, by the
	// database clock.
	OlderThan time.Duration
	// ErrorContains matches records whose last_error contains it,
	// literally.
	ErrorContains string
}

// where returns the filter's SQL conditions and their arguments.
func (f DeadFilter) where() (string, []any) {
	conds := []string{"status = 'dead'"}
	var args []any
	if f.Type != "" {
		conds, args = append(conds, "event_type = ?"), append(args, f.Type)
	}
	if f.Key != "" {
		conds, args = append(conds, "event_key = ?"), append(args, f.Key)
	}
	if f.OlderThan > 0 {
		conds, args = append(conds, "created_at <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND"), append(args, f.OlderThan.Microseconds())
	}
	if f.ErrorContains != "" {
		conds, args = append(conds, "last_error LIKE ? ESCAPE '!'"), append(args, "%"+escapeLike(f.ErrorContains)+"%")
	}
	return strings.Join(conds, " AND "), args
}

// escapeLike makes s match itself in a LIKE pattern with ESCAPE '!' (not
// a backslash, whose meaning in SQL strings depends on the sql_mode).
func escapeLike(s string) string {
	return strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(s)
}

// Defaults of RequeueDead.
const (
	DefaultRequeueBatch = 500
	MaxRequeueBatch     = 10_000
)

// RequeueOptions bounds RequeueDead.
type RequeueOptions struct {
	// BatchSize is how many records one statement requeues, so that no
	// statement holds many row locks for long. Defaults to
	// DefaultRequeueBatch; at most MaxRequeueBatch.
	BatchSize int
	// Limit is the most records requeued in all; 0 means every match.
	Limit int
}

// RequeueDead requeues the dead letters that match f, as Requeue does
// one, in statements of at most opts.BatchSize rows each, and returns how
// many it requeued. It stops at the first error, having committed the
// batches before it.
func (s *channel) RequeueDead(ctx context.Context, f DeadFilter, opts RequeueOptions) (int, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultRequeueBatch
	}
	if opts.BatchSize > MaxRequeueBatch || opts.Limit < 0 {
		return 0, fmt.Errorf("mysql store: requeue: BatchSize %d and Limit %d: must be at most %d and not negative", opts.BatchSize, opts.Limit, MaxRequeueBatch)
	}
	where, args := f.where()
	total := 0
	for opts.Limit == 0 || total < opts.Limit {
		n := opts.BatchSize
		if opts.Limit > 0 {
			n = min(n, opts.Limit-total)
		}
		res, err := s.db.ExecContext(ctx, s.q.requeuePrefix+" WHERE "+s.t.scope+where+" LIMIT ?", append(args, n)...)
		if err != nil {
			return total, s.wrap("requeue", err)
		}
		done, _ := res.RowsAffected()
		total += int(done)
		if int(done) < n {
			break
		}
	}
	return total, nil
}

// CountDead counts the dead letters that match f: a dry run of
// RequeueDead.
func (s *channel) CountDead(ctx context.Context, f DeadFilter) (int, error) {
	where, args := f.where()
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.t.table+" WHERE "+s.t.scope+where, args...).Scan(&n); err != nil {
		return 0, s.wrap("count dead", err)
	}
	return n, nil
}
