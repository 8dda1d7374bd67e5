package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Settle records the outcomes of claimed records, fenced by the batch
// token: one UPDATE of the records still leased under token; the others
// are counted as stale. It is idempotent.
func (s *Store) Settle(ctx context.Context, token string, outcomes []backend.Outcome) (backend.SettleResult, error) {
	return s.settle(ctx, token, outcomes)
}

func (c *channel) settle(ctx context.Context, token string, outcomes []backend.Outcome) (backend.SettleResult, error) {
	outcomes, err := checkOutcomes(c.what, outcomes)
	if err != nil || len(outcomes) == 0 {
		return backend.SettleResult{}, err
	}
	t, err := c.resolve(ctx)
	if err != nil {
		return backend.SettleResult{}, err
	}
	// A settle is one statement fenced by the token, so it is tried
	// again after a lost connection too: had the lost try committed, the
	// next finds its records settled and counts them stale, and nothing
	// applies twice. (Without it, each connection a pooler or a failover
	// cuts costs a batch of redeliveries after the lease.)
	var res backend.SettleResult
	_, err = redoing(ctx, func() (struct{}, error) {
		var err error
		res, err = c.settleIn(ctx, c.db, t, token, outcomes)
		return struct{}{}, err
	})
	if err != nil {
		return backend.SettleResult{}, c.wrap("settle", err)
	}
	return res, nil
}

// checkOutcomes refuses unknown kinds and keeps the last outcome of each
// ID.
func checkOutcomes(what string, outcomes []backend.Outcome) ([]backend.Outcome, error) {
	last := make(map[string]int, len(outcomes))
	for i, o := range outcomes {
		switch o.Kind {
		case backend.OutcomePublished, backend.OutcomeRetry, backend.OutcomeDead, backend.OutcomeRelease:
		default:
			return nil, fmt.Errorf("%s: settle %q: unknown kind %d", what, o.ID, int(o.Kind))
		}
		if o.Kind == backend.OutcomeRetry && o.RetryIn < 0 {
			return nil, fmt.Errorf("%s: settle %q: RetryIn %v: must not be negative", what, o.ID, o.RetryIn)
		}
		last[o.ID] = i
	}
	if len(last) == len(outcomes) {
		return outcomes, nil
	}
	out := make([]backend.Outcome, 0, len(last))
	for i, o := range outcomes {
		if last[o.ID] == i {
			out = append(out, o)
		}
	}
	return out, nil
}

// settleIn applies outcomes in one statement through q.
func (c *channel) settleIn(ctx context.Context, q querier, t *target, token string, outcomes []backend.Outcome) (backend.SettleResult, error) {
	res := backend.SettleResult{}
	if len(outcomes) == 0 {
		return res, nil
	}
	tok, ok := parseToken(token)
	if !ok {
		res.Stale = len(outcomes)
		return res, nil
	}
	ids, kinds, retry, errs := outcomeColumns(outcomes)
	rows, err := q.QueryContext(ctx, t.render(settleSQL), tok, ids, kinds, retry, errs)
	if err != nil {
		return res, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id   string
			kind int32
		)
		if err := rows.Scan(&id, &kind); err != nil {
			return backend.SettleResult{}, err
		}
		res.Applied++
		if backend.OutcomeKind(kind) == backend.OutcomeDead {
			res.Dead = append(res.Dead, id)
		}
	}
	if err := rows.Err(); err != nil {
		return backend.SettleResult{}, err
	}
	res.Stale = len(outcomes) - res.Applied
	slices.Sort(res.Dead)
	return res, nil
}

// outcomeColumns are outcomes, column by column, for settleSQL.
func outcomeColumns(outcomes []backend.Outcome) (ids []string, kinds []int32, retry []int64, errs []string) {
	ids = make([]string, len(outcomes))
	kinds = make([]int32, len(outcomes))
	retry = make([]int64, len(outcomes))
	errs = make([]string, len(outcomes))
	for i, o := range outcomes {
		ids[i], kinds[i] = o.ID, int32(o.Kind)
		if o.Kind == backend.OutcomeRetry {
			retry[i] = o.RetryIn.Microseconds()
		}
		if o.Kind == backend.OutcomeRetry || o.Kind == backend.OutcomeDead {
			errs[i] = storedText(o.Error, backend.MaxLastErrorBytes)
		}
	}
	return ids, kinds, retry, errs
}

