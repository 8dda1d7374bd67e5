package postgres

// The outbox as a log that each consumer reads past a position of its
// own (schema version 3; see LOG-DESIGN.md).

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/internal/storecore"
)

// The columns of recordCols (see scanRecord) for a message read from
// the log, not yet attempted, and for one with a state row.
const (
	logCols = "o.seq, o.event_id, o.event_key, o.event_type, o.payload, o.headers, o.occurred_at, o.created_at, " +
		"'pending', 0, '', o.created_at, NULL::timestamptz"
	stateCols = "o.seq, o.event_id, o.event_key, o.event_type, o.payload, o.headers, o.occurred_at, o.created_at, " +
		"s.status, s.retry_count, s.last_error, s.next_attempt_at, s.finished_at"
)

// position is a place in the log: messages go in (xid, seq) order.
type position struct {
	xid uint64
	seq int64
}

// logClaim claims for t's consumer, in tx: an expired range of another
// claimer first (all of it that fits p.Limit), else the due state rows
// and then the log past the consumer's position. more says it left
// something it could have taken.
func logClaim(ctx context.Context, tx *sql.Tx, t *target, token int64, p backend.ClaimParams, maxBytes int) (rows []scanned, more bool, err error) {
	var (
		walked   position
		startSeq int64
	)
	// Claims of one consumer take turns here, once per batch.
	var (
		held     []int64
		heldJSON []byte
	)
	err = tx.QueryRowContext(ctx, t.render(`SELECT walked_xid::text::bigint, walked_seq, start_seq, array_to_json(held)
FROM {consumers} WHERE id = $1 AND NOT removing FOR UPDATE`), t.consumerID).Scan(&walked.xid, &walked.seq, &startSeq, &heldJSON)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, ErrUnknownConsumer
	}
	if err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal(heldJSON, &held); err != nil {
		return nil, false, fmt.Errorf("the held list %q: %w", heldJSON, err)
	}
	stillHeld, err := resolveHeld(ctx, tx, t, held)
	if err != nil {
		return nil, false, err
	}
	rows, more, took, err := takeOver(ctx, tx, t, token, p, startSeq, stillHeld)
	if err != nil || took {
		if err == nil && len(held) != len(stillHeld) {
			err = setHeld(ctx, tx, t, stillHeld)
		}
		return rows, more, err
	}
	rows, err = claimState(ctx, tx, t, token, p, p.Limit, walked)
	if err != nil {
		return nil, false, err
	}
	if left := p.Limit - len(rows); left > 0 {
		w, wmore, err := walk(ctx, tx, t, token, p, left, walked, startSeq, budget{left: maxBytes}.after(rows), stillHeld, len(held) != len(stillHeld))
		if err != nil {
			return nil, false, err
		}
		rows, more = append(rows, w...), wmore
	} else {
		more = true
		if len(held) != len(stillHeld) {
			if err := setHeld(ctx, tx, t, stillHeld); err != nil {
				return nil, false, err
			}
		}
	}
	return rows, more, nil
}

// The default consumer's walk passes a message its writer holds for its
// after-commit publish (writer_until in the future) without a write: it
// goes into the consumer's list of held messages (the held column, on
// the row each walk updates anyway), and the writer's settle of it is
// one HOT update of the message (writer_until NULL). Each claim looks at
// the list first: a message its writer delivered, or that has a state
// row (its writer's publish failed), leaves it; one whose head start
// ended (its writer died, or ended it) gets a state row, due at once,
// and leaves it.

// resolveHeld returns those of held that their writer still holds, and
// gives those whose head start ended a state row.
func resolveHeld(ctx context.Context, tx *sql.Tx, t *target, held []int64) ([]int64, error) {
	if len(held) == 0 {
		return held, nil
	}
	q, err := tx.QueryContext(ctx, t.render(`WITH h AS (
	SELECT o.seq, o.event_key, o.writer_until, EXISTS (SELECT 1 FROM {state} s WHERE s.consumer_id = 0 AND s.seq = o.seq) AS has_state
	FROM {outbox} o WHERE o.seq = ANY($1::bigint[])
), due AS (
	INSERT INTO {state} (consumer_id, seq, event_key, next_attempt_at)
	SELECT 0, h.seq, h.event_key, statement_timestamp() FROM h
	WHERE NOT h.has_state AND h.writer_until <= statement_timestamp()
	ON CONFLICT DO NOTHING
)
SELECT h.seq FROM h WHERE NOT h.has_state AND h.writer_until > statement_timestamp() ORDER BY h.seq`), held)
	if err != nil {
		return nil, err
	}
	still, err := storecore.Column[int64](q)
	if still == nil && err == nil {
		still = []int64{} // the held column is NOT NULL: none is an empty array
	}
	return still, err
}

