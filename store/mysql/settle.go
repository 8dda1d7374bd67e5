package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Settle records the outcomes of claimed records, fenced by the batch
// token: a record published from a range of the log costs no write of
// its own (the range's row goes, once per batch), one not published gets
// a state row; a record claimed from its state row has that row updated.
// Outcomes no longer held under token are counted as stale. It is
// idempotent, and so tried again after a deadlock, lock wait timeout or
// lost connection: had the lost try committed, the next finds its range
// gone and its records settled, and counts them stale. Error texts are
// stored as backend.Truncate makes them: valid UTF-8 of at most
// backend.MaxLastErrorBytes, whatever the outcome holds.
func (s *channel) Settle(ctx context.Context, token string, outcomes []backend.Outcome) (backend.SettleResult, error) {
	if token == "" {
		return backend.SettleResult{}, fmt.Errorf("%s: settle: empty token", s.what)
	}
	outcomes, err := backend.CheckOutcomes(s.what, outcomes)
	if err != nil || len(outcomes) == 0 {
		return backend.SettleResult{}, err
	}
	t, err := s.resolve(ctx)
	if err != nil {
		return backend.SettleResult{}, err
	}
	var res backend.SettleResult
	err = retryTransient(ctx, func() error {
		if tok, ok := leaseID(token); ok && tok > 0 && backend.AllPublished(outcomes) {
			// The common case, one statement: the range's row goes.
			n, err := deleteRangeSQL(t, tok, len(outcomes)).exec(ctx, s.db)
			if err != nil {
				return err
			}
			if n == 1 {
				res = backend.SettleResult{Applied: len(outcomes)}
				return nil
			}
		}
		return inTx(ctx, s.db, func(tx *sql.Tx) error {
			var err error
			res, err = settleIn(ctx, tx, t, token, outcomes)
			return err
		})
	})
	if err != nil {
		return backend.SettleResult{}, s.wrap("settle", err)
	}
	return res, nil
}

// deleteRangeSQL settles a whole range whose records were all published.
func deleteRangeSQL(t *target, tok int64, n int) statement {
	return t.render("DELETE FROM {ranges} WHERE consumer_id = {c} AND token = ? AND n = ?", tok, n)
}

// settleIn records outcomes under token in tx. A negative token is a
// writer's head start (HeadStartBatch).
func settleIn(ctx context.Context, tx *sql.Tx, t *target, token string, outcomes []backend.Outcome) (backend.SettleResult, error) {
	if len(outcomes) == 0 {
		return backend.SettleResult{}, nil
	}
	tok, ok := leaseID(token)
	if !ok {
		// Not a token the store makes: it holds nothing.
		return backend.SettleResult{Stale: len(outcomes)}, nil
	}
	if tok < 0 {
		if t.consumerID != 0 {
			return backend.SettleResult{Stale: len(outcomes)}, nil
		}
		return writerSettle(ctx, tx, t, tok, outcomes)
	}
	return logSettle(ctx, tx, t, tok, outcomes)
}

// settled is a message an outcome names, as the store holds it.
type settled struct {
	backend.Outcome
	id  uint64
	key string
	// state is the status of its state row ("" for none), leased under
	// lease.
	state string
	lease int64
}

// readSettled reads the messages outcomes name, with their state rows
// of t's consumer (locked), in id order. Outcomes of no message are left
// out.
func readSettled(ctx context.Context, tx *sql.Tx, t *target, outcomes []backend.Outcome, extra string, args ...any) ([]settled, error) {
	ids := make([]any, len(outcomes))
	byID := make(map[string]backend.Outcome, len(outcomes))
	for i, o := range outcomes {
		ids[i] = o.ID
		byID[o.ID] = o
	}
	q, err := t.renderList(`SELECT o.id, o.event_id, o.event_key, COALESCE(CAST(s.status AS CHAR), ''), COALESCE(s.lease_token, 0)
FROM {outbox} o LEFT JOIN {state} s FORCE INDEX ({primary}) ON s.consumer_id = {c} AND s.id = o.id
WHERE o.event_id IN ({list})`+extra+` ORDER BY o.id FOR UPDATE`, len(ids), append(ids, args...)...).query(ctx, tx)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	var out []settled
	for q.Next() {
		var (
			m   settled
			id  string
			key []byte
		)
		if err := q.Scan(&m.id, &id, &key, &m.state, &m.lease); err != nil {
			return nil, err
		}
		o, ok := byID[id]
		if !ok { // PAD SPACE: "x" matched "x "
			continue
		}
		m.Outcome, m.key = o, string(key)
		out = append(out, m)
	}
	return out, q.Err()
}

