package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Claim leases up to p.Limit due pending records (see backend.Store):
// one UPDATE whose subquery takes the front of the partial index of
// pending records with FOR UPDATE SKIP LOCKED, so that concurrent claims
// never wait for each other and never take a record twice. The lease is
// committed when Claim returns; no transaction stays open while the
// caller publishes. Ordered claims and claims by IDs take a short
// transaction of a few statements.
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

func (c *channel) claim(ctx context.Context, p backend.ClaimParams) (backend.Batch, error) {
	if err := validateClaim(c.what, p); err != nil {
		return backend.Batch{}, err
	}
	t, err := c.resolve(ctx)
	if err != nil {
		return backend.Batch{}, err
	}
	handedMore, err := c.handOverForClaim(ctx, t)
	if err != nil {
		return backend.Batch{}, err
	}
	token, err := newToken()
	if err != nil {
		return backend.Batch{}, fmt.Errorf("%s: claim: %w", c.what, safeDriverErr(err))
	}
	var (
		rows []scanned
		more bool
	)
	if len(p.IDs) == 0 && !p.Ordered {
		// The hot path: one statement, committed by itself.
		rows, err = redoing(ctx, func() ([]scanned, error) {
			rows, _, err := c.claimDue(ctx, c.db, t, token, p, "", p.Limit, budget{left: c.s.opts.MaxClaimBytes})
			return rows, err
		})
	} else {
		rows, err = redoing(ctx, func() ([]scanned, error) {
			var rows []scanned
			err := inTx(ctx, c.db, func(tx *sql.Tx) error {
				var err error
				rows, more, err = c.claimIn(ctx, tx, t, token, p)
				return err
			})
			return rows, err
		})
	}
	if err != nil {
		return backend.Batch{}, c.wrap("claim", err)
	}
	return c.batch(token, rows, p, more || handedMore), nil
}

// batch is the Batch of a claim of rows under token: More when it was
// told there is more (an ordered claim left records behind its heads, or
// a named consumer's hand-over moved a full batch), or when the claim
// stopped at its limit or its byte budget.
func (c *channel) batch(token int64, rows []scanned, p backend.ClaimParams, more bool) backend.Batch {
	b := toBatch(token, rows)
	b.More = len(p.IDs) == 0 && (more || len(rows) >= p.Limit || budget{left: c.s.opts.MaxClaimBytes}.after(rows).spent())
	return b
}

func (c *channel) settleAndClaim(ctx context.Context, st backend.Settlement, p backend.ClaimParams) (backend.SettleResult, backend.Batch, error) {
	if err := validateClaim(c.what, p); err != nil {
		return backend.SettleResult{}, backend.Batch{}, err
	}
	outcomes, err := checkOutcomes(c.what, st.Outcomes)
	if err != nil {
		return backend.SettleResult{}, backend.Batch{}, err
	}
	t, err := c.resolve(ctx)
	if err != nil {
		return backend.SettleResult{}, backend.Batch{}, err
	}
	handedMore, err := c.handOverForClaim(ctx, t)
	if err != nil {
		return backend.SettleResult{}, backend.Batch{}, err
	}
	token, err := newToken()
	if err != nil {
		return backend.SettleResult{}, backend.Batch{}, fmt.Errorf("%s: claim: %w", c.what, safeDriverErr(err))
	}
	var (
		res  backend.SettleResult
		rows []scanned
		more bool
	)
	if !p.Ordered && len(p.IDs) == 0 {
		_, err = redoing(ctx, func() ([]scanned, error) {
			var err error
			res, rows, err = c.settleAndClaimOne(ctx, t, st.Token, outcomes, token, p)
			return nil, err
		})
		if err != nil {
			return backend.SettleResult{}, backend.Batch{}, c.wrap("settle and claim", err)
		}
		return res, c.batch(token, rows, p, handedMore), nil
	}
	_, err = redoing(ctx, func() ([]scanned, error) {
		return nil, inTx(ctx, c.db, func(tx *sql.Tx) error {
			var err error
			if res, err = c.settleIn(ctx, tx, t, st.Token, outcomes); err != nil {
				return err
			}
			rows, more, err = c.claimIn(ctx, tx, t, token, p)
			return err
		})
	})
	if err != nil {
		return backend.SettleResult{}, backend.Batch{}, c.wrap("settle and claim", err)
	}
	return res, c.batch(token, rows, p, more || handedMore), nil
}

