package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/internal/storecore"
)

// Claim takes up to p.Limit records for the consumer (see
// backend.Store): a range of the log past the consumer's position (one
// row written for the whole batch, whatever its size), after the due
// records that have a state row (failed, released, held back). See
// LOG-DESIGN.md. The claim is committed when Claim returns; no
// transaction stays open while the caller publishes.
func (s *Store) Claim(ctx context.Context, p backend.ClaimParams) (backend.Batch, error) {
	return s.claim(ctx, p)
}

// SettleAndClaim records the settlement's outcomes as Settle would, then
// claims as Claim would, in one transaction.
func (s *Store) SettleAndClaim(ctx context.Context, st backend.Settlement, p backend.ClaimParams) (backend.SettleResult, backend.Batch, error) {
	return s.settleAndClaim(ctx, st, p)
}

func validateClaim(what string, p backend.ClaimParams) error {
	switch {
	case p.Owner == "":
		return fmt.Errorf("%s: claim: Owner is empty", what)
	case utf8.RuneCountInString(p.Owner) > backend.MaxOwnerLength:
		return fmt.Errorf("%s: claim: Owner is longer than %d characters", what, backend.MaxOwnerLength)
	case p.Limit < 1 || p.Limit > backend.MaxClaimLimit:
		return fmt.Errorf("%s: claim: Limit %d: must be 1 to %d", what, p.Limit, backend.MaxClaimLimit)
	case p.LeaseFor <= 0:
		return fmt.Errorf("%s: claim: LeaseFor %v: must be positive", what, p.LeaseFor)
	case len(p.IDs) > p.Limit:
		return fmt.Errorf("%s: claim: %d IDs: more than Limit %d", what, len(p.IDs), p.Limit)
	}
	return nil
}

// claimed is what one claim took.
type claimed struct {
	rows []scanned
	more bool
}

