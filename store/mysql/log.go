package mysql

// The outbox as a log that each consumer reads past a position of its
// own (schema version 9; see LOG-DESIGN.md).

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// noTime is the value of a DATETIME(6) column that holds no time (the
// columns are NOT NULL, so that setting one rewrites the row in place).
const noTime = "'1970-01-01 00:00:01'"

// The columns of recordColumns (see scanRecord) for a message read from
// the log, not yet attempted, and for one with a state row s.
const (
	logCols = "o.id, o.event_id, o.event_key, o.event_type, o.payload, o.headers, o.occurred_at, o.created_at, " +
		"'pending', 0, NULL, o.created_at, NULL"
	stateCols = "o.id, o.event_id, o.event_key, o.event_type, o.payload, o.headers, o.occurred_at, o.created_at, " +
		"s.status, s.retry_count, NULLIF(s.last_error, ''), s.next_attempt_at, IF(s.status = 'published', s.finished_at, NULL)"
)

// byWriter is the condition of a message o that its writer delivered
// (its after-commit publish); heldByWriter of one its writer holds now.
// Only the default consumer ({c} 0) looks at them.
const (
	byWriter     = "o.writer_token <> 0 AND o.writer_until = " + noTime
	heldByWriter = "o.writer_until > UTC_TIMESTAMP(6)"
)

// maxHeld is how many messages the held list holds (its column is a
// VARBINARY(8192) of 8-byte ids). A walk that meets one more stops there
// until the list has room (the writers' head starts end, or they
// publish).
const maxHeld = 1024

// consumerRow is a consumer's registry row.
type consumerRow struct {
	walked, startSeq uint64
	held             []uint64

	// What a walk's claim looks at before it walks, read with the row
	// (lockForWalk): the token of the consumer's oldest range whose
	// lease has run out (0 for none), and whether a state row is due.
	expired int64
	due     bool
}

// consumerSQL reads a consumer's registry row.
const consumerSQL = "SELECT walked, start_seq, held FROM {consumers} WHERE id = {c} AND removing = 0"

// lockConsumer reads the consumer's registry row in tx, locked for
// update (a walk, which moves the position) or in share mode (a claim
// by ID, which does not): claims of one consumer take turns here.
func lockConsumer(ctx context.Context, tx *sql.Tx, t *target, share bool) (consumerRow, error) {
	lock := " FOR UPDATE"
	if share {
		lock = " LOCK IN SHARE MODE"
	}
	var c consumerRow
	var held []byte
	return c, c.scan(tx.QueryRowContext(ctx, t.sql(consumerSQL+lock)), &held)
}

// lockForWalkSQL is consumerSQL for a walk's claim, locked for update,
// with what the claim needs to know first: whether a range has run out
// (takeOver) and whether a state row is due (claimState). Its two
// subqueries are consistent reads, not locking ones (a locking clause
// locks the rows of its own query's tables only), so that the claim
// takes one round trip, and no other lock, to learn that it only walks.
const lockForWalkSQL = `SELECT walked, start_seq, held,
	COALESCE((SELECT token FROM {ranges} WHERE consumer_id = {c} AND lease_until < UTC_TIMESTAMP(6) ORDER BY from_id LIMIT 1), 0),
	EXISTS (SELECT 1 FROM {state} WHERE consumer_id = {c} AND status = 'pending' AND next_attempt_at <= UTC_TIMESTAMP(6))
FROM {consumers} WHERE id = {c} AND removing = 0 FOR UPDATE`

// lockForWalk is lockConsumer for a walk's claim (see lockForWalkSQL).
func lockForWalk(ctx context.Context, tx *sql.Tx, t *target) (consumerRow, error) {
	var c consumerRow
	var held []byte
	return c, c.scan(tx.QueryRowContext(ctx, t.sql(lockForWalkSQL)), &held, &c.expired, &c.due)
}

