package outboxtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Store is a complete backend.Store in memory, for unit tests of code that
// writes messages or runs a worker, without a database: leases, fencing,
// retries, dead letters, ordering, stats and retention behave as the
// contract says (it passes backendtest's suites). It is safe for
// concurrent use. Nothing is kept across processes: it is no outbox for
// production.
//
// Enqueue through a *Tx (Store.Begin) makes the messages visible at its
// Commit and drops them at its Rollback; through any other Execer (say a
// *sql.DB) they are written at once.
type Store struct {
	mu      sync.Mutex
	now     func() time.Time
	seq     int64
	records map[string]*memRecord // by message ID
	cursor  string                // where the next ordered claim's walk over the keys starts
	tokens  int64
}

// memRecord is one stored record and its lease.
type memRecord struct {
	rec   backend.Record
	token string
}

var (
	_ backend.Store          = (*Store)(nil)
	_ backend.SettleClaimer  = (*Store)(nil)
	_ backend.StatsReader    = (*Store)(nil)
	_ backend.Purger         = (*Store)(nil)
	_ backend.HeadStartEnder = (*Store)(nil)
)

// NewStore returns an empty store on the wall clock.
func NewStore() *Store {
	return &Store{now: time.Now, records: map[string]*memRecord{}}
}

// clock is the store's time, UTC with the microsecond precision of a
// database column.
func (s *Store) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// Begin starts a transaction to enqueue into.
func (s *Store) Begin() *Tx { return &Tx{store: s} }

// Tx collects the messages enqueued through it until Commit. It satisfies
// outbox.Execer only so that it can be passed to Enqueue: ExecContext
// fails, as there is no database behind it.
type Tx struct {
	store   *Store
	mu      sync.Mutex
	pending []*memRecord
	done    bool
}

// ExecContext fails: a Tx only collects enqueued messages.
func (tx *Tx) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	return nil, errors.New("outboxtest: a Tx runs no SQL; it only collects enqueued messages")
}

// Commit makes the collected messages visible. It fails with
// outbox.ErrDuplicateID, and writes nothing, if another transaction
// committed one of their IDs meanwhile.
func (tx *Tx) Commit() error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return sql.ErrTxDone
	}
	tx.done = true
	return tx.store.insert(tx.pending)
}

// Rollback drops the collected messages.
func (tx *Tx) Rollback() error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return sql.ErrTxDone
	}
	tx.done, tx.pending = true, nil
	return nil
}

// Enqueue stores msgs as pending, through tx: a *Tx from Begin (visible at
// its Commit), or any other Execer (at once). The rules are the
// contract's: invalid messages fail with backend.ErrInvalidMessage, IDs
// given twice or already stored with backend.ErrDuplicateID, and nothing
// of a failed call is written.
func (s *Store) Enqueue(_ context.Context, tx backend.Execer, opts *backend.EnqueueOptions, msgs ...backend.Message) error {
	if tx == nil {
		return errors.New("outboxtest: enqueue: tx is nil")
	}
	var headStart time.Duration
	if opts != nil {
		headStart = opts.HeadStart
	}
	if headStart < 0 {
		return fmt.Errorf("outboxtest: enqueue: HeadStart %v: must not be negative", headStart)
	}
	recs, err := s.newRecords(msgs, headStart)
	if err != nil {
		return err
	}
	if t, ok := tx.(*Tx); ok && t.store == s {
		return t.add(recs)
	}
	return s.insert(recs)
}

func (tx *Tx) add(recs []*memRecord) error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return sql.ErrTxDone
	}
	for _, r := range recs {
		if slices.ContainsFunc(tx.pending, func(p *memRecord) bool { return p.rec.ID == r.rec.ID }) {
			return fmt.Errorf("outboxtest: enqueue: message ID %q already exists: %w", r.rec.ID, backend.ErrDuplicateID)
		}
	}
	if err := tx.store.checkFree(recs); err != nil {
		return err
	}
	tx.pending = append(tx.pending, recs...)
	return nil
}

// newRecords validates msgs and makes their records, numbered in order.
func (s *Store) newRecords(msgs []backend.Message, headStart time.Duration) ([]*memRecord, error) {
	seen := map[string]bool{}
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("outboxtest: enqueue: message %d: %w", i, err)
		}
		if seen[m.ID] {
			return nil, fmt.Errorf("outboxtest: enqueue: message ID %q appears twice: %w", m.ID, backend.ErrDuplicateID)
		}
		seen[m.ID] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	recs := make([]*memRecord, len(msgs))
	for i, m := range msgs {
		s.seq++
		m.Payload = append([]byte{}, m.Payload...)
		m.Headers = maps.Clone(m.Headers)
		if len(m.Headers) == 0 {
			m.Headers = nil
		}
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		} else {
			m.CreatedAt = m.CreatedAt.UTC().Truncate(time.Microsecond)
		}
		recs[i] = &memRecord{rec: backend.Record{
			Message: m, Status: backend.StatusPending, Seq: s.seq, EnqueuedAt: now, NextAttemptAt: now.Add(headStart),
		}}
	}
	return recs, nil
}

// checkFree fails if a record's ID is already stored.
func (s *Store) checkFree(recs []*memRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkFreeLocked(recs)
}

func (s *Store) checkFreeLocked(recs []*memRecord) error {
	for _, r := range recs {
		if _, ok := s.records[r.rec.ID]; ok {
			return fmt.Errorf("outboxtest: enqueue: message ID %q already exists: %w", r.rec.ID, backend.ErrDuplicateID)
		}
	}
	return nil
}

// insert stores recs, all or none.
func (s *Store) insert(recs []*memRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkFreeLocked(recs); err != nil {
		return err
	}
	for _, r := range recs {
		s.records[r.rec.ID] = r
	}
	return nil
}

// Get returns the record with message ID id, or an error wrapping
// backend.ErrNotFound.
func (s *Store) Get(_ context.Context, id string) (backend.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok {
		return backend.Record{}, fmt.Errorf("outboxtest: get %q: %w", id, backend.ErrNotFound)
	}
	return r.copy(), nil
}

// copy is the record as a caller may keep it: no slice or map shared with
// the store.
func (r *memRecord) copy() backend.Record {
	c := r.rec
	c.Payload = append([]byte{}, r.rec.Payload...)
	c.Headers = maps.Clone(r.rec.Headers)
	return c
}

// EndHeadStart makes those of ids that are pending, never attempted, not
// leased and not yet due (a head start) due now, and returns how many.
func (s *Store) EndHeadStart(_ context.Context, ids []string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	n := 0
	for _, id := range ids {
		r, ok := s.records[id]
		if ok && r.rec.Status == backend.StatusPending && r.token == "" && r.rec.Attempts == 0 && r.rec.NextAttemptAt.After(now) {
			r.rec.NextAttemptAt = now
			n++
		}
	}
	return n, nil
}

// Capabilities reports what the store does beyond backend.Store: one
// step to settle and claim, the early end of a head start, and
// retention.
func (s *Store) Capabilities() backend.Capabilities {
	c := backend.Discover(s)
	c.Outbox = s.Name()
	return c
}
