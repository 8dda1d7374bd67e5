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

	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/internal/storecore"
)

// Claim takes up to p.Limit records for the consumer (see
// backend.Store): a range of the log past the consumer's position (one
// row written for the whole batch, whatever its size), after the due
// records that have a state row (failed, released, held back). See
// LOG-DESIGN.md. The claim is committed when Claim returns; no
// transaction stays open while the caller publishes.
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

// gapWait bounds how long a claim that found nothing but a hole an open
// transaction holds (see gap.go) polls for it before it returns with
// RetryAfter.
const gapWait = 500 * time.Millisecond

// claim runs a claim's transaction, recording st first when it is given,
// and then, when the walk stopped at a hole before it took anything, the
// hole's step (gap.go): it looks again at once when the hole is filled or
// passed, polls for up to gapWait while a transaction holds it, and says
// when to come back (RetryAfter) otherwise.
func (s *channel) claim(ctx context.Context, st *backend.Settlement, p backend.ClaimParams) (backend.SettleResult, backend.Batch, error) {
	if err := p.Validate("mysql store"); err != nil {
		return backend.SettleResult{}, backend.Batch{}, err
	}
	if st != nil {
		var err error
		if st.Outcomes, err = backend.CheckOutcomes(s.what, st.Outcomes); err != nil {
			return backend.SettleResult{}, backend.Batch{}, err
		}
	}
	t, err := s.resolve(ctx)
	if err != nil {
		return backend.SettleResult{}, backend.Batch{}, err
	}
	token, lease, err := newLeaseToken()
	if err != nil {
		return backend.SettleResult{}, backend.Batch{}, fmt.Errorf("%s: claim: lease token: %w", s.what, err)
	}
	if err := s.lookForLateArrivals(ctx, t); err != nil {
		return backend.SettleResult{}, backend.Batch{}, s.wrap("claim: late arrivals", err)
	}
	var settled backend.SettleResult
	deadline := time.Now().Add(gapWait)
	pause := 2 * time.Millisecond
	for range maxGapSteps {
		var (
			rows []scannedRecord
			more bool
			h    *hole
		)
		err := retryRolledBack(ctx, func() error {
			return inTx(ctx, s.db, func(tx *sql.Tx) error {
				// The consumer's row first, settle or not, as the claim
				// takes it: a settle that locked its rows and then waited
				// for it would deadlock with a claim that holds it and
				// waits for one of them.
				var c consumerRow
				var err error
				if len(p.IDs) > 0 {
					c, err = lockConsumer(ctx, tx, t, true)
				} else {
					c, err = lockForWalk(ctx, tx, t)
				}
				if err != nil {
					return err
				}
				if st != nil {
					if settled, err = settleIn(ctx, tx, t, st.Token, st.Outcomes); err != nil {
						return fmt.Errorf("settle: %w", err)
					}
					// A record it did not settle as published may have a
					// state row due now.
					c.due = c.due || (len(st.Outcomes) > 0 && !backend.AllPublished(st.Outcomes))
				}
				if len(p.IDs) > 0 {
					rows, err = claimIDs(ctx, tx, t, c, lease, p, s.maxClaimBytes)
					return err
				}
				rows, more, h, err = logClaim(ctx, tx, t, c, lease, p, s.maxClaimBytes)
				return err
			})
		})
		if err != nil {
			return backend.SettleResult{}, backend.Batch{}, s.claimErr(err)
		}
		st = nil // recorded: a second round only claims
		if len(rows) > 0 || len(p.IDs) > 0 || h == nil {
			b := toBatch(token, rows)
			b.More = len(p.IDs) == 0 && len(rows) > 0 && (more || len(rows) >= p.Limit)
			return settled, b, nil
		}
		// Each of the step's statements is idempotent (a probe rolled
		// back, a stamp that keeps the first, a pass that checks the
		// position first): a deadlock victim's step is taken again.
		var (
			verdict gapVerdict
			wait    time.Duration
		)
		err = retryRolledBack(ctx, func() error {
			var err error
			verdict, wait, err = stepGap(ctx, s.db, t, *h, s.gapTimeout)
			return err
		})
		if err != nil {
			return backend.SettleResult{}, backend.Batch{}, s.wrap("claim: the log's gap", err)
		}
		switch verdict {
		case gapFilled, gapPassed:
			continue
		case gapAging:
			return settled, backend.Batch{RetryAfter: max(wait, time.Millisecond)}, nil
		}
		// Held by a transaction still open: poll for a while.
		if time.Now().Add(pause).After(deadline) {
			return settled, backend.Batch{RetryAfter: 50 * time.Millisecond}, nil
		}
		timer := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return settled, backend.Batch{}, s.claimErr(ctx.Err())
		case <-timer.C:
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
	return settled, backend.Batch{RetryAfter: 50 * time.Millisecond}, nil
}

// maxGapSteps bounds the rounds of one claim through holes of the log.
const maxGapSteps = 64

func (s *channel) claimErr(err error) error {
	if errors.Is(err, ErrUnknownConsumer) {
		return fmt.Errorf("%s: %w", s.what, ErrUnknownConsumer)
	}
	return s.wrap("claim", err)
}

// inTx runs fn in a READ COMMITTED transaction of db, committed if fn
// succeeds.
func inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	return storecore.InTx(ctx, db, readCommitted, nil, fn)
}