func setHeld(ctx context.Context, tx *sql.Tx, t *target, held []int64) error {
	_, err := tx.ExecContext(ctx, t.render(`UPDATE {consumers} SET held = $2 WHERE id = $1`), t.consumerID, held)
	return err
}

// takeOver takes the oldest range of the consumer whose lease has run
// out (its claimer died, or is too slow), under token: the messages in
// it that have no state row, as many as p.Limit allows (the rest stays
// behind as a range of its own, expired, for the next claim).
func takeOver(ctx context.Context, tx *sql.Tx, t *target, token int64, p backend.ClaimParams, startSeq int64, held []int64) (rows []scanned, more, took bool, err error) {
	var from, to position
	var old int64
	err = tx.QueryRowContext(ctx, t.render(`SELECT token, from_xid::text::bigint, from_seq, to_xid::text::bigint, to_seq FROM {ranges}
WHERE consumer_id = $1 AND lease_until < statement_timestamp() ORDER BY from_xid, from_seq LIMIT 1 FOR UPDATE`), t.consumerID).
		Scan(&old, &from.xid, &from.seq, &to.xid, &to.seq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, false, nil
	}
	if err != nil {
		return nil, false, false, err
	}
	rows, err = queryRecords(ctx, tx, t.render(`SELECT {logcols} FROM {outbox} o
WHERE (o.xid, o.seq) > ($2::bigint::text::xid8, $3) AND (o.xid, o.seq) <= ($4::bigint::text::xid8, $5) AND o.seq > $6
	AND NOT EXISTS (SELECT 1 FROM {state} s WHERE s.consumer_id = $1 AND s.seq = o.seq)
	AND NOT ($1 = 0 AND o.writer_token <> 0 AND o.writer_until IS NULL) AND o.seq <> ALL($8::bigint[])
ORDER BY o.xid, o.seq LIMIT $7`), t.consumerID, from.xid, from.seq, to.xid, to.seq, startSeq, p.Limit+1, held)
	if err != nil {
		return nil, false, false, err
	}
	if p.Ordered {
		if rows, err = gateTakeOver(ctx, tx, t, old, rows); err != nil {
			return nil, false, false, err
		}
	}
	end := to
	if len(rows) == 0 {
		// Everything in it was settled otherwise (state rows): done.
		_, err := tx.ExecContext(ctx, t.render(`DELETE FROM {ranges} WHERE consumer_id = $1 AND token = $2`), t.consumerID, old)
		return nil, false, false, err
	}
	if len(rows) > p.Limit {
		// Split: this claim takes the first p.Limit, the rest stays a
		// range of its own that has run out, for the next claim. Ordered,
		// a key's messages may be in both parts: the rest's take-over
		// gates them (gateTakeOver) behind this part's, which are in
		// flight, and behind a retry of one of them. (Until the gate, the
		// rest took this claim's lease, and a probe's claim of one record
		// froze the rest of a dead instance's range for a whole lease.)
		rows = rows[:p.Limit]
		last := rows[len(rows)-1].rec.Seq
		var lastXID uint64
		if err := tx.QueryRowContext(ctx, t.render(`SELECT xid::text::bigint FROM {outbox} WHERE seq = $1`), last).Scan(&lastXID); err != nil {
			return nil, false, false, err
		}
		end = position{lastXID, last}
		if _, err := tx.ExecContext(ctx, t.render(`INSERT INTO {ranges} (consumer_id, token, from_xid, from_seq, to_xid, to_seq, n, owner, lease_until)
VALUES ($1, $2, $3::bigint::text::xid8, $4, $5::bigint::text::xid8, $6, 0, '', '-infinity')`),
			t.consumerID, token^1<<62, end.xid, end.seq, to.xid, to.seq); err != nil {
			return nil, false, false, err
		}
		more = true
	}
	_, err = tx.ExecContext(ctx, t.render(`UPDATE {ranges} SET token = $3, owner = $4, claimed_at = statement_timestamp(),
	lease_until = statement_timestamp() + $5 * interval '1 microsecond', to_xid = $6::bigint::text::xid8, to_seq = $7, n = $8
WHERE consumer_id = $1 AND token = $2`), t.consumerID, old, token, p.Owner, p.LeaseFor.Microseconds(), end.xid, end.seq, len(rows))
	if err != nil {
		return nil, false, false, err
	}
	return rows, more, true, nil
}

