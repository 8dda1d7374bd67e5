package outboxtest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

var _ backend.Outbox = (*Store)(nil)

// The operator contract (backend.Outbox), so that tools and their tests
// run without a database. The store has no named consumers.

// Name returns "memory".
func (s *Store) Name() string { return "memory" }

// LastSeq returns the Seq of the last message written.
func (s *Store) LastSeq(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq, nil
}

// Consumers returns none: the store has no named consumers.
func (s *Store) Consumers(context.Context) ([]backend.ConsumerInfo, error) { return nil, nil }

// AddConsumer fails with backend.ErrNoConsumers.
func (s *Store) AddConsumer(_ context.Context, name string, _ backend.StartFrom) error {
	return fmt.Errorf("outboxtest: add consumer %q: %w", name, backend.ErrNoConsumers)
}

// RemoveConsumer fails with backend.ErrNoConsumers.
func (s *Store) RemoveConsumer(_ context.Context, name string) (int, error) {
	return 0, fmt.Errorf("outboxtest: remove consumer %q: %w", name, backend.ErrNoConsumers)
}

// ConsumerQueue returns the store itself for "", and fails with
// backend.ErrNoConsumers for any other name.
func (s *Store) ConsumerQueue(name string) (backend.Queue, error) {
	if name == "" {
		return s, nil
	}
	return nil, fmt.Errorf("outboxtest: consumer %q: %w", name, backend.ErrNoConsumers)
}

// List returns a page of the records that match f, in Seq order.
func (s *Store) List(_ context.Context, f backend.ListFilter) ([]backend.Record, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("outboxtest: list: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	var out []backend.Record
	for _, r := range s.sorted() {
		rec := r.rec
		switch {
		case rec.Seq <= f.AfterSeq,
			f.Status != "" && rec.Status != f.Status,
			f.MinAttempts > 0 && rec.Attempts < f.MinAttempts,
			!matches(rec, f.Type, f.Key, f.ErrorContains),
			f.OlderThan > 0 && rec.EnqueuedAt.After(now.Add(-f.OlderThan)):
			continue
		}
		out = append(out, rec)
		if len(out) == f.Limit {
			break
		}
	}
	return out, nil
}

// Requeue gives the dead letter id a fresh start.
func (s *Store) Requeue(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	switch {
	case !ok:
		return fmt.Errorf("outboxtest: requeue %q: %w", id, backend.ErrNotFound)
	case r.rec.Status != backend.StatusDead:
		return fmt.Errorf("outboxtest: requeue %q: status %s: %w", id, r.rec.Status, backend.ErrNotDead)
	}
	s.requeueLocked(r)
	return nil
}

// CountDead counts the dead letters that match f.
func (s *Store) CountDead(_ context.Context, f backend.DeadFilter) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.deadMatching(f)), nil
}

// RequeueDead requeues the dead letters that match f, oldest first, up
// to opts.Limit.
func (s *Store) RequeueDead(_ context.Context, f backend.DeadFilter, opts backend.RequeueOptions) (int, error) {
	opts, err := opts.WithDefaults()
	if err != nil {
		return 0, fmt.Errorf("outboxtest: requeue: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dead := s.deadMatching(f)
	if opts.Limit > 0 {
		dead = dead[:min(opts.Limit, len(dead))]
	}
	for _, r := range dead {
		s.requeueLocked(r)
	}
	return len(dead), nil
}

// deadMatching returns the dead letters that match f, in Seq order.
func (s *Store) deadMatching(f backend.DeadFilter) []*memRecord {
	now := s.clock()
	var out []*memRecord
	for _, r := range s.sorted() {
		if r.rec.Status == backend.StatusDead && matches(r.rec, f.Type, f.Key, f.ErrorContains) &&
			(f.OlderThan <= 0 || !r.rec.EnqueuedAt.After(now.Add(-f.OlderThan))) {
			out = append(out, r)
		}
	}
	return out
}

// requeueLocked makes r pending, with no attempts, due now; its last
// error stays. An ordered claim takes it once no record of its key is
// leased (see heads).
func (s *Store) requeueLocked(r *memRecord) {
	r.rec.Status, r.rec.Attempts, r.rec.NextAttemptAt, r.token = backend.StatusPending, 0, s.clock(), ""
}

// sorted returns every record in Seq order.
func (s *Store) sorted() []*memRecord {
	out := make([]*memRecord, 0, len(s.records))
	for _, r := range s.records {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *memRecord) int { return cmp.Compare(a.rec.Seq, b.rec.Seq) })
	return out
}

// matches reports whether rec matches a filter's type, key and error
// text, empty ones matching everything.
func matches(rec backend.Record, typ, key, errorContains string) bool {
	return (typ == "" || rec.Type == typ) && (key == "" || rec.Key == key) &&
		(errorContains == "" || strings.Contains(rec.LastError, errorContains))
}