func (c *channel) claim(ctx context.Context, p backend.ClaimParams) (backend.Batch, error) {
	if err := validateClaim(c.what, p); err != nil {
		return backend.Batch{}, err
	}
	t, err := c.resolve(ctx)
	if err != nil {
		return backend.Batch{}, err
	}
	token, err := newToken()
	if err != nil {
		return backend.Batch{}, fmt.Errorf("%s: claim: %w", c.what, safeDriverErr(err))
	}
	deadline := time.Now().Add(horizonWait)
	pause := 2 * time.Millisecond
	for {
		// Run again after a lost connection, the claim takes the next
		// range (or, if the lost run did not commit, the same one): what
		// the lost run took, if it committed, comes back when its lease
		// runs out.
		got, err := redoing(ctx, func() (claimed, error) {
			var got claimed
			if len(p.IDs) == 0 && !p.Ordered {
				rows, more, ok, err := fastClaim(ctx, c.db, t, token, p, c.s.opts.MaxClaimBytes)
				if err != nil || ok {
					return claimed{rows: rows, more: more}, err
				}
			}
			err := relayTx(ctx, c.db, func(tx *sql.Tx) error {
				var err error
				got, err = c.claimIn(ctx, tx, t, token, p, false)
				return err
			})
			return got, err
		})
		if err != nil {
			return backend.Batch{}, c.claimErr(err)
		}
		if len(got.rows) > 0 || len(p.IDs) > 0 {
			return c.batch(token, got, p), nil
		}
		if c.s.afterEmptyClaim != nil {
			c.s.afterEmptyClaim()
		}
		// Nothing. If messages wait unread (behind a transaction the walk
		// could not pass, see horizonSQL, or below a horizon that moved on
		// since the claim looked: the two statements see it at different
		// moments), look again in a moment.
		waiting, err := redoing(ctx, func() (bool, error) {
			var b bool
			err := c.db.QueryRowContext(ctx, t.render(unreadSQL)).Scan(&b)
			return b, err
		})
		if err != nil {
			return backend.Batch{}, c.claimErr(err)
		}
		if !waiting {
			return c.batch(token, got, p), nil
		}
		if time.Now().Add(pause).After(deadline) {
			// Still held back: say when to look again.
			b := c.batch(token, got, p)
			b.RetryAfter = 50 * time.Millisecond
			return b, nil
		}
		timer := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return backend.Batch{}, c.claimErr(ctx.Err())
		case <-timer.C:
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// unreadSQL says whether a message waits past the consumer's position.
// The position is a LATERAL parameter of an ordered index scan: joined
// plainly, the planner filtered the whole log against it (a sequential
// scan per empty claim, 44 ms at 63,000 messages in the soak).
const unreadSQL = `SELECT EXISTS (SELECT 1 FROM {consumers} c CROSS JOIN LATERAL (
	SELECT 1 FROM {outbox} o WHERE (o.xid, o.seq) > (c.walked_xid, c.walked_seq) ORDER BY o.xid, o.seq LIMIT 1) u
	WHERE c.id = {c})`

// horizonWait bounds how long a claim that found nothing waits for the
// transactions that hold its walk back (see horizonSQL): committed
// messages it cannot read yet because an older transaction was running
// when it looked.
const horizonWait = 500 * time.Millisecond

func (c *channel) claimErr(err error) error {
	if errors.Is(err, ErrUnknownConsumer) {
		return fmt.Errorf("%s: %w", c.what, ErrUnknownConsumer)
	}
	return c.wrap("claim", err)
}

// claimIn claims in tx: by IDs, or from the state rows and the log (the
// common case in one statement first, when fast).
func (c *channel) claimIn(ctx context.Context, tx *sql.Tx, t *target, token int64, p backend.ClaimParams, fast bool) (claimed, error) {
	if len(p.IDs) > 0 {
		rows, err := claimIDs(ctx, tx, t, token, p, c.headStart())
		return claimed{rows: rows}, err
	}
	if fast && !p.Ordered {
		rows, more, ok, err := fastClaim(ctx, tx, t, token, p, c.s.opts.MaxClaimBytes)
		if err != nil || ok {
			return claimed{rows: rows, more: more}, err
		}
	}
	rows, more, err := logClaim(ctx, tx, t, token, p, c.s.opts.MaxClaimBytes)
	return claimed{rows: rows, more: more}, err
}

// batch is the Batch of a claim under token: More when the claim said it
// left something it could have taken.
func (c *channel) batch(token int64, got claimed, p backend.ClaimParams) backend.Batch {
	b := toBatch(token, got.rows)
	b.More = len(p.IDs) == 0 && (got.more || len(got.rows) >= p.Limit)
	return b
}

func (c *channel) settleAndClaim(ctx context.Context, st backend.Settlement, p backend.ClaimParams) (backend.SettleResult, backend.Batch, error) {
	if err := validateClaim(c.what, p); err != nil {
		return backend.SettleResult{}, backend.Batch{}, err
	}
	outcomes, err := backend.CheckOutcomes(c.what, st.Outcomes)
	if err != nil {
		return backend.SettleResult{}, backend.Batch{}, err
	}
	t, err := c.resolve(ctx)
	if err != nil {
		return backend.SettleResult{}, backend.Batch{}, err
	}
	token, err := newToken()
	if err != nil {
		return backend.SettleResult{}, backend.Batch{}, fmt.Errorf("%s: claim: %w", c.what, safeDriverErr(err))
	}
	type both struct {
		res backend.SettleResult
		got claimed
	}
	// The common case in one statement: every record of the batch
	// published from its range, and a claim of the log alone.
	if settleTok, ok := parseToken(st.Token); ok && settleTok > 0 && !p.Ordered && len(p.IDs) == 0 && backend.AllPublished(outcomes) {
		type fast struct {
			got     claimed
			claimed bool
			settled bool
		}
		f, err := redoing(ctx, func() (fast, error) {
			rows, more, ok, settled, err := fastSettleAndClaim(ctx, c.db, t, settleTok, len(outcomes), token, p, c.s.opts.MaxClaimBytes)
			return fast{claimed{rows, more}, ok, settled}, err
		})
		if err != nil {
			return backend.SettleResult{}, backend.Batch{}, c.claimErr(err)
		}
		if f.settled && f.claimed && len(f.got.rows) > 0 {
			return backend.SettleResult{Applied: len(outcomes)}, c.batch(token, f.got, p), nil
		}
		if f.claimed && !f.settled {
			// Claimed, not settled: settle the long way (nothing
			// applied twice: the settle is fenced).
			res, err := c.settle(ctx, st.Token, outcomes)
			return res, c.batch(token, f.got, p), err
		}
		if f.settled {
			// Settled and claimed nothing, or not claimed: the claim that
			// waits for what the horizon holds back (and says when to
			// come back).
			b, err := c.claim(ctx, p)
			return backend.SettleResult{Applied: len(outcomes)}, b, err
		}
	}
	// Settling first, so that in ordered mode the keys the outcomes free
	// are claimable at once. Run again after a lost connection: the
	// settle is fenced (what the lost run applied is stale the second
	// time), the claim takes what is there.
	r, err := redoing(ctx, func() (both, error) {
		var r both
		err := relayTx(ctx, c.db, func(tx *sql.Tx) error {
			var err error
			if r.res, err = settleIn(ctx, tx, t, st.Token, outcomes); err != nil {
				return err
			}
			r.got, err = c.claimIn(ctx, tx, t, token, p, true)
			return err
		})
		return r, err
	})
	if err != nil {
		return backend.SettleResult{}, backend.Batch{}, c.claimErr(err)
	}
	if len(r.got.rows) == 0 && len(p.IDs) == 0 {
		// Settled, nothing claimed: the claim that waits for what the
		// horizon holds back (and says when to come back).
		b, err := c.claim(ctx, p)
		return r.res, b, err
	}
	return r.res, c.batch(token, r.got, p), nil
}

// claimIDs leases those of p.IDs that are pending for the consumer and
// held by no one: not yet read from the log, or passed by the walk while
// their writer held them (the held list: a writer's publish often runs
// after a worker woken by the commit has walked past its messages), which
// then get a state row that the log's readers pass over; or with a due or
// expired state row (a writer's own head start included). Ordered, a key's records only
// when they are the key's oldest pending ones (gateSQL, the others of
// the IDs aside), and then all of them.
func claimIDs(ctx context.Context, tx *sql.Tx, t *target, token int64, p backend.ClaimParams, headStart int64) ([]scanned, error) {
	var walked position
	var startSeq int64
	var held []byte
	err := tx.QueryRowContext(ctx, t.render(`SELECT walked_xid::text::bigint, walked_seq, start_seq, held::text
FROM {consumers} WHERE id = $1 AND NOT removing FOR SHARE`), t.consumerID).Scan(&walked.xid, &walked.seq, &startSeq, &held)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrUnknownConsumer
	}
	if err != nil {
		return nil, err
	}
	gate := ""
	if p.Ordered {
		gate = `
	AND NOT EXISTS (SELECT 1 FROM cand b WHERE b.event_key = a.event_key AND b.event_key <> '\x' AND (` +
			keyGate("b.event_key", "b.seq", "($5::bigint::text::xid8, $6)", " AND {x} NOT IN (SELECT seq FROM cand)") + `))`
	}
	// cand: the IDs the consumer may take now: pending and held by no
	// one, or by this Store's head start ($8: the writer's own messages,
	// which its ordered after-commit path claims); a: of them, those
	// whose key is free. The registry row is locked FOR SHARE above:
	// claims by ID (writers' publishes, each of its own messages) run
	// beside each other, and a walk, which locks the row FOR UPDATE to
	// move the position and the held list, waits for them as they wait
	// for it. The gate reads what has committed, and a message that
	// another claim by ID is taking meanwhile counts there as pending
	// (a pending state row, its writer's hold, past the position, or on
	// the held list) until that claim commits. Two claims of one ID: the
	// second leases nothing.
	return queryRecords(ctx, tx, t.render(`WITH cand AS (
	SELECT o.seq, o.event_key, s.seq IS NOT NULL AS has_state
	FROM {outbox} o LEFT JOIN {state} s ON s.consumer_id = $1 AND s.seq = o.seq
	WHERE o.event_id = ANY($2::text[]) AND o.seq > $7
		AND CASE WHEN s.seq IS NOT NULL THEN s.status = 'pending'
				AND (s.lease_token = 0 OR s.lease_token = $8 OR s.next_attempt_at <= statement_timestamp())
			ELSE ((o.xid, o.seq) > ($5::bigint::text::xid8, $6) OR o.seq = ANY($9::bigint[]))
				AND NOT ($1 = 0 AND o.writer_token <> 0 AND o.writer_until IS NULL)
				AND NOT ($1 = 0 AND o.writer_token NOT IN (0, $8) AND o.writer_until > statement_timestamp()) END
), a AS (
	SELECT a.* FROM cand a WHERE TRUE`+gate+`
), leased AS (
	UPDATE {state} s SET lease_token = $3, next_attempt_at = statement_timestamp() + $4 * interval '1 microsecond'
	FROM a WHERE a.has_state AND s.consumer_id = $1 AND s.seq = a.seq RETURNING s.seq
), added AS (
	INSERT INTO {state} (consumer_id, seq, event_key, lease_token, next_attempt_at)
	SELECT $1, a.seq, a.event_key, $3, statement_timestamp() + $4 * interval '1 microsecond' FROM a WHERE NOT a.has_state
	ON CONFLICT DO NOTHING RETURNING seq
)
SELECT `+logCols+` FROM {outbox} o WHERE o.seq IN (SELECT seq FROM leased UNION ALL SELECT seq FROM added)`),
		t.consumerID, p.IDs, token, p.LeaseFor.Microseconds(), walked.xid, walked.seq, startSeq, headStart, string(held))
}

// budget is what is left of MaxClaimBytes; the first record of a claim
// is taken whatever its size.
type budget struct {
	left  int
	taken bool
}

func (b budget) spent() bool { return b.taken && b.left <= 0 }

func (b budget) after(rows []scanned) budget {
	for _, r := range rows {
		b.left -= recordBytes(r.rec)
		b.taken = true
	}
	return b
}

func recordBytes(r outbox.Record) int {
	n := len(r.Payload)
	for k, v := range r.Headers {
		n += len(k) + len(v) + 6
	}
	return n
}

// relayTx is inTx for the relay's own bookkeeping (claims and settles):
// its commit does not wait for the WAL flush (synchronous_commit off,
// for this transaction only), so that a claim holds its consumer's
// registry row for less. What a server crash can lose is the last
// moments of WAL, a suffix: the relay's tables go back to a state they
// were in, consistent, and what was delivered since is delivered again.
// That is a duplicate, which at-least-once allows, never a loss: no
// message is written here, and a commit that must be durable (the
// writer's, an operator's) flushes every earlier record with its own.
func relayTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	return inTx(ctx, db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
			return err
		}
		return fn(tx)
	})
}