// claimIDs leases those of p.IDs that are pending for the consumer and
// held by no one: not yet read from the log, or passed by the walk while
// their writer held them (the held list), which then get a state row
// that the log's readers pass over; or with a due or expired state row.
// Ordered, a key's records only when they are the key's oldest pending
// ones (the others of the IDs aside), and then all of them. The registry
// row, c, is read in share mode (by the caller): claims by ID (writers' publishes, each of
// its own messages) run beside each other, and a walk, which locks the
// row to move the position and the held list, waits for them as they
// wait for it.
func claimIDs(ctx context.Context, tx *sql.Tx, t *target, c consumerRow, lease int64, p backend.ClaimParams, maxBytes int) ([]scannedRecord, error) {
	type cand struct {
		heldMessage
		hasState bool
	}
	args := append(append([]any{headStartID}, anyArgs(p.IDs)...), c.startSeq)
	q, err := t.renderList(`SELECT o.id, o.event_id, o.event_key, s.id IS NOT NULL,
	IF(s.id IS NOT NULL, s.status = 'pending' AND (s.lease_token = 0 OR s.next_attempt_at <= UTC_TIMESTAMP(6)),
		NOT ({c} = 0 AND `+byWriter+`) AND NOT ({c} = 0 AND o.writer_token NOT IN (0, ?) AND `+heldByWriter+`))
FROM {outbox} o LEFT JOIN {state} s FORCE INDEX ({primary}) ON s.consumer_id = {c} AND s.id = o.id
WHERE o.event_id IN ({list}) AND o.id > ? ORDER BY o.id`, len(p.IDs), args...).query(ctx, tx)
	if err != nil {
		return nil, err
	}
	var cands []cand
	for q.Next() {
		var (
			x   cand
			id  string
			key []byte
			ok  bool
		)
		if err := q.Scan(&x.id, &id, &key, &x.hasState, &ok); err != nil {
			q.Close()
			return nil, err
		}
		x.key = string(key)
		if !ok || !slices.Contains(p.IDs, id) {
			continue
		}
		// Without a state row: only past the position, or on the held list.
		if !x.hasState && x.id <= c.walked && !slices.Contains(c.held, x.id) {
			continue
		}
		cands = append(cands, x)
	}
	// A row's error (a deadlock victim's, say: the server has rolled
	// the transaction back, and what runs after it would run outside
	// one) is in Err, not Close.
	if err := errors.Join(q.Err(), q.Close()); err != nil {
		return nil, err
	}
	if p.Ordered && len(cands) > 0 {
		g, err := readGate(ctx, tx, t, nil)
		if err != nil {
			return nil, err
		}
		mine := map[uint64]string{}
		var keys []string
		for _, x := range cands {
			mine[x.id] = x.key
			if x.key != "" && !slices.Contains(keys, x.key) {
				keys = append(keys, x.key)
			}
		}
		still, err := heldUndelivered(ctx, tx, t, c.held)
		if err != nil {
			return nil, err
		}
		for _, m := range still {
			if _, isMine := mine[m.id]; !isMine {
				g.holdBack(m)
			}
		}
		blocked, err := keysWaiting(ctx, tx, t, g, c.walked, keys, mine)
		if err != nil {
			return nil, err
		}
		cands = slices.DeleteFunc(cands, func(x cand) bool { return x.key != "" && blocked[x.key] })
	}
	if len(cands) == 0 {
		return nil, nil
	}
	var fresh, leased []uint64
	var freshRows []heldMessage
	for _, x := range cands {
		if x.hasState {
			leased = append(leased, x.id)
		} else {
			fresh = append(fresh, x.id)
			freshRows = append(freshRows, x.heldMessage)
		}
	}
	if len(leased) > 0 {
		args := append([]any{lease, p.LeaseFor.Microseconds()}, anyArgs(leased)...)
		if _, err := t.renderList(`UPDATE {state} SET lease_token = ?, next_attempt_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE consumer_id = {c} AND id IN ({list}) AND status = 'pending' AND (lease_token = 0 OR next_attempt_at <= UTC_TIMESTAMP(6))`, len(leased), args...).exec(ctx, tx); err != nil {
			return nil, err
		}
	}
	if len(fresh) > 0 {
		args := make([]any, 0, 4*len(freshRows))
		for _, m := range freshRows {
			args = append(args, m.id, m.key, lease, p.LeaseFor.Microseconds())
		}
		if _, err := t.renderRows(`INSERT IGNORE INTO {state} (consumer_id, id, event_key, lease_token, next_attempt_at)
VALUES ({c}, ?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)`, len(freshRows), args...).exec(ctx, tx); err != nil {
			return nil, err
		}
	}
	// What this claim holds now (a concurrent claim of an ID may have
	// taken it first).
	ids := anyArgs(append(leased, fresh...))
	rows, err := readRowsWithin(ctx, tx, newBudget(maxBytes), t.renderList(`SELECT `+stateCols+` FROM {state} s JOIN {outbox} o ON o.id = s.id
WHERE s.consumer_id = {c} AND s.id IN ({list}) AND s.lease_token = ? ORDER BY s.id`, len(ids), append(ids, lease)...))
	return rows, err
}