// scan reads the registry row from r into c, with extra columns.
func (c *consumerRow) scan(r *sql.Row, held *[]byte, extra ...any) error {
	err := r.Scan(append([]any{&c.walked, &c.startSeq, held}, extra...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrUnknownConsumer
	}
	if err != nil {
		return err
	}
	c.held, err = unpackIDs(*held)
	return err
}

// packIDs and unpackIDs are the held column's encoding.
func packIDs(ids []uint64) []byte {
	b := make([]byte, 8*len(ids))
	for i, id := range ids {
		binary.BigEndian.PutUint64(b[8*i:], id)
	}
	return b
}

func unpackIDs(b []byte) ([]uint64, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("the held list is %d bytes, not a multiple of 8", len(b))
	}
	ids := make([]uint64, len(b)/8)
	for i := range ids {
		ids[i] = binary.BigEndian.Uint64(b[8*i:])
	}
	return ids, nil
}

// hole is the first id missing from the log after a walk's position,
// with a later id (next) committed: a transaction that inserted it may
// still be open, or it rolled back (see gap.go).
type hole struct{ at, next uint64 }

// logClaim claims for t's consumer, in tx, whose registry row c is
// locked (lockForWalk): an expired range of another claimer first (all
// of it that fits p.Limit), else the due state rows and then the log past
// the consumer's position. more says it left something it could have
// taken; h, when not nil, is a hole the walk stopped at before taking
// anything.
func logClaim(ctx context.Context, tx *sql.Tx, t *target, c consumerRow, token int64, p backend.ClaimParams, maxBytes int) (rows []scannedRecord, more bool, h *hole, err error) {
	still, ended, err := resolveHeld(ctx, tx, t, c.held)
	if err != nil {
		return nil, false, nil, err
	}
	c.due = c.due || ended
	heldChanged := len(still) != len(c.held)
	rows, more, took, err := takeOver(ctx, tx, t, token, p, c, still)
	if err != nil || took {
		if err == nil && heldChanged {
			err = setHeld(ctx, tx, t, still)
		}
		return rows, more, nil, err
	}
	var g *gate
	if p.Ordered {
		if g, err = readGate(ctx, tx, t, still); err != nil {
			return nil, false, nil, err
		}
	}
	budget := newBudget(maxBytes)
	if c.due {
		if rows, err = claimState(ctx, tx, t, token, p, p.Limit, g, budget); err != nil {
			return nil, false, nil, err
		}
	}
	if left := p.Limit - len(rows); left > 0 && !budget.full {
		w, wmore, h, err := walk(ctx, tx, t, token, p, left, c, still, heldChanged, g, budget)
		if err != nil {
			return nil, false, nil, err
		}
		runs, err := claimRuns(ctx, tx, t, token, p, rows, left-len(w), c.walked, g, budget)
		if err != nil {
			return nil, false, nil, err
		}
		if len(rows) > 0 {
			h = nil
		}
		return append(append(rows, w...), runs...), wmore, h, nil
	}
	if heldChanged {
		if err := setHeld(ctx, tx, t, still); err != nil {
			return nil, false, nil, err
		}
	}
	return rows, true, nil, nil
}

// The default consumer's walk passes a message its writer holds for its
// after-commit publish (writer_until in the future) without a write: it
// goes into the consumer's list of held messages (the held column, on
// the row each walk updates anyway), and the writer's settle of it is
// one in-place update of the message (writer_until to noTime). Each
// claim looks at the list first: a message its writer delivered, or
// that has a state row (its writer's publish failed), leaves it; one
// whose head start ended (its writer died, or ended it) gets a state
// row, due at once, and leaves it.

// heldMessage is a message of the held list that its writer still holds.
type heldMessage struct {
	id  uint64
	key string
}

// resolveHeld returns those of held that their writer still holds, and
// gives those whose head start ended a state row, due now (ended says
// it gave one).
func resolveHeld(ctx context.Context, tx *sql.Tx, t *target, held []uint64) (still []heldMessage, ended bool, err error) {
	if len(held) == 0 {
		return nil, false, nil
	}
	q, err := t.renderList(`SELECT o.id, o.event_key, `+heldByWriter+`, s.id IS NOT NULL OR (`+byWriter+`)
FROM {outbox} o LEFT JOIN {state} s FORCE INDEX ({primary}) ON s.consumer_id = 0 AND s.id = o.id WHERE o.id IN ({list}) ORDER BY o.id`, len(held), anyArgs(held)...).query(ctx, tx)
	if err != nil {
		return nil, false, err
	}
	var over []heldMessage
	for q.Next() {
		var (
			m          heldMessage
			key        []byte
			hold, done bool
		)
		if err := q.Scan(&m.id, &key, &hold, &done); err != nil {
			q.Close()
			return nil, false, err
		}
		m.key = string(key)
		switch {
		case done:
		case hold:
			still = append(still, m)
		default:
			over = append(over, m)
		}
	}
	if err := errors.Join(q.Err(), q.Close()); err != nil {
		return nil, false, err
	}
	if len(over) > 0 {
		if _, err := dueStateRowsSQL(t, over).exec(ctx, tx); err != nil {
			return nil, false, err
		}
	}
	return still, len(over) > 0, nil
}