// claimIn claims in a transaction: by IDs, ordered, or the plain way.
// more says an ordered claim left pending records of the keys whose
// heads it took.
func (c *channel) claimIn(ctx context.Context, q querier, t *target, token int64, p backend.ClaimParams) (rows []scanned, more bool, err error) {
	b := budget{left: c.s.opts.MaxClaimBytes}
	switch {
	case len(p.IDs) > 0:
		rows, err := c.claimIDs(ctx, q, t, token, p, b)
		return rows, false, err
	case !p.Ordered:
		rows, _, err := c.claimDue(ctx, q, t, token, p, "", p.Limit, b)
		return rows, false, err
	}
	rows, err = c.claimOrdered(ctx, q, t, token, p, b)
	if err != nil || len(rows) >= p.Limit {
		return rows, false, err
	}
	more, err = c.behindHeads(ctx, q, t, rows)
	return rows, more, err
}

// behindHeads reports whether a pending record of one of the keys of
// rows, an ordered claim's, is left: it is due once its head is settled.
func (c *channel) behindHeads(ctx context.Context, q querier, t *target, rows []scanned) (bool, error) {
	var (
		keys [][]byte
		seqs []int64
	)
	for _, r := range rows {
		if r.rec.Key != "" {
			keys = append(keys, []byte(r.rec.Key))
			seqs = append(seqs, r.rec.Seq)
		}
	}
	if len(keys) == 0 {
		return false, nil
	}
	var more bool
	err := q.QueryRowContext(ctx, t.render(`SELECT EXISTS (SELECT 1 FROM {state} s
WHERE {scope}s.status = 'pending' AND s.event_key = ANY($1::bytea[]) AND s.seq <> ALL($2::bigint[]))`), keys, seqs).Scan(&more)
	return more, err
}