// keysWaiting returns those of keys whose messages among the IDs of a
// claim by ID (mine) must wait: a message of the key is in flight or
// held by its writer (g), a pending state row of the key is older than
// the IDs' first of it, or an older message of the key that is not among
// them is still to be walked (a PK range scan from the position to the
// last of mine: the log's unread tail).
//
// Its reads are not one snapshot (READ COMMITTED), and other claims by
// ID, settles and, for the head start read, walks commit between them.
// A message only moves on: from the unread tail, or the held list, or a
// range (g, read first), to a state row, and from any of them to
// delivered. So the tail is read before the state rows: a message that
// leaves the tail for a state row between the two reads is seen in the
// second (read the other way round, it was in neither, and its key's
// later message went out beside it).
func keysWaiting(ctx context.Context, tx *sql.Tx, t *target, g *gate, walked uint64, keys []string, mine map[uint64]string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(keys) == 0 {
		return out, nil
	}
	first := map[string]uint64{}
	var last uint64
	for id, k := range mine {
		if f, ok := first[k]; !ok || id < f {
			first[k] = id
		}
		last = max(last, id)
	}
	unwalked, err := column2(ctx, tx, t.renderList(`SELECT o.id, o.event_key FROM {outbox} o LEFT JOIN {state} s FORCE INDEX ({primary}) ON s.consumer_id = {c} AND s.id = o.id
WHERE o.id > ? AND o.id < ? AND o.event_key IN ({list}) AND s.id IS NULL AND NOT ({c} = 0 AND `+byWriter+`)`,
		len(keys), append([]any{walked, last}, anyArgs(keys)...)...))
	if err != nil {
		return nil, err
	}
	pending, err := olderPendingExcept(ctx, tx, t, keys, mine) // after the tail: see above
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		f, ok := first[k]
		if !ok {
			continue
		}
		if g.waits(k, f) {
			out[k] = true
		}
		if p, ok := pending[k]; ok && p < f {
			out[k] = true
		}
	}
	for _, m := range unwalked {
		if _, isMine := mine[m.id]; isMine {
			continue
		}
		if f, ok := first[m.key]; ok && m.id < f {
			out[m.key] = true
		}
	}
	return out, nil
}

// olderPendingExcept is olderPending leaving the messages of mine out.
func olderPendingExcept(ctx context.Context, tx *sql.Tx, t *target, keys []string, mine map[uint64]string) (map[string]uint64, error) {
	rows, err := column2(ctx, tx, t.renderList(`SELECT id, event_key FROM {state}
WHERE consumer_id = {c} AND status = 'pending' AND event_key IN ({list})`, len(keys), anyArgs(keys)...))
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, m := range rows {
		if _, isMine := mine[m.id]; isMine {
			continue
		}
		if old, ok := out[m.key]; !ok || m.id < old {
			out[m.key] = m.id
		}
	}
	return out, nil
}

// column2 runs a query of (id, key) rows.
func column2(ctx context.Context, q querier, st statement) ([]heldMessage, error) {
	rows, err := st.query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []heldMessage
	for rows.Next() {
		var m heldMessage
		var k []byte
		if err := rows.Scan(&m.id, &k); err != nil {
			return nil, err
		}
		m.key = string(k)
		out = append(out, m)
	}
	return out, rows.Err()
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
