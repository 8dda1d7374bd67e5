package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Claim leases up to p.Limit due pending records (or the pending records
// named by p.IDs) for p.LeaseFor, skipping records other claims hold.
//
// It runs one short READ COMMITTED transaction: locking selects (SELECT …
// FOR UPDATE SKIP LOCKED) of the claimable rows, then an UPDATE that stamps
// the lease (a fresh random token, and the lease's end), then COMMIT, before the caller publishes anything.
// READ COMMITTED takes no gap locks, so a claim never blocks a writer's
// Enqueue. Records are returned in due order (p.IDs: in insert order).
// A claim of due records resumes the scan where the last claim stopped
// (see lockDue), so that it does not step again over what that claim has
// just taken.
// With p.Ordered, only key heads are claimed, as backend.ClaimParams
// describes; a quarter of the batch is kept for records without a key.
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
// A transaction the server rolled back as a deadlock victim is run again:
// a purge or another claimer can deadlock with it (seen on MariaDB 11.8),
// and nothing of it was applied.
func (s *channel) claim(ctx context.Context, st *backend.Settlement, p backend.ClaimParams) (backend.SettleResult, backend.Batch, error) {
	if err := validateClaim(p); err != nil {
		return backend.SettleResult{}, backend.Batch{}, err
	}
	var (
		settled backend.SettleResult
		batch   backend.Batch
	)
	err := retryRolledBack(ctx, func() error {
		var err error
		settled, batch, err = s.claimTx(ctx, st, p)
		return err
	})
	return settled, batch, err
}

// claimTx is one try of claim.
func (s *channel) claimTx(ctx context.Context, st *backend.Settlement, p backend.ClaimParams) (backend.SettleResult, backend.Batch, error) {
	var settled backend.SettleResult
	token, lease, err := newLeaseToken()
	if err != nil {
		return settled, backend.Batch{}, fmt.Errorf("mysql store: claim: lease token: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, readCommitted)
	if err != nil {
		return settled, backend.Batch{}, s.wrap("claim", err)
	}
	defer func() { _ = tx.Rollback() }()
	if st != nil {
		exec := func(st statement) (int64, error) { return st.exec(ctx, tx) }
		if settled, err = s.applySettle(st.Token, st.Outcomes, exec); err != nil {
			return backend.SettleResult{}, backend.Batch{}, s.wrap("claim: settle", err)
		}
	}
	rows, changed, more, err := s.lockClaimable(ctx, tx, p)
	if err != nil {
		return backend.SettleResult{}, backend.Batch{}, s.wrap("claim", err)
	}
	if len(rows) == 0 && st == nil && !changed {
		return settled, backend.Batch{}, nil
	}
	if len(rows) > 0 {
		if _, err := leaseSQL(s.t, lease, p.LeaseFor, rows).exec(ctx, tx); err != nil {
			return backend.SettleResult{}, backend.Batch{}, s.wrap("claim", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return backend.SettleResult{}, backend.Batch{}, s.wrap("claim", err)
	}
	batch := toBatch(token, rows)
	batch.More = more && len(rows) > 0
	return settled, batch, nil
}

// lockClaimable locks the records p asks for, reads their payloads within
// the claim's byte budget, and drops the records of messages purged since
// they were handed over to a named consumer. changed reports that it
// wrote something (dropped such records), so that the transaction is
// committed even with no record claimed. more reports due records left
// behind (backend.Batch.More): the limit or the budget stopped the claim,
// or, ordered, pending records of the keys whose heads it took remain.
func (s *channel) lockClaimable(ctx context.Context, tx *sql.Tx, p backend.ClaimParams) (rows []scannedRecord, changed, more bool, err error) {
	budget := newBudget(s.maxClaimBytes)
	switch {
	case p.Ordered && len(p.IDs) > 0:
		rows, err = s.lockOrderedIDs(ctx, tx, budget, p)
	case p.Ordered:
		rows, err = s.lockOrdered(ctx, tx, budget, p.Limit)
	case len(p.IDs) > 0:
		rows, err = readRowsWithin(ctx, tx, budget, claimIDsSQL(s.t, p.IDs, p.Limit))
		rows = exactly(rows, p.IDs)
	default:
		rows, err = s.lockDue(ctx, tx, budget, p.Limit)
	}
	if err != nil {
		return nil, false, false, err
	}
	more = len(p.IDs) == 0 && len(rows) >= p.Limit
	rows, orphans, err := s.fill(ctx, tx, budget, rows)
	if err != nil {
		return nil, false, false, err
	}
	if len(p.IDs) == 0 && !more {
		more = budget.full
		if p.Ordered && !more {
			if more, err = behindHeads(ctx, tx, s.t, rows); err != nil {
				return nil, false, false, err
			}
		}
	}
	if len(orphans) == 0 {
		return rows, false, more, nil
	}
	if _, err := dropOrphansSQL(s.t, orphans).exec(ctx, tx); err != nil {
		return nil, false, false, fmt.Errorf("drop records of purged messages: %w", err)
	}
	return rows, true, more, nil
}

// claimDueSQL locks up to limit due pending records in due order,
// skipping those other claims hold. TestClaimPlan keeps its plan: a range
// scan of idx_due that stops after limit rows, whatever the backlog.
func claimDueSQL(t *target, limit int) statement {
	return claimDueWhere(t, "", limit)
}

// claimDueAfterSQL is claimDueSQL for the records after the position at
// in idx_due. The two ranges start at at, so that the scan skips every
// entry before it, those of at's due time included.
func claimDueAfterSQL(t *target, at duePos, limit int) statement {
	next := at.next.Format(dbTimeLayout)
	return claimDueWhere(t, "((next_attempt_at = ? AND {seq} > ?) OR next_attempt_at > ?) AND ", limit, next, at.seq, next)
}

// claimDueBeforeSQL is claimDueSQL for the records up to the position at
// in idx_due, at included.
func claimDueBeforeSQL(t *target, at duePos, limit int) statement {
	next := at.next.Format(dbTimeLayout)
	return claimDueWhere(t, "(next_attempt_at < ? OR (next_attempt_at = ? AND {seq} <= ?)) AND ", limit, next, next, at.seq)
}

// claimDueWhere is the claim of due records within the range of idx_due
// that where (with its args) adds. After the record's columns it selects
// next_attempt_at itself, the record's place in idx_due (see lockDue).
func claimDueWhere(t *target, where string, limit int, args ...any) statement {
	return t.render("SELECT {cols}, next_attempt_at FROM {table} WHERE {scope}status = 'pending' AND "+where+"next_attempt_at <= UTC_TIMESTAMP(6) AND "+unclaimed+" ORDER BY next_attempt_at, {seq} LIMIT ? FOR UPDATE SKIP LOCKED", append(args, limit)...)
}

// unclaimed is the condition of a record no claim holds: not leased by
// a worker, or its lease is over. A claim's lease moves the record's
// next_attempt_at to the lease's end (see leaseSQL), so a claim of due
// records does not even read the records other claims hold; the check
// stays for leases that older builds wrote, which did not. A
// writer's head start is not a claim: it keeps its record from being
// due. Nor is a requeued record's wait for its key (see
// orderedUnclaimed): without ordering it is due at once.
const unclaimed = "(lease_id <= 0 OR lease_until <= UTC_TIMESTAMP(6))"

// orderedUnclaimed is unclaimed for an ordered claim of key heads (whose
// table is h): a requeued dead letter that waits for the record of its
// key in flight (lease_id requeueWaitID, see Requeue) is claimed once no
// record of its key is leased any more, or when that lease would have
// ended. Only such records run the check, which reads the key's pending
// records.
const orderedUnclaimed = "(lease_id = 0 OR lease_until <= UTC_TIMESTAMP(6) OR (lease_id = " + requeueWaitSQL + " AND NOT EXISTS (SELECT 1 FROM {table} y WHERE {scope}y.status = 'pending' AND y.event_key = h.event_key AND y." + workerLeased + " AND y.lease_until > UTC_TIMESTAMP(6))))"

// requeueWaitID is the lease_id of a requeued dead letter whose key had a
// record in flight when it was requeued: not a lease anyone holds or
// settles (no token maps to it: a head start's lease_id is at least
// -2^60), but a mark that ordered claims check (orderedUnclaimed).
const (
	requeueWaitID  = math.MinInt64
	requeueWaitSQL = "-9223372036854775808"
)

// exactly keeps the rows whose IDs are among ids, byte for byte: a list
// of IDs matches event_id with PAD SPACE, where "x" = "x " (see exactID).
func exactly(rows []scannedRecord, ids []string) []scannedRecord {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	return slices.DeleteFunc(rows, func(r scannedRecord) bool { return !want[r.rec.ID] })
}

// claimIDsSQL locks the named pending records that no other process
// holds (not leased, leased by this process's head start, or whose lease
// has run out), whatever their due time.
func claimIDsSQL(t *target, ids []string, limit int) statement {
	args := make([]any, 0, len(ids)+2)
	for _, id := range ids {
		args = append(args, id)
	}
	return t.renderList("SELECT {cols} FROM {table} WHERE {scope}event_id IN ({list}) AND status = 'pending' AND (lease_id = 0 OR lease_id = ? OR (lease_until <= UTC_TIMESTAMP(6) AND next_attempt_at <= UTC_TIMESTAMP(6))) ORDER BY {seq} LIMIT ? FOR UPDATE SKIP LOCKED", len(ids), append(args, headStartID, limit)...)
}

// headStartToken is the lease token of the records this process enqueues
// with a head start (backend.EnqueueOptions.HeadStart): the writer's
// transaction leases them to the process's own after-commit publish, for
// the head start, so that publish needs no claim of its own (see
// Store.HeadStartBatch). It is random per process, and starts with 'h',
// which no claim's token (hex digits) does, so that its lease_id,
// headStartID, is negative and queries can tell a head start from a
// worker's lease.
var headStartToken, headStartID = func() (string, int64) {
	t, _, err := newLeaseToken()
	if err != nil {
		panic("mysql store: no randomness for the head start token: " + err.Error())
	}
	id, ok := leaseID("h" + t[1:])
	if !ok {
		panic("mysql store: head start token " + t)
	}
	return "h" + t[1:], id
}()

// workerLeased is the condition of a pending record a claim holds (its
// lease may have run out): leased, and not by a writer's head start.
const workerLeased = "lease_id > 0"

// leaseSQL leases the locked rows: a fresh token, and when the lease
// ends, in lease_until and in next_attempt_at, so that a record whose
// worker dies becomes due again by itself. next_attempt_at is when a
// pending record is next due, and a leased record is next due when its
// lease ends: moving it there takes the record out of the range of
// idx_due that claims of due records scan, so that a claim never steps
// over the records other instances hold (issue 30: at 4 workers a claim
// read 3.6 rows per row it took, and more with every instance added).
// It costs the lease a move of one idx_due entry. lease_until is written
// too, for the conditions that tell a live lease from one that ran out
// (unclaimed, orderedUnclaimed) and for an older build in a rolling deploy
// (schema version 8 too), whose claims of due records skip a lease by it. (The
// owner is not written: a column of up to 255 characters, set on each
// claim, would grow or rewrite every row; the worker logs its node ID.)
func leaseSQL(t *target, lease int64, leaseFor time.Duration, rows []scannedRecord) statement {
	args := make([]any, 0, len(rows)+3)
	args = append(args, lease, leaseFor.Microseconds(), leaseFor.Microseconds())
	for _, r := range rows {
		args = append(args, r.seq)
	}
	return t.renderList("UPDATE {table} SET lease_id = ?, lease_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, next_attempt_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE {scope}{seq} IN ({list})", len(rows), args...)
}

// dropOrphansSQL deletes a named consumer's records of messages that
// retention purged after they were handed over.
func dropOrphansSQL(t *target, seqs []uint64) statement {
	return t.renderList("DELETE FROM {table} WHERE {scope}{seq} IN ({list})", len(seqs), anyArgs(seqs)...)
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

// newLeaseToken returns a random lease token, leaseTokenLength hex
// digits, and its leaseID: 63 random bits, the lowest set. A lease's
// token only has to differ from the other leases of the same record.
func newLeaseToken() (string, int64, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", 0, err
	}
	id := int64(binary.BigEndian.Uint64(b[:])&math.MaxInt64 | 1)
	return fmt.Sprintf("%016x", id), id, nil
}

// leaseTokenLength is the length of a lease token.
const leaseTokenLength = 16

// leaseID is the number a token fences in the lease_id column, and
// whether the token is one the store makes. A worker's token is 16 hex
// digits: its value with the top bit cleared and the lowest set, so that
// it is positive and never 0 (no lease). A writer's head start token is
// 'h' and 15 hex digits: -1 minus their value, so that it is negative.
// A 32-digit token of schema version 4 fences by its first 16 digits
// (the upgrade to version 5 kept those, and the one to version 6 maps
// them the same way).
func leaseID(token string) (int64, bool) {
	if len(token) > leaseTokenLength {
		token = token[:leaseTokenLength]
	}
	if rest, ok := strings.CutPrefix(token, "h"); ok {
		n, err := strconv.ParseUint(rest, 16, 60)
		if err != nil || len(rest) != leaseTokenLength-1 {
			return 0, false
		}
		return -1 - int64(n), true
	}
	n, err := strconv.ParseUint(token, 16, 64)
	if err != nil || len(token) != leaseTokenLength {
		return 0, false
	}
	return int64(n&math.MaxInt64 | 1), true
}

// newToken returns a random token: 32 hex digits.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