// gateTakeOver holds back, from rows (the messages of the range under
// token old that an ordered take-over would hand out), those that must
// wait behind an older message of their key: a pending state row, a
// message handed out in another range of the consumer, or one its
// writer holds (the held list); a key's later messages wait with it.
// They get state rows, due at once (they leave the range), and wait
// there. The range's own messages were gated when it was walked; what
// this finds is an older message that became pending since: the first
// part of this range when an earlier take-over split it (a claim of a
// smaller batch) and one of its messages failed, or a dead letter
// requeued.
func gateTakeOver(ctx context.Context, tx *sql.Tx, t *target, old int64, rows []scanned) ([]scanned, error) {
	var keys [][]byte
	var seqs []int64
	for _, r := range rows {
		if r.rec.Key != "" {
			keys, seqs = append(keys, []byte(r.rec.Key)), append(seqs, r.rec.Seq)
		}
	}
	if len(keys) == 0 {
		return rows, nil
	}
	q, err := tx.QueryContext(ctx, t.render(`SELECT w.seq FROM unnest($2::bytea[], $3::bigint[]) AS w(k, seq)
WHERE EXISTS (SELECT 1 FROM {state} g WHERE g.consumer_id = $1 AND g.status = 'pending' AND g.event_key = w.k AND g.seq < w.seq)
	OR EXISTS (SELECT 1 FROM {ranges} r CROSS JOIN LATERAL (SELECT 1 FROM {outbox} go WHERE go.event_key = w.k AND go.seq < w.seq
		AND (go.xid, go.seq) > (r.from_xid, r.from_seq) AND (go.xid, go.seq) <= (r.to_xid, r.to_seq)
		AND NOT ($1 = 0 AND go.writer_token <> 0 AND go.writer_until IS NULL)
		AND NOT EXISTS (SELECT 1 FROM {state} gs WHERE gs.consumer_id = $1 AND gs.seq = go.seq)
		ORDER BY go.xid, go.seq LIMIT 1) rg
		WHERE r.consumer_id = $1 AND r.token <> $4)
	OR EXISTS (SELECT 1 FROM {consumers} hc JOIN {outbox} ho ON ho.seq = ANY(hc.held)
		WHERE hc.id = $1 AND ho.event_key = w.k AND ho.seq < w.seq AND ho.writer_until IS NOT NULL)`),
		t.consumerID, keys, seqs, old)
	if err != nil {
		return nil, err
	}
	blockedSeqs, err := storecore.Column[int64](q)
	if err != nil || len(blockedSeqs) == 0 {
		return rows, err
	}
	waiting := map[string]bool{}
	var wait []int64
	rows = slices.DeleteFunc(rows, func(r scanned) bool {
		if r.rec.Key == "" || !(waiting[r.rec.Key] || slices.Contains(blockedSeqs, r.rec.Seq)) {
			return false
		}
		waiting[r.rec.Key] = true
		wait = append(wait, r.rec.Seq)
		return true
	})
	return rows, waitInState(ctx, tx, t, wait)
}

// waitInState gives the messages seqs a pending state row of the
// consumer, due at once, unless they have one: held back behind their
// key, they wait there.
func waitInState(ctx context.Context, tx *sql.Tx, t *target, seqs []int64) error {
	_, err := tx.ExecContext(ctx, t.render(`INSERT INTO {state} (consumer_id, seq, event_key, next_attempt_at)
SELECT $1, o.seq, o.event_key, statement_timestamp() FROM {outbox} o WHERE o.seq = ANY($2::bigint[])
ON CONFLICT DO NOTHING`), t.consumerID, seqs)
	return err
}

