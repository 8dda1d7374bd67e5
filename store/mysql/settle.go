package mysql

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Settle records outcomes of records claimed under token. Outcomes of one
// kind (and, for failures, of one error text and delay) are written by one
// UPDATE, fenced by the token: a record whose lease was lost is left alone
// and counted as stale. A dead letter gets a statement of its own, so that
// SettleResult.Dead names exactly the dead letters written. Each statement
// is retried a few times on a deadlock, lock wait timeout or lost
// connection; this is safe because a statement that was applied ended
// the lease (the record is no longer pending, or its token was cleared)
// and so cannot apply twice. (An outcome applied by a try whose
// reply was lost counts as stale.)
//
// A statement that fails does not stop the others: Settle writes what it
// can and returns what it wrote together with an error naming what it
// could not. Error texts are stored as backend.Truncate makes them: valid
// UTF-8 of at most backend.MaxLastErrorBytes, whatever the outcome holds.
func (s *channel) Settle(ctx context.Context, token string, outcomes []backend.Outcome) (backend.SettleResult, error) {
	res, err := s.applySettle(token, outcomes, func(st statement) (int64, error) {
		return execRetrying(ctx, s.db, st)
	})
	if err != nil {
		return res, s.wrap("settle", err)
	}
	return res, nil
}

// applySettle writes outcomes with exec: one fenced UPDATE per group,
// each on its own, so that one that fails leaves the others written.
func (s *channel) applySettle(token string, outcomes []backend.Outcome, exec func(statement) (int64, error)) (backend.SettleResult, error) {
	if token == "" {
		return backend.SettleResult{}, errors.New("mysql store: settle: empty token")
	}
	groups, err := groupOutcomes(outcomes)
	if err != nil {
		return backend.SettleResult{}, err
	}
	lease, ok := leaseID(token)
	if !ok {
		// Not a token the store makes: it holds no lease.
		return backend.SettleResult{Stale: len(outcomes)}, nil
	}
	var (
		res    backend.SettleResult
		errs   []error
		failed int
	)
	for _, g := range groups {
		n, err := exec(settleSQL(s.t, g, lease))
		if err != nil {
			failed += len(g.ids)
			errs = append(errs, fmt.Errorf("%d %s outcome(s) not recorded: %w", len(g.ids), g.kind, err))
			continue
		}
		res.Applied += int(n)
		if g.kind == backend.OutcomeDead && n == 1 {
			res.Dead = append(res.Dead, g.ids[0])
		}
	}
	res.Stale = len(outcomes) - res.Applied - failed
	slices.Sort(res.Dead)
	return res, errors.Join(errs...)
}

// outcomeGroup is a set of outcomes one statement writes.
type outcomeGroup struct {
	kind    backend.OutcomeKind
	errText string
	retryIn time.Duration
	ids     []string
	// seqs, when not nil, are the records' seqs (Outcome.Seq), one per
	// ID: the statement finds the records by primary key.
	seqs []uint64
}

// settleSQL writes the outcomes of a group, fenced by the lease (the
// token's leaseID): a record that is not a pending record leased under
// it is left alone. Every outcome ends the lease: a retry or a release
// clears lease_id; a published or dead record is no longer pending, and
// keeps it, so that the row is rewritten in place (status, next_attempt_at
// and retry_count are fixed-width; next_attempt_at is when a published
// record was published). (groupOutcomes lets only the four kinds through.)
func settleSQL(t *target, g *outcomeGroup, lease int64) statement {
	var text string
	args := make([]any, 0, len(g.ids)+3)
	switch g.kind {
	case backend.OutcomePublished:
		text = "UPDATE {table} SET status = 'published', last_error = NULL, next_attempt_at = UTC_TIMESTAMP(6) WHERE {scope}lease_id = ? AND status = 'pending' AND "
	case backend.OutcomeRetry:
		text = "UPDATE {table} SET retry_count = retry_count + 1, last_error = ?, next_attempt_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, lease_id = 0 WHERE {scope}lease_id = ? AND status = 'pending' AND "
		args = append(args, g.errText, g.retryIn.Microseconds())
	case backend.OutcomeDead:
		text = "UPDATE {table} SET status = 'dead', retry_count = retry_count + 1, last_error = ?, next_attempt_at = UTC_TIMESTAMP(6) WHERE {scope}lease_id = ? AND status = 'pending' AND "
		args = append(args, g.errText)
	case backend.OutcomeRelease:
		text = "UPDATE {table} SET next_attempt_at = UTC_TIMESTAMP(6), lease_id = 0 WHERE {scope}lease_id = ? AND status = 'pending' AND "
	}
	args = append(args, lease)
	if g.seqs != nil {
		// By primary key: cheaper than a lookup in uk_event_id first.
		text += "{seq} IN ({list})"
		args = append(args, anyArgs(g.seqs)...)
	} else {
		text += "event_id IN ({list})"
		args = append(args, anyArgs(g.ids)...)
	}
	return t.renderList(text, len(g.ids), args...)
}

// groupOutcomes groups outcomes by what their statement writes; each dead
// letter is a group of its own.
func groupOutcomes(outcomes []backend.Outcome) ([]*outcomeGroup, error) {
	type groupKey struct {
		kind    backend.OutcomeKind
		errText string
		retryIn time.Duration
		deadID  string
		bySeq   bool
	}
	var (
		groups []*outcomeGroup
		index  = map[groupKey]*outcomeGroup{}
	)
	for _, o := range outcomes {
		if o.Seq < 0 {
			return nil, fmt.Errorf("mysql store: settle: outcome for %q: Seq %d is negative", o.ID, o.Seq)
		}
		k := groupKey{kind: o.Kind, bySeq: o.Seq > 0}
		switch o.Kind {
		case backend.OutcomePublished, backend.OutcomeRelease:
		case backend.OutcomeRetry:
			if o.RetryIn < 0 {
				return nil, fmt.Errorf("mysql store: settle: outcome for %q: RetryIn %v is negative", o.ID, o.RetryIn)
			}
			k.errText, k.retryIn = backend.Truncate(o.Error, backend.MaxLastErrorBytes), o.RetryIn
		case backend.OutcomeDead:
			k.errText, k.deadID = backend.Truncate(o.Error, backend.MaxLastErrorBytes), o.ID
		default:
			return nil, fmt.Errorf("mysql store: settle: outcome for %q: unknown kind %d", o.ID, o.Kind)
		}
		g := index[k]
		if g == nil {
			g = &outcomeGroup{kind: k.kind, errText: k.errText, retryIn: k.retryIn}
			index[k] = g
			groups = append(groups, g)
		}
		g.ids = append(g.ids, o.ID)
		if k.bySeq {
			g.seqs = append(g.seqs, uint64(o.Seq))
		}
	}
	return groups, nil
}