// heldUndelivered returns those of held that are still to be delivered
// without a state row: their writer holds them, or its hold ended and no
// walk has given them a state row yet (resolveHeld). It writes nothing (a
// claim by ID, which holds the registry row in share mode, and the
// writer's ordered read leave the list to the walks), and it is what an
// order gate outside a walk must count: a message whose hold ended is
// pending all the same.
func heldUndelivered(ctx context.Context, tx *sql.Tx, t *target, held []uint64) ([]heldMessage, error) {
	if len(held) == 0 {
		return nil, nil
	}
	return column2(ctx, tx, t.renderList(`SELECT o.id, o.event_key FROM {outbox} o LEFT JOIN {state} s FORCE INDEX ({primary}) ON s.consumer_id = 0 AND s.id = o.id
WHERE o.id IN ({list}) AND NOT (`+byWriter+`) AND s.id IS NULL`, len(held), anyArgs(held)...))
}

// dueStateRowsSQL gives messages a pending state row of the consumer,
// due at once, unless they have one.
func dueStateRowsSQL(t *target, ms []heldMessage) statement {
	args := make([]any, 0, 2*len(ms))
	for _, m := range ms {
		args = append(args, m.id, m.key)
	}
	return t.renderRows("INSERT IGNORE INTO {state} (consumer_id, id, event_key, next_attempt_at) VALUES ({c}, ?, ?, UTC_TIMESTAMP(6))", len(ms), args...)
}

func setHeld(ctx context.Context, tx *sql.Tx, t *target, held []heldMessage) error {
	_, err := tx.ExecContext(ctx, t.sql("UPDATE {consumers} SET held = ? WHERE id = {c}"), packIDs(heldIDs(held)))
	return err
}

func heldIDs(held []heldMessage) []uint64 {
	ids := make([]uint64, len(held))
	for i, m := range held {
		ids[i] = m.id
	}
	return ids
}

// takeOver takes the consumer's range whose lease has run out that c
// names (c.expired, its oldest when the registry row was read), if it
// still has, under token: the messages in it that have no state row, as
// many as p.Limit allows (the rest stays behind as a range of its own,
// expired, for the next claim).
func takeOver(ctx context.Context, tx *sql.Tx, t *target, token int64, p backend.ClaimParams, c consumerRow, held []heldMessage) (rows []scannedRecord, more, took bool, err error) {
	if c.expired == 0 {
		return nil, false, false, nil
	}
	old := c.expired
	var from, to uint64
	// Found by a plain read (lockForWalkSQL), then locked alone: a
	// locking read of the consumer's ranges would wait for every settle
	// in progress (which holds its range's row), and deadlock with a
	// settle that waits for the consumer's row (SettleAndClaim).
	err = tx.QueryRowContext(ctx, t.sql(`SELECT from_id, to_id FROM {ranges}
WHERE consumer_id = {c} AND token = ? AND lease_until < UTC_TIMESTAMP(6) FOR UPDATE`), old).Scan(&from, &to)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, false, nil
	}
	if err != nil {
		return nil, false, false, err
	}
	rows, err = readRows(ctx, tx, t.render(`SELECT `+logCols+` FROM {outbox} o LEFT JOIN {state} s FORCE INDEX ({primary}) ON s.consumer_id = {c} AND s.id = o.id
WHERE o.id > ? AND o.id <= ? AND o.id > ? AND s.id IS NULL AND NOT ({c} = 0 AND `+byWriter+`)
ORDER BY o.id LIMIT `+strconv.Itoa(p.Limit+len(held)+1), from, to, c.startSeq))
	if err != nil {
		return nil, false, false, err
	}
	rows = slices.DeleteFunc(rows, func(r scannedRecord) bool {
		return slices.ContainsFunc(held, func(m heldMessage) bool { return m.id == r.seq })
	})
	if p.Ordered {
		if rows, err = gateTakeOver(ctx, tx, t, old, from, held, rows); err != nil {
			return nil, false, false, err
		}
	}
	end := to
	if len(rows) == 0 {
		// Everything in it was settled otherwise (state rows): done.
		_, err := tx.ExecContext(ctx, t.sql("DELETE FROM {ranges} WHERE consumer_id = {c} AND token = ?"), old)
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
		end = rows[len(rows)-1].seq
		if _, err := tx.ExecContext(ctx, t.sql(`INSERT INTO {ranges} (consumer_id, token, from_id, to_id, n, owner, claimed_at, lease_until)
VALUES ({c}, ?, ?, ?, 0, '', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) - INTERVAL 1 MICROSECOND)`), token^1<<62, end, to); err != nil {
			return nil, false, false, err
		}
		more = true
	}
	_, err = tx.ExecContext(ctx, t.sql(`UPDATE {ranges} SET token = ?, owner = ?, claimed_at = UTC_TIMESTAMP(6),
	lease_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, to_id = ?, n = ?
WHERE consumer_id = {c} AND token = ?`), token, p.Owner, p.LeaseFor.Microseconds(), end, len(rows), old)
	if err != nil {
		return nil, false, false, err
	}
	return rows, more, true, nil
}

