package postgres

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Settle records the outcomes of claimed records, fenced by the batch
// token: a record published from a range of the log costs no write
// (the range's row goes, once per batch), one not published gets a
// state row; a record claimed from its state row has that row updated.
// Outcomes no longer held under token are counted as stale. It is
// idempotent.
func (s *Store) Settle(ctx context.Context, token string, outcomes []backend.Outcome) (backend.SettleResult, error) {
	return s.settle(ctx, token, outcomes)
}

func (c *channel) settle(ctx context.Context, token string, outcomes []backend.Outcome) (backend.SettleResult, error) {
	outcomes, err := backend.CheckOutcomes(c.what, outcomes)
	if err != nil || len(outcomes) == 0 {
		return backend.SettleResult{}, err
	}
	t, err := c.resolve(ctx)
	if err != nil {
		return backend.SettleResult{}, err
	}
	// A settle is fenced by the token, so it is tried again after a lost
	// connection too: had the lost try committed, the next finds its
	// range gone and its records settled, and counts them stale; nothing
	// applies twice.
	res, err := redoing(ctx, func() (backend.SettleResult, error) {
		if tok, ok := parseToken(token); ok && tok > 0 {
			return logSettle(ctx, c.db, t, tok, outcomes) // one statement
		}
		var res backend.SettleResult
		err := relayTx(ctx, c.db, func(tx *sql.Tx) error {
			var err error
			res, err = settleIn(ctx, tx, t, token, outcomes)
			return err
		})
		return res, err
	})
	if err != nil {
		return backend.SettleResult{}, c.wrap("settle", err)
	}
	return res, nil
}

// settleIn records outcomes under token in tx. A negative token is a
// writer's head start (HeadStartBatch): its messages first lose the
// writer's hold (one HOT update each; a walk that passed them meanwhile
// left a state row under the writer's token, which logSettle then
// updates).
func settleIn(ctx context.Context, tx *sql.Tx, t *target, token string, outcomes []backend.Outcome) (backend.SettleResult, error) {
	if len(outcomes) == 0 {
		return backend.SettleResult{}, nil
	}
	tok, ok := parseToken(token)
	if !ok {
		return backend.SettleResult{Stale: len(outcomes)}, nil
	}
	if tok > 0 {
		return logSettle(ctx, tx, t, tok, outcomes)
	}
	return writerSettle(ctx, tx, t, tok, outcomes)
}