// logSettle records outcomes under token tok: a message of the claim's
// range needs a write only if it was not published (a state row); a
// state row claimed under tok is updated. The range is done with, and
// deleted, once all its records are settled: most often at once.
// Settled in parts, it stays until the last part (or until its lease
// runs out: then a claim takes what has no state row yet), and each
// part's records get state rows, published ones too.
func logSettle(ctx context.Context, tx *sql.Tx, t *target, tok int64, outcomes []backend.Outcome) (backend.SettleResult, error) {
	if backend.AllPublished(outcomes) {
		n, err := deleteRangeSQL(t, tok, len(outcomes)).exec(ctx, tx)
		if err != nil {
			return backend.SettleResult{}, err
		}
		if n == 1 {
			return backend.SettleResult{Applied: len(outcomes)}, nil
		}
	}
	// The consumer's row first, as a claim and a writer's head start
	// take it before any state row: readSettled's locks of state rows
	// not yet written are gap locks, and a writer's head start that read
	// the consumer's row (a shared lock) and then waited for such a gap,
	// while the claim of a SettleAndClaim waited for the consumer's row,
	// was a deadlock that rolled the writer's transaction back
	// (TestAHeadStartEnqueueAndASettleAndClaimDoNotDeadlock).
	if _, err := tx.ExecContext(ctx, t.sql("SELECT 1 FROM {consumers} WHERE id = {c} FOR UPDATE")); err != nil {
		return backend.SettleResult{}, err
	}
	var from, to uint64
	var n int
	err := tx.QueryRowContext(ctx, t.sql("SELECT from_id, to_id, n FROM {ranges} WHERE consumer_id = {c} AND token = ? FOR UPDATE"), tok).Scan(&from, &to, &n)
	hasRange := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return backend.SettleResult{}, err
	}
	ms, err := readSettled(ctx, tx, t, outcomes, "")
	if err != nil {
		return backend.SettleResult{}, err
	}
	var inRange, ofState []settled
	for _, m := range ms {
		switch {
		case m.state == "pending" && m.lease == tok:
			ofState = append(ofState, m)
		case m.state == "" && hasRange && m.id > from && m.id <= to:
			inRange = append(inRange, m)
		}
	}
	whole := hasRange && len(inRange) >= n
	if hasRange && len(inRange) > 0 {
		if whole {
			_, err = tx.ExecContext(ctx, t.sql("DELETE FROM {ranges} WHERE consumer_id = {c} AND token = ?"), tok)
		} else {
			_, err = tx.ExecContext(ctx, t.sql("UPDATE {ranges} SET n = n - ? WHERE consumer_id = {c} AND token = ?"), len(inRange), tok)
		}
		if err != nil {
			return backend.SettleResult{}, err
		}
	}
	var fresh []settled
	for _, m := range inRange {
		if m.Kind != backend.OutcomePublished || !whole {
			fresh = append(fresh, m)
		}
	}
	if err := insertStateRows(ctx, tx, t, fresh); err != nil {
		return backend.SettleResult{}, err
	}
	if err := updateStateRows(ctx, tx, t, ofState, tok); err != nil {
		return backend.SettleResult{}, err
	}
	return result(len(outcomes), inRange, ofState), nil
}

// writerSettle records the outcomes of a writer's after-commit publish
// of the messages it holds under tok (the default consumer only): each
// loses the hold (writer_until noTime: delivered by its writer, an
// in-place update of two fixed-width columns' one); one not published
// gets a state row with the outcome. A message a claim has taken from
// the writer since (it has a state row) is stale.
func writerSettle(ctx context.Context, tx *sql.Tx, t *target, tok int64, outcomes []backend.Outcome) (backend.SettleResult, error) {
	ms, err := readSettled(ctx, tx, t, outcomes, " AND o.writer_token = ? AND o.writer_until <> "+noTime, tok)
	if err != nil {
		return backend.SettleResult{}, err
	}
	ms = slices.DeleteFunc(ms, func(m settled) bool { return m.state != "" })
	if len(ms) == 0 {
		return backend.SettleResult{Stale: len(outcomes)}, nil
	}
	ids := make([]any, len(ms))
	var failed []settled
	for i, m := range ms {
		ids[i] = m.id
		if m.Kind != backend.OutcomePublished {
			failed = append(failed, m)
		}
	}
	if _, err := t.renderList("UPDATE {outbox} SET writer_until = "+noTime+" WHERE id IN ({list})", len(ids), ids...).exec(ctx, tx); err != nil {
		return backend.SettleResult{}, err
	}
	if err := insertStateRows(ctx, tx, t, failed); err != nil {
		return backend.SettleResult{}, err
	}
	return result(len(outcomes), ms, nil), nil
}