// gateTakeOver holds back, from rows (the messages of the range under
// token old, from_id from, that an ordered take-over would hand out),
// those that must wait behind an older message of their key, as a walk
// does (gateWalk): one in another range of the consumer, a pending state
// row, or one its writer holds. They get state rows, due at once (they
// leave the range), and wait there. The range's own messages were gated
// when it was walked; what the gate finds since is an older message that
// became pending after that: the first part of this range when an
// earlier take-over split it (a claim of a smaller batch) and one of its
// messages failed, or a dead letter requeued.
func gateTakeOver(ctx context.Context, tx *sql.Tx, t *target, old int64, from uint64, held []heldMessage, rows []scannedRecord) ([]scannedRecord, error) {
	g := newGate(held)
	if err := g.readInFlight(ctx, tx, t.render(inFlightKeysSQL+` AND r.token <> ? AND o.id <= ?`, old, from)); err != nil {
		return nil, err
	}
	ws := make([]walked, len(rows))
	for i, r := range rows {
		ws[i] = walked{scannedRecord: r}
	}
	blocked, err := gateWalk(ctx, tx, t, g, ws)
	if err != nil || len(blocked) == 0 {
		return rows, err
	}
	var wait []heldMessage
	rows = slices.DeleteFunc(rows, func(r scannedRecord) bool {
		if blocked[r.seq] {
			wait = append(wait, heldMessage{id: r.seq, key: r.rec.Key})
		}
		return blocked[r.seq]
	})
	_, err = dueStateRowsSQL(t, wait).exec(ctx, tx)
	return rows, err
}

// inFlightKeysSQL reads the keys of the messages handed out in the
// consumer's ranges and not settled otherwise (no state row).
const inFlightKeysSQL = `SELECT DISTINCT o.event_key FROM {ranges} r
JOIN {outbox} o ON o.id > r.from_id AND o.id <= r.to_id
LEFT JOIN {state} s FORCE INDEX ({primary}) ON s.consumer_id = {c} AND s.id = o.id
WHERE r.consumer_id = {c} AND o.event_key <> '' AND s.id IS NULL AND NOT ({c} = 0 AND ` + byWriter + `)`

// gate is what holds a keyed message back in an ordered claim: a message
// of its key handed out in a live range of the consumer (and not settled
// otherwise), or an older one its writer holds (the held list), or an
// older pending state row of its key (read per key, see olderPending).
type gate struct {
	inFlight map[string]bool
	held     map[string]uint64 // the smallest id of each key
}

