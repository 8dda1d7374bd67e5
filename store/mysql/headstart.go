package mysql

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

var (
	_ backend.HeadStartLeaser = (*Store)(nil)
	_ backend.HeadStartEnder  = (*Store)(nil)
	_ backend.HeadStartEnder  = (*ConsumerStore)(nil)
)

// HeadStartBatch returns, without writing anything, those of ids that
// this process enqueued with a head start and that are still pending
// under it, with at least minLeft of it to run, in insert order; the
// batch's token settles them, and left is the least head start they have
// left, on the database clock at the read. Enqueue leased them to the
// process in the writer's own transaction, so the after-commit publish
// costs one read here instead of a claim's commit. Records another claim
// has taken since (the head start ran out) are left out, as are records
// of other processes and records enqueued without a head start: claim
// those.
func (s *Store) HeadStartBatch(ctx context.Context, ids []string, minLeft time.Duration) (backend.Batch, time.Duration, error) {
	switch {
	case len(ids) == 0:
		return backend.Batch{}, 0, nil
	case len(ids) > backend.MaxClaimLimit:
		return backend.Batch{}, 0, fmt.Errorf("mysql store: head start batch: %d IDs: more than %d", len(ids), backend.MaxClaimLimit)
	case minLeft < 0:
		return backend.Batch{}, 0, errors.New("mysql store: head start batch: minLeft must not be negative")
	}
	// A head start is only on what this build enqueued, and Enqueue
	// refuses IDs that end in a space: the only ones an ID of the list
	// matches with PAD SPACE other than itself (see exactID).
	ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return strings.HasSuffix(id, " ") })
	if len(ids) == 0 {
		return backend.Batch{}, 0, nil
	}
	rows, left, err := s.readHeadStarted(ctx, ids, minLeft)
	if err != nil {
		return backend.Batch{}, 0, s.wrap("head start batch", err)
	}
	return toBatch(headStartToken, rows), left, nil
}

// readHeadStarted reads the records headStartSQL selects within the
// claim's byte budget, and the least head start they have left.
func (s *Store) readHeadStarted(ctx context.Context, ids []string, minLeft time.Duration) ([]scannedRecord, time.Duration, error) {
	var (
		leftMicros, least int64
		kept              bool
	)
	rows, err := readRowsThen(ctx, s.db, newBudget(s.maxClaimBytes), headStartSQL(s.t, ids, minLeft), []any{&leftMicros}, func() {
		if !kept || leftMicros < least {
			least, kept = leftMicros, true
		}
	})
	return rows, time.Duration(least) * time.Microsecond, err
}

// headStartSQL reads the named records this process's head start still
// holds for at least minLeft, each with the microseconds it has left. A
// plain read: the head start is the lease, and only Settle, fenced by its
// token, writes.
func headStartSQL(t *target, ids []string, minLeft time.Duration) statement {
	args := make([]any, 0, len(ids)+2)
	for _, id := range ids {
		args = append(args, id)
	}
	return t.renderList("SELECT {cols}, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), next_attempt_at) FROM {outbox} WHERE event_id IN ({list}) AND status = 'pending' AND lease_id = ? AND next_attempt_at > UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND ORDER BY id", len(ids), append(args, headStartID, minLeft.Microseconds())...)
}

// EndHeadStart makes those of ids that this process enqueued with a head
// start, and that are still pending under it, due for workers at once:
// no longer leased to the writer, next attempt now. It returns how many it
// changed.
func (s *Store) EndHeadStart(ctx context.Context, ids []string) (int, error) {
	return s.endHeadStart(ctx, ids, endHeadStartSQL)
}

// EndHeadStart makes those of ids that this consumer has been handed
// over with the head start their writer gave them (pending, never
// attempted, not leased, not yet due) due at once, handing messages over
// first as a claim does. It returns how many it changed.
func (c *ConsumerStore) EndHeadStart(ctx context.Context, ids []string) (int, error) {
	if _, err := c.parent.handOver(ctx, c.name, max(len(ids), handOverBatch)); err != nil {
		return 0, c.wrap("end head start: hand over", err)
	}
	return c.endHeadStart(ctx, ids, endInheritedHeadStartSQL)
}

func (s *channel) endHeadStart(ctx context.Context, ids []string, stmt func(*target, []string) statement) (int, error) {
	ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return strings.HasSuffix(id, " ") }) // see HeadStartBatch
	switch {
	case len(ids) == 0:
		return 0, nil
	case len(ids) > backend.MaxClaimLimit:
		return 0, fmt.Errorf("%s: end head start: %d IDs: more than %d", s.what, len(ids), backend.MaxClaimLimit)
	}
	n, err := execRetrying(ctx, s.db, stmt(s.t, ids))
	if err != nil {
		return 0, s.wrap("end head start", err)
	}
	return int(n), nil
}

// endHeadStartSQL ends this process's head start on the named records
// of the outbox table.
func endHeadStartSQL(t *target, ids []string) statement {
	return t.renderList("UPDATE {outbox} SET next_attempt_at = UTC_TIMESTAMP(6), lease_id = 0 WHERE event_id IN ({list}) AND status = 'pending' AND lease_id = ?", len(ids), append(anyArgs(ids), headStartID)...)
}

// endInheritedHeadStartSQL ends the head start a named consumer's records
// inherited from the outbox table at hand-over (see handOverSQL).
func endInheritedHeadStartSQL(t *target, ids []string) statement {
	return t.renderList("UPDATE {table} SET next_attempt_at = UTC_TIMESTAMP(6) WHERE {scope}event_id IN ({list}) AND status = 'pending' AND retry_count = 0 AND lease_id = 0 AND next_attempt_at > UTC_TIMESTAMP(6)", len(ids), anyArgs(ids)...)
}