// claimState leases up to limit due pending state rows of the consumer.
// Ordered, a keyed one only when it is its key's oldest pending message
// and no other message of its key is in flight or still to be walked
// (see keyGate).
func claimState(ctx context.Context, tx *sql.Tx, t *target, token int64, p backend.ClaimParams, limit int, walked position) ([]scanned, error) {
	args := []any{t.consumerID, limit, token, p.LeaseFor.Microseconds()}
	if p.Ordered {
		args = append(args, walked.xid, walked.seq)
	}
	return queryRecords(ctx, tx, t.render(claimStateSQL(p.Ordered)), args...)
}

// claimStateSQL is claimState's statement: $1 the consumer, $2 the limit,
// $3 the token, $4 the lease in microseconds, and, ordered, $5 and $6 the
// consumer's position (xid, seq).
func claimStateSQL(ordered bool) string {
	gate := ""
	if ordered {
		gate = ` AND (d.event_key = '\x' OR NOT (` + keyGate("d.event_key", "d.seq", "($5::bigint::text::xid8, $6)", "") + `))`
	}
	// Ordered, the due rows are read without SKIP LOCKED's help for keys:
	// claims of one consumer take turns on its registry row already.
	return `WITH due AS (
	SELECT d.seq FROM {state} d
	WHERE d.consumer_id = $1 AND d.status = 'pending' AND d.next_attempt_at <= statement_timestamp()` + gate + `
	ORDER BY d.next_attempt_at, d.seq LIMIT $2 FOR UPDATE SKIP LOCKED
)
UPDATE {state} s SET lease_token = $3, next_attempt_at = statement_timestamp() + $4 * interval '1 microsecond'
FROM due, {outbox} o WHERE s.consumer_id = $1 AND s.seq = due.seq AND o.seq = s.seq
RETURNING {statecols}`
}

// keyGate is true when a message of key k with seq seq must wait: a
// pending state row of its key has a smaller seq (failed, held back, or
// in flight), or one of its key is in flight (leased: a later one, when
// seq is a requeued dead letter), or a live range of the consumer handed out a message of
// its key (not one its writer delivered or with a state row), or a message of its key with a smaller seq is still to be walked
// (after end: a writer with a smaller xid wrote after one with a larger,
// as docs/ordering.md's row lock allows) and is not done with (its
// writer delivered it, or its state row is final), or the walk passed one with a
// smaller seq that its writer still holds (the held list). except, with {x} for the
// other message's seq, leaves messages out of the first and last test.
// $1 is the consumer. The live ranges drive the look for a message of
// theirs (LATERAL … LIMIT 1), which reads the key's messages within the
// range by the index on (event_key, xid, seq) (the ORDER BY asks for
// that index: a key with a long history otherwise looks cheaper to scan
// whole). Joined the other way, the planner read every message the key
// ever had for each candidate, with no range live at all (2.3 s a claim
// on a history of a million messages: TestKeyGateReadsTheRangesOnly).
func keyGate(k, seq, end, except string) string {
	ex := func(col string) string { return strings.ReplaceAll(except, "{x}", col) }
	return `EXISTS (SELECT 1 FROM {state} g WHERE g.consumer_id = $1 AND g.status = 'pending' AND g.event_key = ` + k + ` AND g.seq < ` + seq + ex("g.seq") + `)
	OR EXISTS (SELECT 1 FROM {state} f WHERE f.consumer_id = $1 AND f.status = 'pending' AND f.event_key = ` + k + `
		AND f.lease_token <> 0 AND f.next_attempt_at > statement_timestamp()` + ex("f.seq") + `)
	OR EXISTS (SELECT 1 FROM {ranges} r CROSS JOIN LATERAL (SELECT 1 FROM {outbox} go WHERE go.event_key = ` + k + `
		AND (go.xid, go.seq) > (r.from_xid, r.from_seq) AND (go.xid, go.seq) <= (r.to_xid, r.to_seq)
		AND NOT ($1 = 0 AND go.writer_token <> 0 AND go.writer_until IS NULL)
		AND NOT EXISTS (SELECT 1 FROM {state} gs WHERE gs.consumer_id = $1 AND gs.seq = go.seq)
		ORDER BY go.xid, go.seq LIMIT 1) rg
		WHERE r.consumer_id = $1)
	OR EXISTS (SELECT 1 FROM {outbox} go WHERE go.event_key = ` + k + ` AND (go.xid, go.seq) > ` + end + ` AND go.seq < ` + seq + ex("go.seq") + `
		AND NOT ($1 = 0 AND go.writer_token <> 0 AND go.writer_until IS NULL)
		AND NOT EXISTS (SELECT 1 FROM {state} gs WHERE gs.consumer_id = $1 AND gs.seq = go.seq AND gs.status <> 'pending'))
	OR EXISTS (SELECT 1 FROM {consumers} hc JOIN {outbox} ho ON ho.seq = ANY(hc.held)
		WHERE hc.id = $1 AND ho.event_key = ` + k + ` AND ho.seq < ` + seq + ` AND ho.writer_until IS NOT NULL` + ex("ho.seq") + `)`
}