// readGate reads the keys the consumer's live ranges hold and those of
// the held list.
func readGate(ctx context.Context, tx *sql.Tx, t *target, held []heldMessage) (*gate, error) {
	g := newGate(held)
	if err := g.readInFlight(ctx, tx, t.render(inFlightKeysSQL)); err != nil {
		return nil, err
	}
	// And those of state rows leased now: a requeued dead letter is its
	// key's oldest pending record while a later one may be in flight.
	if err := g.readInFlight(ctx, tx, t.render(`SELECT DISTINCT event_key FROM {state}
WHERE consumer_id = {c} AND status = 'pending' AND lease_token <> 0 AND next_attempt_at > UTC_TIMESTAMP(6) AND event_key <> ''`)); err != nil {
		return nil, err
	}
	return g, nil
}

// newGate returns a gate that holds back the keys of held (messages
// their writers hold), and none in flight yet.
func newGate(held []heldMessage) *gate {
	g := &gate{inFlight: map[string]bool{}, held: map[string]uint64{}}
	for _, m := range held {
		g.holdBack(m)
	}
	return g
}

// readInFlight counts the keys q reads (one column) as in flight.
func (g *gate) readInFlight(ctx context.Context, tx *sql.Tx, q statement) error {
	keys, err := column[[]byte](ctx, tx, q)
	for _, k := range keys {
		g.inFlight[string(k)] = true
	}
	return err
}

// holdBack counts m, a message its writer holds, in the gate.
func (g *gate) holdBack(m heldMessage) {
	if m.key == "" {
		return
	}
	if old, ok := g.held[m.key]; !ok || m.id < old {
		g.held[m.key] = m.id
	}
}

// heldBefore says whether a message of key older than id is held by its
// writer.
func (g *gate) heldBefore(key string, id uint64) bool {
	old, ok := g.held[key]
	return ok && old < id
}

// waits says whether a message of key with id waits behind one the gate
// knows of (not the state rows: see olderPending).
func (g *gate) waits(key string, id uint64) bool {
	if key == "" {
		return false
	}
	return g.inFlight[key] || g.heldBefore(key, id)
}

// olderPending returns, for each of keys, the smallest id of a pending
// state row of the consumer with that key.
func olderPending(ctx context.Context, tx *sql.Tx, t *target, keys []string) (map[string]uint64, error) {
	out := map[string]uint64{}
	if len(keys) == 0 {
		return out, nil
	}
	q, err := t.renderList(`SELECT event_key, MIN(id) FROM {state}
WHERE consumer_id = {c} AND status = 'pending' AND event_key IN ({list}) GROUP BY event_key`, len(keys), anyArgs(keys)...).query(ctx, tx)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	for q.Next() {
		var k []byte
		var id uint64
		if err := q.Scan(&k, &id); err != nil {
			return nil, err
		}
		out[string(k)] = id
	}
	return out, q.Err()
}

// claimState leases up to limit due pending state rows of the consumer
// (within the budget). Ordered (g not nil), a keyed one only when it is
// its key's oldest pending message and no other message of its key is in
// flight or held by its writer (the key's next ones may follow it in the
// room the walk leaves: claimRuns).
func claimState(ctx context.Context, tx *sql.Tx, t *target, token int64, p backend.ClaimParams, limit int, g *gate, budget *byteBudget) ([]scannedRecord, error) {
	var due []heldMessage
	if g == nil {
		ids, err := column[uint64](ctx, tx, t.render(`SELECT id FROM {state}
WHERE consumer_id = {c} AND status = 'pending' AND next_attempt_at <= UTC_TIMESTAMP(6)
ORDER BY next_attempt_at, id LIMIT `+strconv.Itoa(limit)+` FOR UPDATE SKIP LOCKED`))
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			due = append(due, heldMessage{id: id})
		}
	} else {
		// Ordered, each key's oldest pending row only. One that a settle
		// holds is skipped, and the later ones of its key wait behind it
		// (it is still pending for the NOT EXISTS, a plain read).
		q, err := tx.QueryContext(ctx, t.sql(`SELECT s.id, s.event_key FROM {state} s
WHERE s.consumer_id = {c} AND s.status = 'pending' AND s.next_attempt_at <= UTC_TIMESTAMP(6)
	AND (s.event_key = '' OR NOT EXISTS (SELECT 1 FROM {state} o
		WHERE o.consumer_id = {c} AND o.status = 'pending' AND o.event_key = s.event_key AND o.id < s.id))
ORDER BY s.next_attempt_at, s.id LIMIT `+strconv.Itoa(4*limit)+` FOR UPDATE SKIP LOCKED`))
		if err != nil {
			return nil, err
		}
		for q.Next() {
			var m heldMessage
			var k []byte
			if err := q.Scan(&m.id, &k); err != nil {
				q.Close()
				return nil, err
			}
			m.key = string(k)
			if !g.waits(m.key, m.id) && len(due) < limit {
				due = append(due, m)
			}
		}
		if err := errors.Join(q.Err(), q.Close()); err != nil {
			return nil, err
		}
	}
	return leaseState(ctx, tx, t, token, p, due, g, budget)
}