// inTx runs fn in a transaction of db, committed if fn succeeds.
func inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	return storecore.InTx(ctx, db, nil, nil, fn)
}

// retrying runs fn again, a few times, after a deadlock or serialization
// failure: fn must be safe to run again (every caller's is a statement
// or transaction that either happened whole or not at all).
func retrying[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	return retryingWhile(ctx, retryable, fn)
}

// redoing is retrying that also runs fn again after a lost connection,
// for fn whose outcome may then be unknown but which is safe to run
// again whether or not it happened: a fenced settle (run again, it finds
// its records settled and counts them stale), a claim (run again, it
// leases other records; those of the lost run, if it committed, are due
// again when their lease ends, delivered late but not twice), a read. A
// worker's round then rides out a dropped connection, where failing it
// would cost a whole batch's lease.
func redoing[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	return retryingWhile(ctx, redoable, fn)
}

// redoable is retryable, and a lost connection.
func redoable(err error) bool { return retryable(err) || classify(err) == ClassConnection }

// retryingWhile is retrying with retry saying which errors to try again.
func retryingWhile[T any](ctx context.Context, retry func(error) bool, fn func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for attempt := range 4 {
		v, err = fn()
		if err == nil || !retry(err) || ctx.Err() != nil {
			return v, err
		}
		t := time.NewTimer(time.Duration(attempt+1) * 5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
	return v, err
}