// walked is one message read by the walk, with what decides its fate.
type walked struct {
	scanned
	xid      uint64
	hasState bool
	// Of the default consumer's messages: delivered by their writer, or
	// held by it now.
	byWriter, held bool
}

// walk reads up to limit messages past the consumer's position, below
// the horizon, as one range under token, and moves the position past
// them. It returns those to publish; the others are passed over (before
// the consumer's start, with a state row already, or delivered by their
// writer), added to the held list (held by their writer: held is the
// list so far, heldChanged says it differs from the stored one), or left
// to a state row (held back behind their key). The limit is written into
// the statement (see fastClaimSQL: a LIMIT parameter had the server plan
// it anew on every claim).
func walk(ctx context.Context, tx *sql.Tx, t *target, token int64, p backend.ClaimParams, limit int, from position, startSeq int64, b budget, held []int64, heldChanged bool) ([]scanned, bool, error) {
	q, err := tx.QueryContext(ctx, t.render(`SELECT {logcols}, o.xid::text::bigint,
	EXISTS (SELECT 1 FROM {state} s WHERE s.consumer_id = $1 AND s.seq = o.seq),
	o.writer_token <> 0 AND o.writer_until IS NULL, coalesce(o.writer_until > statement_timestamp(), false)
FROM {outbox} o
WHERE (o.xid, o.seq) > ($2::bigint::text::xid8, $3) AND o.xid < {horizon}
ORDER BY o.xid, o.seq LIMIT `+strconv.Itoa(limit+1)), t.consumerID, from.xid, from.seq)
	if err != nil {
		return nil, false, err
	}
	var ws []walked
	for q.Next() {
		var w walked
		sc, err := scanRecordWith(q, &w.xid, &w.hasState, &w.byWriter, &w.held)
		if err != nil {
			q.Close()
			return nil, false, err
		}
		w.scanned = sc
		ws = append(ws, w)
	}
	if err := q.Close(); err != nil {
		return nil, false, err
	}
	if err := q.Err(); err != nil {
		return nil, false, err
	}
	more := len(ws) > limit
	if more {
		ws = ws[:limit]
	}
	// The byte budget (MaxClaimBytes): messages are taken until it is
	// spent, so a claim holds at most MaxClaimBytes and one message.
	for i, w := range ws {
		if b.spent() {
			ws, more = ws[:i], true
			break
		}
		b = b.after([]scanned{w.scanned})
	}
	if len(ws) == 0 {
		if heldChanged {
			return nil, more, setHeld(ctx, tx, t, held)
		}
		return nil, more, nil
	}
	end := position{ws[len(ws)-1].xid, ws[len(ws)-1].rec.Seq}
	candidates := make([]walked, 0, len(ws))
	var heldNow []walked
	for _, w := range ws {
		switch {
		case w.hasState || w.rec.Seq <= startSeq:
		case t.consumerID == 0 && w.byWriter:
		case t.consumerID == 0 && w.held:
			held, heldChanged = append(held, w.rec.Seq), true
			heldNow = append(heldNow, w)
		default:
			candidates = append(candidates, w)
		}
	}
	var out []scanned
	var divert []int64
	if p.Ordered {
		blocked, err := gateWalk(ctx, tx, t, candidates, heldNow, end)
		if err != nil {
			return nil, false, err
		}
		for _, w := range candidates {
			if blocked[w.rec.Seq] {
				divert = append(divert, w.rec.Seq)
				continue
			}
			out = append(out, w.scanned)
		}
	} else {
		for _, w := range candidates {
			out = append(out, w.scanned)
		}
	}
	if len(divert) > 0 {
		if err := waitInState(ctx, tx, t, divert); err != nil {
			return nil, false, err
		}
	}
	// One position update (with the held list) and, when there is
	// something to publish, one range row for the whole batch.
	if held == nil {
		held = []int64{}
	}
	if _, err := tx.ExecContext(ctx, t.render(`WITH r AS (
	INSERT INTO {ranges} (consumer_id, token, from_xid, from_seq, to_xid, to_seq, n, owner, lease_until)
	SELECT $1, $2, $3::bigint::text::xid8, $4, $5::bigint::text::xid8, $6, $9, $7, statement_timestamp() + $8 * interval '1 microsecond'
	WHERE $9 > 0
)
UPDATE {consumers} SET walked_xid = $5::bigint::text::xid8, walked_seq = $6, held = $10 WHERE id = $1`),
		t.consumerID, token, from.xid, from.seq, end.xid, end.seq, p.Owner, p.LeaseFor.Microseconds(), len(out), held); err != nil {
		return nil, false, err
	}
	return out, more, nil
}