// leaseState leases the state rows of due under token, as many as the
// budget allows, and counts their keys in flight (g, when ordered).
func leaseState(ctx context.Context, tx *sql.Tx, t *target, token int64, p backend.ClaimParams, due []heldMessage, g *gate, budget *byteBudget) ([]scannedRecord, error) {
	if len(due) == 0 {
		return nil, nil
	}
	// In id order: a key's messages go out in the order of the batch.
	ids := anyArgs(heldIDs(due))
	rows, err := readRowsWithin(ctx, tx, budget, t.renderList(`SELECT `+stateCols+` FROM {state} s JOIN {outbox} o ON o.id = s.id
WHERE s.consumer_id = {c} AND s.id IN ({list}) ORDER BY s.id`, len(ids), ids...))
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	args := append([]any{token, p.LeaseFor.Microseconds()}, anyArgs(seqs(rows))...)
	if _, err := t.renderList(`UPDATE {state} SET lease_token = ?, next_attempt_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE consumer_id = {c} AND id IN ({list})`, len(rows), args...).exec(ctx, tx); err != nil {
		return nil, err
	}
	if g != nil {
		for _, r := range rows {
			if r.rec.Key != "" {
				g.inFlight[r.rec.Key] = true
			}
		}
	}
	return rows, nil
}

// claimRuns leases, in room left after the walk, the state rows of the
// keys whose heads an ordered claimState took (heads) that follow each
// head without a gap (keyRuns): a key whose messages waited while one of
// them was out goes out whole, in order, not one message a claim. Only
// behind a head that has not failed (one that has is likely to fail
// again, and the worker would release what follows it), and only in the
// room the walk leaves, so that a key's backlog never holds the log's
// other keys back.
func claimRuns(ctx context.Context, tx *sql.Tx, t *target, token int64, p backend.ClaimParams, heads []scannedRecord, room int, walked uint64, g *gate, budget *byteBudget) ([]scannedRecord, error) {
	if g == nil || room <= 0 || budget.full {
		return nil, nil
	}
	var fresh []heldMessage
	for _, h := range heads {
		if h.rec.Key != "" && h.rec.Attempts == 0 && h.seq <= walked {
			fresh = append(fresh, heldMessage{id: h.seq, key: h.rec.Key})
		}
	}
	next, err := keyRuns(ctx, tx, t, fresh, room, walked, g)
	if err != nil {
		return nil, err
	}
	return leaseState(ctx, tx, t, token, p, next, g, budget)
}