// claimOrdered is an ordered claim (backend.ClaimParams.Ordered) within
// b: the unkeyed records take at most half the batch first, so that
// neither many keys nor many unkeyed records starve the other; then the
// keys' heads, round robin from where the last claim stopped; then
// unkeyed records fill what is left.
func (c *channel) claimOrdered(ctx context.Context, q querier, t *target, token int64, p backend.ClaimParams, b budget) ([]scanned, error) {
	rows, b, err := c.claimDue(ctx, q, t, token, p, unkeyedOnly, p.Limit/2, b)
	if err != nil {
		return nil, err
	}
	c.cursorMu.Lock()
	cursor := c.keyCursor
	c.cursorMu.Unlock()
	heads, b, err := c.claimHeads(ctx, q, t, token, p, cursor, nil, p.Limit-len(rows), b)
	if err != nil {
		return nil, err
	}
	if len(rows)+len(heads) < p.Limit && cursor != nil && !b.spent() {
		more, nb, err := c.claimHeads(ctx, q, t, token, p, []byte{}, cursor, p.Limit-len(rows)-len(heads), b)
		if err != nil {
			return nil, err
		}
		heads, b = append(heads, more...), nb
	}
	if len(heads) > 0 {
		c.cursorMu.Lock()
		c.keyCursor = []byte(heads[len(heads)-1].rec.Key)
		c.cursorMu.Unlock()
	}
	rows = append(rows, heads...)
	if n := p.Limit - len(rows); n > 0 && !b.spent() {
		more, _, err := c.claimDue(ctx, q, t, token, p, unkeyedOnly, n, b)
		if err != nil {
			return nil, err
		}
		rows = append(rows, more...)
	}
	return rows, nil
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

const unkeyedOnly = ` AND s.event_key = '\x'`

// claimDue leases up to limit due records, oldest due first, within b.
// extra narrows the records (unkeyedOnly).
func (c *channel) claimDue(ctx context.Context, q querier, t *target, token int64, p backend.ClaimParams, extra string, limit int, b budget) ([]scanned, budget, error) {
	if limit <= 0 || b.spent() {
		return nil, b, nil
	}
	stmt := t.render(`WITH locked AS (
	SELECT s.seq, s.next_attempt_at AS due, octet_length({m}.payload) + coalesce(octet_length({m}.headers::text), 0) AS size
	FROM {from} WHERE {scope}s.status = 'pending' AND s.next_attempt_at <= statement_timestamp()` + extra + `
	ORDER BY s.next_attempt_at, s.seq LIMIT $1 FOR UPDATE OF s SKIP LOCKED
), picked AS (
	SELECT seq FROM (SELECT seq, size, sum(size) OVER (ORDER BY due, seq) - size AS before FROM locked) x
	WHERE CASE WHEN $3 THEN before + size <= $2 ELSE before < $2 END
)
UPDATE {state} s SET lease_token = $4, next_attempt_at = statement_timestamp() + $5 * interval '1 microsecond'
FROM picked p{updfrom} WHERE {scope}s.seq = p.seq{updjoin}
RETURNING {cols}`)
	rows, err := queryRecords(ctx, q, stmt, limit, b.left, b.taken, token, p.LeaseFor.Microseconds())
	if err != nil {
		return nil, b, err
	}
	return rows, b.after(rows), nil
}

// claimHeads leases the heads (oldest pending records) of up to limit
// keys after from (and up to through, if not nil) in key order, each only
// if it is due and no record of its key is leased. The walk over the
// keys is a loose index scan: one index descent per key, however many
// records a key has.
func (c *channel) claimHeads(ctx context.Context, q querier, t *target, token int64, p backend.ClaimParams, from, through []byte, limit int, b budget) ([]scanned, budget, error) {
	if limit <= 0 || b.spent() {
		return nil, b, nil
	}
	if from == nil {
		from = []byte{} // nil is NULL
	}
	bound, args := "", []any{from, maxWalk(limit), limit, b.left, b.taken, token, p.LeaseFor.Microseconds()}
	if through != nil {
		bound = " AND s.event_key <= $8"
		args = append(args, through)
	}
	stmt := t.render(`WITH RECURSIVE walk(event_key, seq, n) AS (
	(SELECT s.event_key, s.seq, 1 FROM {state} s WHERE {scope}s.status = 'pending' AND s.event_key > $1` + bound + `
	 ORDER BY s.event_key, s.seq LIMIT 1)
	UNION ALL
	SELECT h.event_key, h.seq, w.n + 1 FROM walk w CROSS JOIN LATERAL (
		SELECT s.event_key, s.seq FROM {state} s WHERE {scope}s.status = 'pending' AND s.event_key > w.event_key` + bound + `
		ORDER BY s.event_key, s.seq LIMIT 1) h
	WHERE w.n < $2
), locked AS (
	SELECT s.seq, s.event_key, octet_length({m}.payload) + coalesce(octet_length({m}.headers::text), 0) AS size
	FROM {from} WHERE {scope}s.seq IN (SELECT seq FROM walk) AND s.status = 'pending' AND s.next_attempt_at <= statement_timestamp()
		AND NOT EXISTS (SELECT 1 FROM {state} l WHERE {sc:l}l.status = 'pending' AND l.lease_token > 0 AND l.event_key = s.event_key AND l.next_attempt_at > statement_timestamp())
		AND NOT EXISTS (SELECT 1 FROM {state} o WHERE {sc:o}o.status = 'pending' AND o.event_key = s.event_key AND o.seq < s.seq){older:s}
	ORDER BY s.event_key LIMIT $3 FOR UPDATE OF s SKIP LOCKED
), picked AS (
	SELECT seq FROM (SELECT seq, size, sum(size) OVER (ORDER BY event_key) - size AS before FROM locked) x
	WHERE CASE WHEN $5 THEN before + size <= $4 ELSE before < $4 END
)
UPDATE {state} s SET lease_token = $6, next_attempt_at = statement_timestamp() + $7 * interval '1 microsecond'
FROM picked p{updfrom} WHERE {scope}s.seq = p.seq{updjoin}
RETURNING {cols}`)
	rows, err := queryRecords(ctx, q, stmt, args...)
	if err != nil {
		return nil, b, err
	}
	slices.SortFunc(rows, func(a, b scanned) int { return compareStrings(a.rec.Key, b.rec.Key) })
	return rows, b.after(rows), nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// maxWalk bounds the keys one ordered claim visits.
func maxWalk(limit int) int { return 4*limit + 100 }

// claimIDs leases the named pending records no other process holds
// (not leased, leased by this Store's head start, or whose lease has run
// out), whatever their due time; ordered, a key's records only if they
// are its oldest pending ones, in order.
func (c *channel) claimIDs(ctx context.Context, q querier, t *target, token int64, p backend.ClaimParams, b budget) ([]scanned, error) {
	stmt := t.render(`SELECT s.seq, s.event_key, octet_length({m}.payload) + coalesce(octet_length({m}.headers::text), 0),
	(SELECT count(*) FROM {state} o WHERE {sc:o}o.status = 'pending' AND o.event_key = s.event_key AND o.seq < s.seq),
	(SELECT count(*) FROM {state} o WHERE {sc:o}o.status = 'pending' AND o.event_key = s.event_key AND o.seq < s.seq AND {oid:o} <> ALL($1::text[])),
	EXISTS (SELECT 1 FROM {state} l WHERE {sc:l}l.status = 'pending' AND l.lease_token > 0 AND l.event_key = s.event_key AND l.next_attempt_at > statement_timestamp() AND l.seq <> s.seq)
		OR NOT (true{older:s})
FROM {from} WHERE {scope}{m}.event_id = ANY($1::text[]) AND s.status = 'pending'
	AND (s.lease_token = 0 OR s.lease_token = $2 OR s.next_attempt_at <= statement_timestamp())
ORDER BY s.seq LIMIT $3 FOR UPDATE OF s SKIP LOCKED`)
	rows, err := q.QueryContext(ctx, stmt, p.IDs, c.s.headStart, p.Limit)
	if err != nil {
		return nil, err
	}
	type cand struct {
		seq, older, foreign int64
		key                 string
		size                int
		held                bool // another record of the key is leased, or an older one waits for hand-over
	}
	var cands []cand
	for rows.Next() {
		var x cand
		var key []byte
		if err := rows.Scan(&x.seq, &key, &x.size, &x.older, &x.foreign, &x.held); err != nil {
			rows.Close()
			return nil, err
		}
		x.key = string(key)
		cands = append(cands, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var seqs []int64
	taken := map[string]int64{} // per key: how many of its records are taken
	blocked := map[string]bool{}
	for _, x := range cands {
		if p.Ordered && x.key != "" {
			// The key's i-th record is taken only if the i records before
			// it are (all of them named, and locked here).
			if blocked[x.key] || x.foreign > 0 || x.held || x.older != taken[x.key] {
				blocked[x.key] = true
				continue
			}
			taken[x.key]++
		}
		if b.taken && b.left-x.size < 0 {
			break
		}
		b.left -= x.size
		b.taken = true
		seqs = append(seqs, x.seq)
	}
	if len(seqs) == 0 {
		return nil, nil
	}
	return c.lease(ctx, q, t, token, p.LeaseFor, seqs)
}

// lease leases the records seqs (locked by the caller's transaction).
func (c *channel) lease(ctx context.Context, q querier, t *target, token int64, leaseFor time.Duration, seqs []int64) ([]scanned, error) {
	stmt := t.render(`UPDATE {state} s SET lease_token = $1, next_attempt_at = statement_timestamp() + $2 * interval '1 microsecond'
{updfromfirst} WHERE {scope}s.seq = ANY($3::bigint[]){updjoin}
RETURNING {cols}`)
	return queryRecords(ctx, q, stmt, token, leaseFor.Microseconds(), seqs)
}

// inTx runs fn in a transaction of db, committed if fn succeeds.
func inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
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
// again when their lease ends, delivered late but not twice), a
// hand-over (run again, it hands over the next messages), a read. A
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

// settleAndClaimSQL settles (as settleSQL, $1 to $5) and claims due
// records (as claimDue, $6 to $9) in one statement: one round trip and
// one commit per batch while there is a backlog. The claim leaves out the
// records being settled: their leases may have run out, and a row must
// not be written twice by one statement. The last row it returns (seq 0)
// carries the settle's result: the applied count and the dead IDs.
const settleAndClaimSQL = `WITH settled AS (` + settleSQL + `
), locked AS (
	SELECT s.seq, s.next_attempt_at AS due, octet_length({m}.payload) + coalesce(octet_length({m}.headers::text), 0) AS size
	FROM {from} WHERE {scope}s.status = 'pending' AND s.next_attempt_at <= statement_timestamp() AND {m}.event_id <> ALL($2::text[])
	ORDER BY s.next_attempt_at, s.seq LIMIT $6 FOR UPDATE OF s SKIP LOCKED
), picked AS (
	SELECT seq FROM (SELECT seq, size, sum(size) OVER (ORDER BY due, seq) - size AS before FROM locked) x
	WHERE before < $7
), claimed AS (
	UPDATE {state} s SET lease_token = $8, next_attempt_at = statement_timestamp() + $9 * interval '1 microsecond'
	FROM picked p{updfrom} WHERE {scope}s.seq = p.seq{updjoin}
	RETURNING {cols}
)
SELECT *, 0::bigint, NULL::text FROM claimed
UNION ALL
SELECT 0::bigint, '', '\x'::bytea, '\x'::bytea, '\x'::bytea, NULL::jsonb, NULL::timestamptz, statement_timestamp(), 'pending', 0, '',
	statement_timestamp(), NULL::timestamptz, (SELECT count(*) FROM settled),
	(SELECT coalesce(json_agg(event_id) FILTER (WHERE kind = 3), '[]')::text FROM settled)`

// settleAndClaimOne settles and claims unordered in one statement (see
// settleAndClaimSQL).
func (c *channel) settleAndClaimOne(ctx context.Context, t *target, token string, outcomes []backend.Outcome, claimToken int64, p backend.ClaimParams) (backend.SettleResult, []scanned, error) {
	tok, ok := parseToken(token)
	if !ok || len(outcomes) == 0 {
		res := backend.SettleResult{Stale: len(outcomes)}
		rows, _, err := c.claimDue(ctx, c.db, t, claimToken, p, "", p.Limit, budget{left: c.s.opts.MaxClaimBytes})
		return res, rows, err
	}
	ids, kinds, retry, errs := outcomeColumns(outcomes)
	rows, err := c.db.QueryContext(ctx, t.render(settleAndClaimSQL), tok, ids, kinds, retry, errs,
		p.Limit, c.s.opts.MaxClaimBytes, claimToken, p.LeaseFor.Microseconds())
	if err != nil {
		return backend.SettleResult{}, nil, err
	}
	defer rows.Close()
	var (
		out []scanned
		res backend.SettleResult
	)
	for rows.Next() {
		var (
			applied int
			dead    sql.NullString
		)
		r, err := scanRecordWith(rows, &applied, &dead)
		if err != nil {
			return backend.SettleResult{}, nil, err
		}
		if r.rec.Seq != 0 {
			out = append(out, r)
			continue
		}
		res.Applied = applied
		if err := json.Unmarshal([]byte(dead.String), &res.Dead); err != nil {
			return backend.SettleResult{}, nil, fmt.Errorf("read the dead IDs: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return backend.SettleResult{}, nil, err
	}
	res.Stale = len(outcomes) - res.Applied
	if len(res.Dead) == 0 {
		res.Dead = nil
	}
	slices.Sort(res.Dead)
	return res, out, nil
}
