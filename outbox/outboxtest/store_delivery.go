package outboxtest

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Claim leases up to p.Limit due pending records (or the pending records
// p.IDs names) for p.LeaseFor, as backend.Store says.
func (s *Store) Claim(_ context.Context, p backend.ClaimParams) (backend.Batch, error) {
	if err := p.Validate("outboxtest"); err != nil {
		return backend.Batch{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claimLocked(p), nil
}

// SettleAndClaim records st and then claims, at once.
func (s *Store) SettleAndClaim(_ context.Context, st backend.Settlement, p backend.ClaimParams) (backend.SettleResult, backend.Batch, error) {
	if err := p.Validate("outboxtest"); err != nil {
		return backend.SettleResult{}, backend.Batch{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.settleLocked(st.Token, st.Outcomes)
	if err != nil {
		return backend.SettleResult{}, backend.Batch{}, err
	}
	return res, s.claimLocked(p), nil
}

// claimLocked picks the records p asks for and leases them.
func (s *Store) claimLocked(p backend.ClaimParams) backend.Batch {
	now := s.clock()
	var picked []*memRecord
	switch {
	case len(p.IDs) > 0:
		picked = s.pickIDs(now, p)
	case p.Ordered:
		picked = s.pickOrdered(now, p.Limit)
	default:
		picked = s.pickDue(now, p.Limit, func(*memRecord) bool { return true })
	}
	if len(picked) == 0 {
		return backend.Batch{}
	}
	s.tokens++
	b := backend.Batch{Token: "mem-" + strconv.FormatInt(s.tokens, 10), More: len(p.IDs) == 0 && s.leftBehind(now, p, picked)}
	for _, r := range picked {
		b.Records = append(b.Records, r.copy())
		r.token = b.Token
		r.rec.NextAttemptAt = now.Add(p.LeaseFor)
	}
	return b
}

// leftBehind reports whether a claim that picked these left due work
// (backend.Batch.More): a due record it did not pick, once it reached
// its limit; or, ordered, a pending record of a key whose head it picked.
func (s *Store) leftBehind(now time.Time, p backend.ClaimParams, picked []*memRecord) bool {
	took := map[*memRecord]bool{}
	keys := map[string]bool{}
	for _, r := range picked {
		took[r] = true
		if r.rec.Key != "" {
			keys[r.rec.Key] = true
		}
	}
	for _, r := range s.pending() {
		switch {
		case took[r]:
		case p.Ordered && r.rec.Key != "" && keys[r.rec.Key]:
			return true
		case len(picked) == p.Limit && r.due(now):
			return true
		}
	}
	return false
}

// pending lists the pending records, by sequence.
func (s *Store) pending() []*memRecord {
	var out []*memRecord
	for _, r := range s.records {
		if r.rec.Status == backend.StatusPending {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *memRecord) int { return cmp.Compare(a.rec.Seq, b.rec.Seq) })
	return out
}

// due reports whether r may be claimed now: pending, and due (a live lease
// moves the due time to the lease's end).
func (r *memRecord) due(now time.Time) bool {
	return r.rec.Status == backend.StatusPending && !r.rec.NextAttemptAt.After(now)
}

// leased reports whether r is held by a live lease.
func (r *memRecord) leased(now time.Time) bool {
	return r.token != "" && r.rec.NextAttemptAt.After(now)
}

// pickDue returns up to limit due records that match, in due order.
func (s *Store) pickDue(now time.Time, limit int, match func(*memRecord) bool) []*memRecord {
	var due []*memRecord
	for _, r := range s.pending() {
		if r.due(now) && match(r) {
			due = append(due, r)
		}
	}
	slices.SortStableFunc(due, func(a, b *memRecord) int { return a.rec.NextAttemptAt.Compare(b.rec.NextAttemptAt) })
	return due[:min(limit, len(due))]
}

// pickIDs returns the named records that are pending and not leased, by
// sequence; with p.Ordered, a key's records only if they are that key's
// oldest pending records.
func (s *Store) pickIDs(now time.Time, p backend.ClaimParams) []*memRecord {
	var picked []*memRecord
	for _, id := range p.IDs {
		if r, ok := s.records[id]; ok && r.rec.Status == backend.StatusPending && !r.leased(now) && !slices.Contains(picked, r) {
			picked = append(picked, r)
		}
	}
	slices.SortFunc(picked, func(a, b *memRecord) int { return cmp.Compare(a.rec.Seq, b.rec.Seq) })
	picked = picked[:min(p.Limit, len(picked))]
	if !p.Ordered {
		return picked
	}
	byKey := map[string][]*memRecord{}
	for _, r := range picked {
		byKey[r.rec.Key] = append(byKey[r.rec.Key], r)
	}
	oldest := map[string][]*memRecord{}
	for _, r := range s.pending() {
		if k := r.rec.Key; k != "" && len(oldest[k]) < len(byKey[k]) {
			oldest[k] = append(oldest[k], r)
		}
	}
	return slices.DeleteFunc(picked, func(r *memRecord) bool {
		return r.rec.Key != "" && !slices.Equal(oldest[r.rec.Key], byKey[r.rec.Key])
	})
}

// pickOrdered returns unkeyed due records (a quarter of the batch is kept
// for them) and due key heads, one per key, walking the keys in a round
// robin from where the last ordered claim stopped.
func (s *Store) pickOrdered(now time.Time, limit int) []*memRecord {
	quota := max(1, limit/4)
	unkeyed := s.pickDue(now, limit, func(r *memRecord) bool { return r.rec.Key == "" })
	picked := slices.Clone(unkeyed[:min(quota, len(unkeyed))])
	heads := s.heads(now)
	keys := make([]string, 0, len(heads))
	for k := range heads {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	start, _ := slices.BinarySearch(keys, s.cursor+"\x00")
	for i := range keys {
		if len(picked) >= limit {
			break
		}
		k := keys[(start+i)%len(keys)]
		if h := heads[k]; h != nil {
			picked = append(picked, h)
			s.cursor = k
		}
	}
	for _, r := range unkeyed[min(quota, len(unkeyed)):] {
		if len(picked) >= limit {
			break
		}
		picked = append(picked, r)
	}
	return picked
}

// heads maps each key with pending records to its head (its oldest
// pending record) when that is due and no record of the key is leased;
// to nil otherwise.
func (s *Store) heads(now time.Time) map[string]*memRecord {
	heads := map[string]*memRecord{}
	held := map[string]bool{}
	for _, r := range s.pending() {
		k := r.rec.Key
		if k == "" {
			continue
		}
		if _, seen := heads[k]; !seen {
			heads[k] = r
		}
		held[k] = held[k] || r.leased(now)
	}
	for k, h := range heads {
		if held[k] || !h.due(now) {
			heads[k] = nil
		}
	}
	return heads
}