// writerSettle records the outcomes of a writer's after-commit publish
// of the messages it holds under tok (consumer 0 only): each loses the
// hold (writer_until NULL: published by its writer); one not published
// gets a state row with the outcome, unless a walk gave it one already
// (under tok, and then it is updated). A message a claim has taken from
// the writer since is stale.
func writerSettle(ctx context.Context, tx *sql.Tx, t *target, tok int64, outcomes []backend.Outcome) (backend.SettleResult, error) {
	ids, kinds, retry, errs := outcomeColumns(outcomes)
	// First the hold, in a statement of its own: it waits for a walk
	// that is passing these messages (FOR SHARE), and the statement
	// after it then sees the state rows that walk left.
	q, err := tx.QueryContext(ctx, t.render(`UPDATE {outbox} o SET writer_until = NULL
WHERE o.event_id = ANY($1::text[]) AND o.writer_token = $2 AND o.writer_until IS NOT NULL
	AND NOT EXISTS (SELECT 1 FROM {state} s WHERE s.consumer_id = 0 AND s.seq = o.seq AND s.lease_token <> $2)
RETURNING o.event_id`), ids, tok)
	if err != nil {
		return backend.SettleResult{}, err
	}
	held := map[string]bool{}
	for q.Next() {
		var id string
		if err := q.Scan(&id); err != nil {
			q.Close()
			return backend.SettleResult{}, err
		}
		held[id] = true
	}
	if err := errors.Join(q.Err(), q.Close()); err != nil {
		return backend.SettleResult{}, err
	}
	if len(held) == 0 {
		return backend.SettleResult{Stale: len(outcomes)}, nil
	}
	// The state rows: updated where a walk left one under tok, added for
	// an outcome other than published.
	rows, err := tx.QueryContext(ctx, t.render(`WITH o AS (
	SELECT o.id, o.kind, o.retry, o.err, m.seq, m.event_key
	FROM unnest($1::text[], $2::int[], $3::bigint[], $4::text[]) AS o(id, kind, retry, err)
	JOIN {outbox} m ON m.event_id = o.id
	WHERE o.id = ANY($6::text[])
), upd AS (`+stateUpdateSQL+`
), ins AS (`+stateInsertSQL+`
	FROM o WHERE o.kind <> 1 AND NOT EXISTS (SELECT 1 FROM {state} s WHERE s.consumer_id = 0 AND s.seq = o.seq)
	RETURNING seq
)
SELECT id, kind FROM upd
UNION ALL SELECT o.id, o.kind FROM o WHERE o.kind = 1 AND NOT EXISTS (SELECT 1 FROM upd WHERE upd.id = o.id)
UNION ALL SELECT o.id, o.kind FROM o JOIN ins ON ins.seq = o.seq`), ids, kinds, retry, errs, tok, keys(held))
	if err != nil {
		return backend.SettleResult{}, err
	}
	return settleResult(rows, len(outcomes))
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// settleResult reads the (id, kind) of the outcomes a settle applied.
func settleResult(q *sql.Rows, outcomes int) (backend.SettleResult, error) {
	defer q.Close()
	res := backend.SettleResult{}
	for q.Next() {
		var id string
		var kind int32
		if err := q.Scan(&id, &kind); err != nil {
			return backend.SettleResult{}, err
		}
		res.Applied++
		if backend.OutcomeKind(kind) == backend.OutcomeDead {
			res.Dead = append(res.Dead, id)
		}
	}
	if err := q.Err(); err != nil {
		return backend.SettleResult{}, err
	}
	res.Stale = outcomes - res.Applied
	slices.Sort(res.Dead)
	return res, nil
}

// stateUpdateSQL applies outcomes o (kind 1 published, 2 retry, 3 dead,
// 4 release) to the consumer's ($1) state rows leased under $5.
const stateUpdateSQL = `UPDATE {state} s SET
		status = CASE o.kind WHEN 1 THEN 'published' WHEN 3 THEN 'dead' ELSE 'pending' END,
		retry_count = s.retry_count + CASE WHEN o.kind IN (2, 3) THEN 1 ELSE 0 END,
		last_error = CASE o.kind WHEN 1 THEN '' WHEN 4 THEN s.last_error ELSE o.err END,
		next_attempt_at = CASE o.kind WHEN 2 THEN statement_timestamp() + o.retry * interval '1 microsecond' WHEN 4 THEN statement_timestamp() ELSE s.next_attempt_at END,
		finished_at = CASE WHEN o.kind IN (1, 3) THEN statement_timestamp() END,
		lease_token = 0
	FROM o WHERE s.consumer_id = {c} AND s.seq = o.seq AND s.lease_token = $5 AND s.status = 'pending'
	RETURNING o.id, o.kind`

// stateInsertSQL gives a record of outcomes o its first state row (the
// caller's FROM and WHERE follow).
const stateInsertSQL = `INSERT INTO {state} (consumer_id, seq, event_key, status, retry_count, last_error, next_attempt_at, finished_at)
	SELECT {c}, o.seq, o.event_key,
		CASE o.kind WHEN 1 THEN 'published' WHEN 3 THEN 'dead' ELSE 'pending' END,
		CASE WHEN o.kind IN (2, 3) THEN 1 ELSE 0 END,
		CASE WHEN o.kind IN (2, 3) THEN o.err ELSE '' END,
		CASE o.kind WHEN 2 THEN statement_timestamp() + o.retry * interval '1 microsecond' ELSE statement_timestamp() END,
		CASE WHEN o.kind IN (1, 3) THEN statement_timestamp() END`

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