// keyRuns returns, for the keyed heads an ordered claimState takes, up
// to room of the state rows of their keys that follow each head without
// a gap: due, pending, at or below the position (below it, every
// message of the key is delivered, in a range, held or has a state row,
// so the key's state rows in id order are its order), and not held by
// another transaction (a settle's). A key whose messages were diverted
// while one of them was out (the walk's gate) so goes out whole, in
// order, in one batch, not one message a claim.
func keyRuns(ctx context.Context, tx *sql.Tx, t *target, heads []heldMessage, room int, walked uint64, g *gate) ([]heldMessage, error) {
	head := map[string]uint64{}
	var keys []string
	for _, h := range heads {
		if h.key != "" && h.id <= walked {
			head[h.key] = h.id
			keys = append(keys, h.key)
		}
	}
	if len(keys) == 0 || room <= 0 {
		return nil, nil
	}
	type row struct {
		heldMessage
		due bool
	}
	q, err := t.renderList(`SELECT id, event_key, next_attempt_at <= UTC_TIMESTAMP(6) FROM {state}
WHERE consumer_id = {c} AND status = 'pending' AND event_key IN ({list}) AND id <= ? ORDER BY id`, len(keys), append(anyArgs(keys), walked)...).query(ctx, tx)
	if err != nil {
		return nil, err
	}
	var pending []row
	for q.Next() {
		var r row
		var k []byte
		if err := q.Scan(&r.id, &k, &r.due); err != nil {
			q.Close()
			return nil, err
		}
		r.key = string(k)
		pending = append(pending, r)
	}
	if err := errors.Join(q.Err(), q.Close()); err != nil {
		return nil, err
	}
	// Each key's rows after its head, up to the first that is not due
	// (leased, or to be retried later) or that its writer holds back.
	stopped := map[string]bool{}
	var next []heldMessage
	for _, r := range pending {
		h, ok := head[r.key]
		if !ok || r.id <= h || stopped[r.key] {
			continue
		}
		if !r.due || g.heldBefore(r.key, r.id) || len(next) == room {
			stopped[r.key] = true
			continue
		}
		next = append(next, r.heldMessage)
	}
	if len(next) == 0 {
		return nil, nil
	}
	// Locked as the heads are; a run ends at a row a settle holds.
	ids := anyArgs(heldIDs(next))
	locked, err := column[uint64](ctx, tx, t.renderList(`SELECT id FROM {state}
WHERE consumer_id = {c} AND id IN ({list}) AND status = 'pending' AND next_attempt_at <= UTC_TIMESTAMP(6) FOR UPDATE SKIP LOCKED`, len(ids), ids...))
	if err != nil {
		return nil, err
	}
	out := next[:0]
	stopped = map[string]bool{}
	for _, m := range next {
		if stopped[m.key] || !slices.Contains(locked, m.id) {
			stopped[m.key] = true
			continue
		}
		out = append(out, m)
	}
	return out, nil
}

func seqs(rows []scannedRecord) []uint64 {
	out := make([]uint64, len(rows))
	for i, r := range rows {
		out[i] = r.seq
	}
	return out
}

// walked is one message read by the walk, with what decides its fate.
type walked struct {
	scannedRecord
	hasState bool
	// Of the default consumer's messages: delivered by their writer, or
	// held by it now.
	byWriter, held bool
}

// walkSQL reads the log past the consumer's position: what a consistent
// read sees committed, in id order.
const walkSQL = `SELECT ` + logCols + `, s.id IS NOT NULL, ` + byWriter + `, ` + heldByWriter + `
FROM {outbox} o LEFT JOIN {state} s FORCE INDEX ({primary}) ON s.consumer_id = {c} AND s.id = o.id
WHERE o.id > ? ORDER BY o.id LIMIT `

