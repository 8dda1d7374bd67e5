package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Claim leases up to p.Limit due pending records (or the pending records
// named by p.IDs) for p.LeaseFor, skipping records other claims hold.
//
// It runs one short READ COMMITTED transaction: locking selects (SELECT …
// FOR UPDATE SKIP LOCKED) of the claimable rows, then an UPDATE that stamps
// the lease (a fresh random token, the owner, and next_attempt_at moved to
// the lease's end), then COMMIT, before the caller publishes anything.
// READ COMMITTED takes no gap locks, so a claim never blocks a writer's
// Enqueue. Records are returned in due order (p.IDs: in insert order).
// With p.Ordered, see lockOrdered.
func (s *channel) Claim(ctx context.Context, p backend.ClaimParams) (backend.Batch, error) {
	_, batch, err := s.claim(ctx, nil, p)
	return batch, err
}

// SettleAndClaim records st as Settle does and claims as Claim does, in
// one transaction: one commit per batch. It settles first, so that in
// ordered mode the keys those outcomes free are claimable at once. If it
// fails, nothing of it is recorded.
func (s *channel) SettleAndClaim(ctx context.Context, st backend.Settlement, p backend.ClaimParams) (backend.SettleResult, backend.Batch, error) {
	return s.claim(ctx, &st, p)
}

// claim runs a claim's transaction, recording st first when it is given.
func (s *channel) claim(ctx context.Context, st *backend.Settlement, p backend.ClaimParams) (backend.SettleResult, backend.Batch, error) {
	var settled backend.SettleResult
	if err := validateClaim(p); err != nil {
		return settled, backend.Batch{}, err
	}
	token, err := newToken()
	if err != nil {
		return settled, backend.Batch{}, fmt.Errorf("mysql store: claim: lease token: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, claimTxOptions)
	if err != nil {
		return settled, backend.Batch{}, s.wrap("claim", err)
	}
	defer func() { _ = tx.Rollback() }()
	if st != nil {
		if settled, err = s.applySettle(st.Token, st.Outcomes, txExec(ctx, tx)); err != nil {
			return backend.SettleResult{}, backend.Batch{}, s.wrap("claim: settle", err)
		}
	}
	rows, changed, err := s.lockClaimable(ctx, tx, p)
	if err != nil {
		return backend.SettleResult{}, backend.Batch{}, s.wrap("claim", err)
	}
	if len(rows) == 0 && st == nil && !changed {
		return settled, backend.Batch{}, nil
	}
	if len(rows) > 0 {
		args := append([]any{token, p.Owner, p.LeaseFor.Microseconds()}, seqsOf(rows)...)
		if _, err := tx.ExecContext(ctx, s.q.leasePrefix+placeholders(len(rows))+")", args...); err != nil {
			return backend.SettleResult{}, backend.Batch{}, s.wrap("claim", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return backend.SettleResult{}, backend.Batch{}, s.wrap("claim", err)
	}
	return settled, toBatch(token, rows), nil
}

// lockClaimable locks the records p asks for, reads their payloads within
// the claim's byte budget, and drops the records of messages purged since
// they were handed over to a named consumer (changed reports that it did).
func (s *channel) lockClaimable(ctx context.Context, tx *sql.Tx, p backend.ClaimParams) (rows []scannedRecord, changed bool, err error) {
	budget := newBudget(s.maxClaimBytes)
	switch {
	case p.Ordered && len(p.IDs) > 0:
		rows, err = s.lockOrderedIDs(ctx, tx, budget, p)
	case p.Ordered:
		rows, err = s.lockOrdered(ctx, tx, budget, p.Limit)
	case len(p.IDs) > 0:
		rows, err = readRowsWithin(ctx, tx, budget, s.q.claimIDsPrefix+placeholders(len(p.IDs))+s.q.claimIDsSuffix, append(anyArgs(p.IDs), p.Limit)...)
	default:
		rows, err = readRowsWithin(ctx, tx, budget, s.q.claimDue, p.Limit)
	}
	if err != nil {
		return nil, false, err
	}
	rows, orphans, err := s.fill(ctx, tx, budget, rows)
	if err != nil || len(orphans) == 0 {
		return rows, false, err
	}
	if _, err := tx.ExecContext(ctx, s.q.dropPrefix+placeholders(len(orphans))+")", anyArgs(orphans)...); err != nil {
		return nil, false, fmt.Errorf("drop records of purged messages: %w", err)
	}
	return rows, true, nil
}

// txExec runs the statements of a settle in tx.
func txExec(ctx context.Context, tx *sql.Tx) func(query string, args ...any) (int64, error) {
	return func(query string, args ...any) (int64, error) {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
}

func seqsOf(rows []scannedRecord) []any {
	out := make([]any, len(rows))
	for i, r := range rows {
		out[i] = r.seq
	}
	return out
}

// toBatch is the claimed rows as a batch under token: the undecodable
// apart.
func toBatch(token string, rows []scannedRecord) backend.Batch {
	if len(rows) == 0 {
		return backend.Batch{}
	}
	batch := backend.Batch{Token: token}
	for _, r := range rows {
		if r.decodeErr != nil {
			batch.Invalid = append(batch.Invalid, backend.InvalidRecord{Record: r.rec, Err: r.decodeErr})
		} else {
			batch.Records = append(batch.Records, r.rec)
		}
	}
	return batch
}

// claimTxOptions: READ COMMITTED, because under REPEATABLE READ the
// claim's range scan would take next-key (gap) locks, and a writer
// inserting a new due record into that gap would wait for the claim to
// commit (TestClaimDoesNotBlockWriters).
var claimTxOptions = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// Ordered claims. A key's head is its oldest pending record (lowest id).
// Only heads are claimed, and only when due and not leased; as a leased or
// failed head is still pending, nothing else of its key is claimable until
// it is published (or dead): at most one record per key is in flight, in
// id order, on every instance.
const (
	// headWindowFactor × the wanted count is how many keys one window of
	// the head scan reads.
	headWindowFactor = 4
	minHeadWindow    = 64
	// maxHeadWindows bounds the windows one claim reads, so that a claim
	// costs O(window) even with many keys whose heads are not due; the
	// next claim goes on from where this one stopped.
	maxHeadWindows = 8
)

// lockOrdered claims unkeyed records (unordered; a quarter of the batch is
// kept for them so that busy keys cannot starve them) and key heads.
func (s *channel) lockOrdered(ctx context.Context, tx *sql.Tx, budget *byteBudget, limit int) ([]scannedRecord, error) {
	unkeyed, err := readRowsWithin(ctx, tx, budget, s.q.claimUnkeyed, uint64(0), max(1, limit/4))
	if err != nil {
		return nil, err
	}
	heads, err := s.lockHeads(ctx, tx, budget, limit-len(unkeyed))
	if err != nil {
		return nil, err
	}
	out := append(unkeyed, heads...)
	if room := limit - len(out); room > 0 && len(unkeyed) == max(1, limit/4) && !budget.full {
		more, err := readRowsWithin(ctx, tx, budget, s.q.claimUnkeyed, unkeyed[len(unkeyed)-1].seq, room)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// lockHeads claims up to want due key heads, walking the keys in order
// from a cursor kept across claims: a round robin, so that every key with
// a due head gets its turn before any key gets a second one. The walk
// wraps around to the first key at most once and stops where it began;
// SKIP LOCKED does not skip this transaction's own locks, so a key is
// never offered to the locking select twice.
func (s *channel) lockHeads(ctx context.Context, tx *sql.Tx, budget *byteBudget, want int) ([]scannedRecord, error) {
	if want <= 0 || budget.full {
		return nil, nil
	}
	window := max(headWindowFactor*want, minHeadWindow)
	s.cursorMu.Lock()
	start := s.keyCursor
	s.cursorMu.Unlock()
	cursor, wrapped, done := start, false, false
	var out []scannedRecord
	for i := 0; i < maxHeadWindows && !done; i++ {
		heads, err := s.headWindow(ctx, tx, cursor, window)
		if err != nil {
			return nil, err
		}
		full := len(heads) == window
		if len(heads) > 0 {
			cursor = heads[len(heads)-1].key
		}
		if wrapped { // the second lap ends where the first began
			if i := slices.IndexFunc(heads, func(h keyHead) bool { return h.key > start }); i >= 0 {
				heads, done, cursor = heads[:i], true, start
			}
		}
		if len(heads) > 0 {
			ids := make([]any, len(heads))
			for i, h := range heads {
				ids[i] = h.id
			}
			// Due heads in key order: the walk goes on after the last one taken.
			rows, err := readRowsWithin(ctx, tx, budget, s.q.claimHeadsPrefix+placeholders(len(ids))+s.q.claimHeadsSuffix, append(ids, want-len(out))...)
			if err != nil {
				return nil, err
			}
			out = append(out, rows...)
			if len(out) == want || budget.full {
				// The next claim goes on after the last head taken (or,
				// with none taken, where this one began).
				cursor = start
				if len(out) > 0 {
					cursor = out[len(out)-1].rec.Key
				}
				break
			}
		}
		if !full && !done { // past the last key: once more from the first
			cursor = ""
			done = wrapped || start == ""
			wrapped = true
		}
	}
	s.cursorMu.Lock()
	s.keyCursor = cursor
	s.cursorMu.Unlock()
	return out, nil
}

type keyHead struct {
	key string
	id  uint64
}

// headWindow returns the heads of up to window keys after cursor, in key
// order, by a loose index scan of idx_key (one read per key).
func (s *channel) headWindow(ctx context.Context, tx *sql.Tx, cursor string, window int) ([]keyHead, error) {
	rows, err := tx.QueryContext(ctx, s.q.keyHeads, cursor, window)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var heads []keyHead
	for rows.Next() {
		var h keyHead
		if err := rows.Scan(&h.key, &h.id); err != nil {
			return nil, err
		}
		heads = append(heads, h)
	}
	return heads, rows.Err()
}

// lockOrderedIDs is the after-commit claim in ordering mode: of each key,
// the named records are claimed only if they are the key's oldest pending
// records (none older waits, and none is leased), so the writer may
// publish them in order; otherwise the worker will, later.
func (s *channel) lockOrderedIDs(ctx context.Context, tx *sql.Tx, budget *byteBudget, p backend.ClaimParams) ([]scannedRecord, error) {
	rows, err := readRowsWithin(ctx, tx, budget, s.q.claimIDsPrefix+placeholders(len(p.IDs))+s.q.claimIDsSuffix, append(anyArgs(p.IDs), p.Limit)...)
	if err != nil {
		return nil, err
	}
	byKey := map[string][]uint64{}
	for _, r := range rows {
		if r.rec.Key != "" {
			byKey[r.rec.Key] = append(byKey[r.rec.Key], r.seq)
		}
	}
	headsOf := map[string]bool{}
	for key, seqs := range byKey {
		var oldest []uint64
		q, err := tx.QueryContext(ctx, s.q.oldestPending, key, len(seqs))
		if err != nil {
			return nil, err
		}
		for q.Next() {
			var seq uint64
			if err := q.Scan(&seq); err != nil {
				q.Close()
				return nil, err
			}
			oldest = append(oldest, seq)
		}
		q.Close()
		if err := q.Err(); err != nil {
			return nil, err
		}
		headsOf[key] = slices.Equal(oldest, seqs)
	}
	return slices.DeleteFunc(rows, func(r scannedRecord) bool { return r.rec.Key != "" && !headsOf[r.rec.Key] }), nil
}

// anyArgs passes values as statement arguments.
func anyArgs[T any](vs []T) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

func validateClaim(p backend.ClaimParams) error {
	var errs []error
	if p.Owner == "" || utf8.RuneCountInString(p.Owner) > backend.MaxOwnerLength {
		errs = append(errs, fmt.Errorf("mysql store: claim: Owner %q: must be 1 to %d characters", p.Owner, backend.MaxOwnerLength))
	}
	if p.Limit < 1 || p.Limit > backend.MaxClaimLimit {
		errs = append(errs, fmt.Errorf("mysql store: claim: Limit %d: must be 1 to %d", p.Limit, backend.MaxClaimLimit))
	}
	if p.LeaseFor.Microseconds() < 1 {
		errs = append(errs, fmt.Errorf("mysql store: claim: LeaseFor %v: must be at least 1µs", p.LeaseFor))
	}
	if len(p.IDs) > p.Limit {
		errs = append(errs, fmt.Errorf("mysql store: claim: %d IDs: more than Limit %d", len(p.IDs), p.Limit))
	}
	return errors.Join(errs...)
}

// newToken returns a random lease token: 32 hex digits.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