// gateWalk returns the seqs of ws (messages of one walk, ending at end)
// that must wait behind an older message of their key (see keyGate): a
// key's messages in this walk go in seq order, and once one waits, the
// later ones wait too.
func gateWalk(ctx context.Context, tx *sql.Tx, t *target, ws, heldNow []walked, end position) (map[int64]bool, error) {
	var keys [][]byte
	var seqs []int64
	for _, w := range ws {
		if w.rec.Key != "" {
			keys, seqs = append(keys, []byte(w.rec.Key)), append(seqs, w.rec.Seq)
		}
	}
	blocked := map[int64]bool{}
	if len(keys) == 0 {
		return blocked, nil
	}
	// What lies after the walk's end is still to be walked.
	cond := keyGate("w.k", "w.seq", "($4::bigint::text::xid8, $5)", "")
	q, err := tx.QueryContext(ctx, t.render(`SELECT w.k, w.seq, (`+cond+`) FROM unnest($2::bytea[], $3::bigint[]) AS w(k, seq)`),
		t.consumerID, keys, seqs, end.xid, end.seq)
	if err != nil {
		return nil, err
	}
	type ks struct {
		key  string
		seq  int64
		wait bool
	}
	var all []ks
	for q.Next() {
		var k []byte
		var x ks
		if err := q.Scan(&k, &x.seq, &x.wait); err != nil {
			q.Close()
			return nil, err
		}
		x.key = string(k)
		all = append(all, x)
	}
	if err := errors.Join(q.Err(), q.Close()); err != nil {
		return nil, err
	}
	// The messages this walk passed while their writer holds them keep
	// the later ones of their key waiting (the stored held list is
	// keyGate's).
	for _, w := range heldNow {
		if w.rec.Key != "" {
			all = append(all, ks{key: w.rec.Key, seq: w.rec.Seq, wait: true})
		}
	}
	slices.SortFunc(all, func(a, b ks) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return int(a.seq - b.seq)
	})
	waiting := ""
	for i, x := range all {
		if i == 0 || all[i-1].key != x.key {
			waiting = ""
		}
		if x.wait || waiting == x.key {
			blocked[x.seq], waiting = true, x.key
		}
	}
	return blocked, nil
}