// settleSQL applies unnested outcomes (1 published, 2 retry, 3 dead,
// 4 release) to the records still leased under the token $1.
const settleSQL = `UPDATE {state} s SET
	status = CASE o.kind WHEN 1 THEN 'published' WHEN 3 THEN 'dead' ELSE 'pending' END,
	retry_count = s.retry_count + CASE WHEN o.kind IN (2, 3) THEN 1 ELSE 0 END,
	last_error = CASE o.kind WHEN 1 THEN '' WHEN 4 THEN s.last_error ELSE o.err END,
	next_attempt_at = CASE o.kind WHEN 2 THEN statement_timestamp() + o.retry * interval '1 microsecond' WHEN 4 THEN statement_timestamp() ELSE s.next_attempt_at END,
	finished_at = CASE WHEN o.kind IN (1, 3) THEN statement_timestamp() END,
	lease_token = 0
FROM unnest($2::text[], $3::int[], $4::bigint[], $5::text[]) AS o(id, kind, retry, err){updfrom}
WHERE {scope}s.lease_token = $1 AND s.status = 'pending' AND {m}.event_id = o.id{updjoin}
RETURNING {m}.event_id, o.kind`

// storedText makes s storable as PostgreSQL text of at most maxBytes
// bytes: valid UTF-8 (backend.Truncate) without NUL characters, which
// text cannot hold (each becomes U+FFFD). The work is bounded by
// maxBytes, not by the length of s.
func storedText(s string, maxBytes int) string {
	s = backend.Truncate(s, maxBytes)
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return backend.Truncate(strings.ReplaceAll(s, "\x00", "\uFFFD"), maxBytes)
}

var _ = errors.New

// HeadStartBatch returns, without writing anything, those of ids that
// this Store enqueued with a head start and that are still pending under
// it with at least minLeft of it to run, in insert order; the batch's
// token settles them, and left is the least head start they have left,
// on the database clock at the read.
func (s *Store) HeadStartBatch(ctx context.Context, ids []string, minLeft time.Duration) (backend.Batch, time.Duration, error) {
	switch {
	case len(ids) == 0:
		return backend.Batch{}, 0, nil
	case len(ids) > backend.MaxClaimLimit:
		return backend.Batch{}, 0, fmt.Errorf("postgres store: head start batch: %d IDs: more than %d", len(ids), backend.MaxClaimLimit)
	case minLeft < 0:
		return backend.Batch{}, 0, errors.New("postgres store: head start batch: minLeft must not be negative")
	}
	rows, err := s.db.QueryContext(ctx, s.t.render(`SELECT {cols}, (extract(epoch FROM s.next_attempt_at - statement_timestamp()) * 1000000)::bigint
FROM {from} WHERE s.event_id = ANY($1::text[]) AND s.status = 'pending' AND s.lease_token = $2
	AND s.next_attempt_at > statement_timestamp() + $3 * interval '1 microsecond'
ORDER BY s.seq`), ids, s.headStart, minLeft.Microseconds())
	if err != nil {
		return backend.Batch{}, 0, s.wrap("head start batch", err)
	}
	defer rows.Close()
	var (
		out   []scanned
		least int64 = -1
		b           = budget{left: s.opts.MaxClaimBytes}
	)
	for rows.Next() {
		var left int64
		r, err := scanRecordWith(rows, &left)
		if err != nil {
			return backend.Batch{}, 0, s.wrap("head start batch", err)
		}
		if b.spent() || (b.taken && b.left-recordBytes(r.rec) < 0) {
			break
		}
		b = b.after([]scanned{r})
		out = append(out, r)
		if least < 0 || left < least {
			least = left
		}
	}
	if err := rows.Err(); err != nil {
		return backend.Batch{}, 0, s.wrap("head start batch", err)
	}
	if len(out) == 0 {
		return backend.Batch{}, 0, nil
	}
	return toBatch(s.headStart, out), time.Duration(least) * time.Microsecond, nil
}

// EndHeadStart makes those of ids that this Store enqueued with a head
// start, and that are still pending under it, due at once. It returns
// how many it changed.
func (s *Store) EndHeadStart(ctx context.Context, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	return s.endHeadStart(ctx, s.t, ids, `UPDATE {state} s SET next_attempt_at = statement_timestamp(), lease_token = 0
WHERE s.event_id = ANY($1::text[]) AND s.status = 'pending' AND s.lease_token = $2`, s.headStart)
}

func (c *channel) endHeadStart(ctx context.Context, t *target, ids []string, stmt string, args ...any) (int, error) {
	if len(ids) > backend.MaxClaimLimit {
		return 0, fmt.Errorf("%s: end head start: %d IDs: more than %d", c.what, len(ids), backend.MaxClaimLimit)
	}
	n, err := retrying(ctx, func() (int64, error) {
		res, err := c.db.ExecContext(ctx, t.render(stmt), append([]any{ids}, args...)...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
	if err != nil {
		return 0, c.wrap("end head start", err)
	}
	return int(n), nil
}