// walk reads up to limit messages past the consumer's position as one
// range under token, and moves the position past them. It reads only
// the run of ids that follow the position without a hole: a missing id
// may be a transaction still open (see gap.go), and a message it
// inserted must not be passed. It returns those to publish; the others
// are passed over (before the consumer's start, with a state row
// already, or delivered by their writer), added to the held list (held
// by their writer), or left to a state row (held back behind their
// key). h is the hole it stopped at when it took nothing.
func walk(ctx context.Context, tx *sql.Tx, t *target, token int64, p backend.ClaimParams, limit int, c consumerRow, held []heldMessage, heldChanged bool, g *gate, budget *byteBudget) (out []scannedRecord, more bool, h *hole, err error) {
	q, err := tx.QueryContext(ctx, t.sql(walkSQL+strconv.Itoa(limit+1)), c.walked)
	if err != nil {
		return nil, false, nil, err
	}
	var ws []walked
	for q.Next() {
		var w walked
		sc, err := scanRecord(withExtra{q, []any{&w.hasState, &w.byWriter, &w.held}})
		if err != nil {
			q.Close()
			return nil, false, nil, err
		}
		w.scannedRecord = sc
		ws = append(ws, w)
	}
	if err := q.Close(); err != nil {
		return nil, false, nil, err
	}
	if err := q.Err(); err != nil {
		return nil, false, nil, err
	}
	more = len(ws) > limit
	// The run without a hole, within the budget and the held list's room.
	end := c.walked
	n := 0
	for _, w := range ws {
		if n == limit {
			break
		}
		if w.seq != end+1 {
			more = true
			if n == 0 {
				h = &hole{at: end + 1, next: w.seq}
			}
			break
		}
		if w.takes() {
			if !budget.take(recordSize(w.rec)) {
				more = true
				break
			}
		}
		if t.consumerID == 0 && w.held && !w.hasState && w.seq > c.startSeq && !w.byWriter && len(held) >= maxHeld {
			more = true
			break
		}
		end = w.seq
		n++
	}
	ws = ws[:n]
	if n == 0 {
		if heldChanged {
			return nil, more, h, setHeld(ctx, tx, t, held)
		}
		return nil, more, h, nil
	}
	var candidates []walked
	for _, w := range ws {
		switch {
		case w.hasState || w.seq <= c.startSeq:
		case t.consumerID == 0 && w.byWriter:
		case t.consumerID == 0 && w.held:
			m := heldMessage{id: w.seq, key: w.rec.Key}
			held = append(held, m)
			if g != nil {
				g.holdBack(m)
			}
		default:
			candidates = append(candidates, w)
		}
	}
	var divert []heldMessage
	if g != nil {
		blocked, err := gateWalk(ctx, tx, t, g, candidates)
		if err != nil {
			return nil, false, nil, err
		}
		for _, w := range candidates {
			if blocked[w.seq] {
				divert = append(divert, heldMessage{id: w.seq, key: w.rec.Key})
				continue
			}
			out = append(out, w.scannedRecord)
		}
	} else {
		for _, w := range candidates {
			out = append(out, w.scannedRecord)
		}
	}
	if len(divert) > 0 {
		if _, err := dueStateRowsSQL(t, divert).exec(ctx, tx); err != nil {
			return nil, false, nil, err
		}
	}
	// One position update (with the held list) and, when there is
	// something to publish, one range row for the whole batch.
	if len(out) > 0 {
		if _, err := tx.ExecContext(ctx, t.sql(`INSERT INTO {ranges} (consumer_id, token, from_id, to_id, n, owner, claimed_at, lease_until)
VALUES ({c}, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)`),
			token, c.walked, end, len(out), p.Owner, p.LeaseFor.Microseconds()); err != nil {
			return nil, false, nil, err
		}
	}
	if t.consumerID == 0 {
		_, err = tx.ExecContext(ctx, t.sql("UPDATE {consumers} SET walked = ?, held = ? WHERE id = {c}"), end, packIDs(heldIDs(held)))
	} else {
		_, err = tx.ExecContext(ctx, t.sql("UPDATE {consumers} SET walked = ? WHERE id = {c}"), end)
	}
	if err != nil {
		return nil, false, nil, err
	}
	return out, more, nil, nil
}

// takes says whether the walk may hand w out (and so load its payload
// into the claim's budget).
func (w walked) takes() bool { return !w.hasState && !w.byWriter && !w.held }

// gateWalk returns the ids of ws (messages of one walk, in id order)
// that must wait behind an older message of their key: one in flight, a
// pending state row with a smaller id, or one held by its writer. A
// key's messages in this walk go in id order, and once one waits, the
// later ones wait too.
func gateWalk(ctx context.Context, tx *sql.Tx, t *target, g *gate, ws []walked) (map[uint64]bool, error) {
	var keys []string
	for _, w := range ws {
		if w.rec.Key != "" && !slices.Contains(keys, w.rec.Key) {
			keys = append(keys, w.rec.Key)
		}
	}
	blocked := map[uint64]bool{}
	if len(keys) == 0 {
		return blocked, nil
	}
	pending, err := olderPending(ctx, tx, t, keys)
	if err != nil {
		return nil, err
	}
	waiting := map[string]bool{}
	for _, w := range ws {
		k := w.rec.Key
		if k == "" {
			continue
		}
		old, ok := pending[k]
		if waiting[k] || g.waits(k, w.seq) || (ok && old < w.seq) {
			blocked[w.seq], waiting[k] = true, true
		}
	}
	return blocked, nil
}
