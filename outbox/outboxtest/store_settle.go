package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Settle records outcomes of records claimed under token, fenced by it, as
// backend.Store says.
func (s *Store) Settle(_ context.Context, token string, outcomes []backend.Outcome) (backend.SettleResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settleLocked(token, outcomes)
}

func (s *Store) settleLocked(token string, outcomes []backend.Outcome) (backend.SettleResult, error) {
	if token == "" {
		return backend.SettleResult{}, errors.New("outboxtest: settle: empty token")
	}
	for _, o := range outcomes {
		switch {
		case o.Kind < backend.OutcomePublished || o.Kind > backend.OutcomeRelease:
			return backend.SettleResult{}, fmt.Errorf("outboxtest: settle: outcome for %q: unknown kind %d", o.ID, o.Kind)
		case o.Kind == backend.OutcomeRetry && o.RetryIn < 0:
			return backend.SettleResult{}, fmt.Errorf("outboxtest: settle: outcome for %q: RetryIn %v is negative", o.ID, o.RetryIn)
		}
	}
	now := s.clock()
	var res backend.SettleResult
	for _, o := range outcomes {
		r, ok := s.records[o.ID]
		if !ok || r.token != token {
			res.Stale++
			continue
		}
		r.apply(o, now)
		res.Applied++
		if o.Kind == backend.OutcomeDead {
			res.Dead = append(res.Dead, o.ID)
		}
	}
	slices.Sort(res.Dead)
	return res, nil
}

// apply records one outcome and drops the lease.
func (r *memRecord) apply(o backend.Outcome, now time.Time) {
	r.token = ""
	r.rec.NextAttemptAt = now
	switch o.Kind {
	case backend.OutcomePublished:
		r.rec.Status, r.rec.PublishedAt, r.rec.LastError = backend.StatusPublished, now, ""
	case backend.OutcomeRetry:
		r.rec.Attempts++
		r.rec.LastError = backend.Truncate(o.Error, backend.MaxLastErrorBytes)
		r.rec.NextAttemptAt = now.Add(o.RetryIn)
	case backend.OutcomeDead:
		r.rec.Attempts++
		r.rec.Status, r.rec.LastError = backend.StatusDead, backend.Truncate(o.Error, backend.MaxLastErrorBytes)
	}
}

// Stats reports the backlog: pending, live leases, dead letters, the age
// of the oldest pending record, and both counts by type.
func (s *Store) Stats(context.Context) (backend.Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	st := backend.Stats{ByType: map[string]backend.TypeStats{}}
	for _, r := range s.records {
		ts := st.ByType[r.rec.Type]
		switch r.rec.Status {
		case backend.StatusPending:
			st.Pending++
			ts.Pending++
			if r.leased(now) {
				st.Leased++
			}
			st.OldestPending = max(st.OldestPending, now.Sub(r.rec.EnqueuedAt))
		case backend.StatusDead:
			st.Dead++
			ts.Dead++
		default:
			continue
		}
		st.ByType[r.rec.Type] = ts
	}
	return st, nil
}

// PurgePublished deletes up to limit records published longer ago than
// olderThan, oldest first, and returns how many. Pending and dead records
// are never deleted.
func (s *Store) PurgePublished(_ context.Context, olderThan time.Duration, limit int) (int, error) {
	if olderThan <= 0 || limit < 1 || limit > backend.MaxClaimLimit {
		return 0, fmt.Errorf("outboxtest: purge: older than %v, limit %d: want a positive age and a limit of 1 to %d", olderThan, limit, backend.MaxClaimLimit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cutoff := s.clock().Add(-olderThan)
	var old []*memRecord
	for _, r := range s.records {
		if r.rec.Status == backend.StatusPublished && r.rec.PublishedAt.Before(cutoff) {
			old = append(old, r)
		}
	}
	slices.SortFunc(old, func(a, b *memRecord) int { return a.rec.PublishedAt.Compare(b.rec.PublishedAt) })
	old = old[:min(limit, len(old))]
	for _, r := range old {
		delete(s.records, r.rec.ID)
	}
	return len(old), nil
}