// logSettle records outcomes under token: a message of the claim's range
// needs a write only if it was not published (a state row); a state row
// claimed under token is updated. The range is done with, and deleted.
// Outcomes whose range or lease is no longer token's are stale.
func logSettle(ctx context.Context, tx querier, t *target, token int64, outcomes []backend.Outcome) (backend.SettleResult, error) {
	// The common case: every record of one range published. The range
	// row goes, and nothing else is written or read.
	if !slices.ContainsFunc(outcomes, func(o backend.Outcome) bool { return o.Kind != backend.OutcomePublished }) {
		var done bool
		err := tx.QueryRowContext(ctx, t.render(`WITH r AS (
	DELETE FROM {ranges} WHERE consumer_id = {c} AND token = $1 AND n = $2 RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM r)`), token, len(outcomes)).Scan(&done)
		if err != nil {
			return backend.SettleResult{}, err
		}
		if done {
			return backend.SettleResult{Applied: len(outcomes)}, nil
		}
	}
	ids, kinds, retry, errs := outcomeColumns(outcomes)
	seqs := make([]int64, len(outcomes))
	for i, o := range outcomes {
		seqs[i] = o.Seq
	}
	// A range is done with when all its records are settled: most often
	// at once. Settled in parts, it stays until the last part (or until
	// its lease runs out: then a claim takes what has no state row yet),
	// and each part's records get state rows, published ones too.
	q, err := tx.QueryContext(ctx, t.render(`WITH o AS (
	SELECT o.id, o.kind, o.retry, o.err, m.seq, m.xid, m.event_key
	FROM unnest($1::text[], $2::int[], $3::bigint[], $4::text[], $6::bigint[]) AS o(id, kind, retry, err, seq)
	JOIN {outbox} m ON m.seq = CASE WHEN o.seq > 0 THEN o.seq ELSE (SELECT x.seq FROM {outbox} x WHERE x.event_id = o.id) END
		AND m.event_id = o.id
), r AS (
	SELECT from_xid, from_seq, to_xid, to_seq, n FROM {ranges} WHERE consumer_id = {c} AND token = $5 FOR UPDATE
), inr AS (
	SELECT o.* FROM o, r WHERE (o.xid, o.seq) > (r.from_xid, r.from_seq) AND (o.xid, o.seq) <= (r.to_xid, r.to_seq)
		AND NOT EXISTS (SELECT 1 FROM {state} s WHERE s.consumer_id = {c} AND s.seq = o.seq)
), whole AS (
	SELECT coalesce((SELECT count(*) FROM inr) >= (SELECT n FROM r), false) AS whole
), del AS (
	DELETE FROM {ranges} WHERE consumer_id = {c} AND token = $5 AND (SELECT whole FROM whole)
), part AS (
	UPDATE {ranges} SET n = n - (SELECT count(*) FROM inr) WHERE consumer_id = {c} AND token = $5 AND NOT (SELECT whole FROM whole)
), upd AS (`+stateUpdateSQL+`
), ins AS (`+stateInsertSQL+`
	FROM inr o WHERE o.kind <> 1 OR NOT (SELECT whole FROM whole)
	ON CONFLICT DO NOTHING
	RETURNING seq
)
SELECT id, kind FROM upd
UNION ALL SELECT o.id, o.kind FROM inr o WHERE o.kind = 1 AND (SELECT whole FROM whole)
UNION ALL SELECT o.id, o.kind FROM inr o JOIN ins ON ins.seq = o.seq`),
		ids, kinds, retry, errs, token, seqs)
	if err != nil {
		return backend.SettleResult{}, err
	}
	return settleResult(q, len(outcomes))
}

// insertLogSQL inserts the messages of unnested arrays, in their order,
// unless one of their IDs is stored already. ON CONFLICT covers a
// concurrent writer of one of the IDs: the statement waits for it and
// skips the row if it commits, rather than failing (which would abort
// the caller's transaction). A head start ($7, microseconds) holds the
// messages for their writer ($8, its token; 0: none). Times are the
// server's.
const insertLogSQL = `INSERT INTO {outbox} (event_id, event_key, event_type, payload, headers, occurred_at, created_at, writer_token, writer_until)
SELECT i.id, i.k, i.t, i.p, i.h::jsonb, i.o, statement_timestamp(), $8::bigint,
	CASE WHEN $8::bigint <> 0 THEN statement_timestamp() + $7::bigint * interval '1 microsecond' END
FROM unnest($1::text[], $2::bytea[], $3::bytea[], $4::bytea[], $5::text[], $6::timestamptz[]) WITH ORDINALITY AS i(id, k, t, p, h, o, n)
CROSS JOIN (SELECT CASE WHEN $9::text <> '' THEN pg_notify($9::text, '') END) AS nt
WHERE NOT EXISTS (SELECT 1 FROM {outbox} d WHERE d.event_id = ANY($1::text[]))
ORDER BY i.n
ON CONFLICT (event_id) DO NOTHING`