// insertStateRows gives each of ms its first state row, with its
// outcome.
func insertStateRows(ctx context.Context, tx *sql.Tx, t *target, ms []settled) error {
	if len(ms) == 0 {
		return nil
	}
	args := make([]any, 0, 8*len(ms))
	for _, m := range ms {
		status, tries, lastErr := outcomeState(m.Outcome)
		args = append(args, m.id, m.key, status, tries, lastErr, retryMicros(m.Outcome), status)
	}
	_, err := t.renderRows(`INSERT INTO {state} (consumer_id, id, event_key, status, retry_count, last_error, next_attempt_at, finished_at)
VALUES ({c}, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, IF(? = 'pending', `+noTime+`, UTC_TIMESTAMP(6)))`, len(ms), args...).exec(ctx, tx)
	return err
}

// updateStateRows applies the outcomes of ms to their state rows, leased
// under tok: the published ones in one statement (a claim that took a
// key's waiting messages settles them at once, under the consumer's
// row), each other one in a statement of its own.
func updateStateRows(ctx context.Context, tx *sql.Tx, t *target, ms []settled, tok int64) error {
	var published []any
	for _, m := range ms {
		if m.Kind == backend.OutcomePublished {
			published = append(published, m.id)
			continue
		}
		if _, err := updateStateSQL(t, m, tok).exec(ctx, tx); err != nil {
			return err
		}
	}
	if len(published) == 0 {
		return nil
	}
	_, err := t.renderList(`UPDATE {state} SET status = 'published', last_error = '', finished_at = UTC_TIMESTAMP(6), lease_token = 0
WHERE consumer_id = {c} AND id IN ({list}) AND lease_token = ? AND status = 'pending'`, len(published), append(published, tok)...).exec(ctx, tx)
	return err
}

// updateStateSQL applies m's outcome to its state row, leased under tok.
func updateStateSQL(t *target, m settled, tok int64) statement {
	status, tries, lastErr := outcomeState(m.Outcome)
	keepErr := m.Kind == backend.OutcomeRelease
	return t.render(`UPDATE {state} SET status = ?, retry_count = retry_count + ?, last_error = IF(?, last_error, ?),
	next_attempt_at = IF(? = 'pending', UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, next_attempt_at),
	finished_at = IF(? = 'pending', `+noTime+`, UTC_TIMESTAMP(6)), lease_token = 0
WHERE consumer_id = {c} AND id = ? AND lease_token = ? AND status = 'pending'`,
		status, tries, keepErr, lastErr, status, retryMicros(m.Outcome), status, m.id, tok)
}

// outcomeState is the state row an outcome makes: its status, the
// attempts it adds and its error text.
func outcomeState(o backend.Outcome) (status string, tries int, lastErr string) {
	switch o.Kind {
	case backend.OutcomePublished:
		return "published", 0, ""
	case backend.OutcomeRetry:
		return "pending", 1, backend.Truncate(o.Error, backend.MaxLastErrorBytes)
	case backend.OutcomeDead:
		return "dead", 1, backend.Truncate(o.Error, backend.MaxLastErrorBytes)
	}
	return "pending", 0, "" // release
}

// retryMicros is when a pending outcome makes the record due, from now.
func retryMicros(o backend.Outcome) int64 {
	if o.Kind == backend.OutcomeRetry {
		return max(o.RetryIn, 0).Microseconds()
	}
	return 0
}

// result is the SettleResult of applied outcomes.
func result(outcomes int, groups ...[]settled) backend.SettleResult {
	res := backend.SettleResult{}
	for _, g := range groups {
		for _, m := range g {
			res.Applied++
			if m.Kind == backend.OutcomeDead {
				res.Dead = append(res.Dead, m.ID)
			}
		}
	}
	res.Stale = outcomes - res.Applied
	slices.Sort(res.Dead)
	return res
}
