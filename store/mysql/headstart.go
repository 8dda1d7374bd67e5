package mysql

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/internal/storecore"
)

// HeadStartBatch returns, without writing anything, those of ids that
// this process enqueued with a head start and that it still holds with
// at least minLeft of it to run, in insert order; the batch's token (the
// process's head start token) settles them, and left is the least head
// start they have left, on the database clock at the read. A message a
// claim has taken from the writer since (its head start ran out) is left
// out, as are messages of other processes and messages enqueued without
// a head start: claim those.
func (s *Store) HeadStartBatch(ctx context.Context, ids []string, minLeft time.Duration) (backend.Batch, time.Duration, error) {
	return s.headStartBatch(ctx, ids, minLeft, false)
}

// OrderedHeadStartBatch is HeadStartBatch that keeps per-key order: it
// leaves out every message of a key while an older message of that key,
// not among ids, is still to be delivered to the default consumer (in
// flight in a range, a pending state row, held by its writer, or not yet
// walked), or while an older one among ids is left out. It reads what
// has committed, and locks nothing.
func (s *Store) OrderedHeadStartBatch(ctx context.Context, ids []string, minLeft time.Duration) (backend.Batch, time.Duration, error) {
	return s.headStartBatch(ctx, ids, minLeft, true)
}

func (s *Store) headStartBatch(ctx context.Context, ids []string, minLeft time.Duration, ordered bool) (backend.Batch, time.Duration, error) {
	if len(ids) == 0 {
		return backend.Batch{}, 0, nil
	}
	if err := storecore.CheckHeadStartBatch(dialect.What, ids, minLeft); err != nil {
		return backend.Batch{}, 0, err
	}
	// A head start is only on what this build enqueued, and Enqueue
	// refuses IDs that end in a space: the only ones an ID of the list
	// matches with PAD SPACE other than itself (see exactID).
	ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return strings.HasSuffix(id, " ") })
	if len(ids) == 0 {
		return backend.Batch{}, 0, nil
	}
	rows, lefts, err := s.readHeadStarted(ctx, ids, minLeft)
	if err == nil && ordered && len(rows) > 0 {
		rows, lefts, err = s.orderGate(ctx, ids, rows, lefts)
	}
	if err != nil {
		return backend.Batch{}, 0, s.wrap("head start batch", err)
	}
	if len(rows) == 0 {
		return backend.Batch{}, 0, nil
	}
	return toBatch(headStartToken, rows), time.Duration(slices.Min(lefts)) * time.Microsecond, nil
}

// headStartSQL reads the named messages this process's head start still
// holds for at least minLeft, each with the microseconds it has left. A
// plain read: the head start is the lease, and only Settle, fenced by its
// token, writes.
func headStartSQL(t *target, ids []string, minLeft time.Duration) statement {
	args := append(anyArgs(ids), headStartID, minLeft.Microseconds())
	return t.renderList(`SELECT `+logCols+`, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), o.writer_until)
FROM {outbox} o LEFT JOIN {state} s FORCE INDEX ({primary}) ON s.consumer_id = 0 AND s.id = o.id
WHERE o.event_id IN ({list}) AND o.writer_token = ? AND o.writer_until > UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND AND s.id IS NULL
ORDER BY o.id`, len(ids), args...)
}

// readHeadStarted reads what headStartSQL selects within the claim's
// byte budget, and the head start each has left.
func (s *Store) readHeadStarted(ctx context.Context, ids []string, minLeft time.Duration) ([]scannedRecord, []int64, error) {
	var (
		left  int64
		lefts []int64
	)
	rows, err := readRowsThen(ctx, s.db, newBudget(s.maxClaimBytes), headStartSQL(s.t, ids, minLeft), []any{&left}, func() {
		lefts = append(lefts, left)
	})
	return rows, lefts, err
}

// orderGate keeps those of rows (the messages of ids the writer holds,
// in id order) that no older message of their key holds back.
func (s *Store) orderGate(ctx context.Context, ids []string, rows []scannedRecord, lefts []int64) ([]scannedRecord, []int64, error) {
	tx, err := s.db.BeginTx(ctx, readCommitted)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = tx.Rollback() }()
	var walked uint64
	var heldBytes []byte
	if err := tx.QueryRowContext(ctx, s.t.sql("SELECT walked, held FROM {consumers} WHERE id = 0")).Scan(&walked, &heldBytes); err != nil {
		return nil, nil, err
	}
	held, err := unpackIDs(heldBytes)
	if err != nil {
		return nil, nil, err
	}
	// Every message of ids (held by this writer or not): an older one of
	// a key that is not in rows holds the later ones back.
	all, err := column2(ctx, tx, s.t.renderList("SELECT id, event_key FROM {outbox} WHERE event_id IN ({list})", len(ids), anyArgs(ids)...))
	if err != nil {
		return nil, nil, err
	}
	mine := map[uint64]string{}
	for _, m := range all {
		mine[m.id] = m.key
	}
	var keys []string
	for _, r := range rows {
		if r.rec.Key != "" && !slices.Contains(keys, r.rec.Key) {
			keys = append(keys, r.rec.Key)
		}
	}
	g, err := readGate(ctx, tx, s.t, nil)
	if err != nil {
		return nil, nil, err
	}
	still, err := heldUndelivered(ctx, tx, s.t, held)
	if err != nil {
		return nil, nil, err
	}
	for _, m := range still {
		if _, isMine := mine[m.id]; !isMine {
			g.holdBack(m)
		}
	}
	blocked, err := keysWaiting(ctx, tx, s.t, g, walked, keys, mine)
	if err != nil {
		return nil, nil, err
	}
	taken := map[uint64]bool{}
	for _, r := range rows {
		taken[r.seq] = true
	}
	var outRows []scannedRecord
	var outLefts []int64
	for i, r := range rows {
		k := r.rec.Key
		if k != "" {
			if blocked[k] || olderLeftOut(mine, taken, k, r.seq) {
				continue
			}
		}
		outRows, outLefts = append(outRows, r), append(outLefts, lefts[i])
	}
	return outRows, outLefts, nil
}

// olderLeftOut says whether a message of ids with key k older than id is
// not among those read (taken): then id waits for it.
func olderLeftOut(mine map[uint64]string, taken map[uint64]bool, k string, id uint64) bool {
	for other, key := range mine {
		if key == k && other < id && !taken[other] {
			return true
		}
	}
	return false
}

// EndHeadStart ends the head start of those of ids that this process
// enqueued with one and still holds: the default consumer's readers take
// them at once. It returns how many it changed.
func (s *Store) EndHeadStart(ctx context.Context, ids []string) (int, error) {
	ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return strings.HasSuffix(id, " ") }) // see HeadStartBatch
	if ok, err := storecore.CheckEndHeadStart(s.what, ids); !ok {
		return 0, err
	}
	n, err := execRetrying(ctx, s.db, s.t.renderList(`UPDATE {outbox} SET writer_until = UTC_TIMESTAMP(6)
WHERE event_id IN ({list}) AND writer_token = ? AND writer_until > UTC_TIMESTAMP(6)`, len(ids), append(anyArgs(ids), headStartID)...))
	if err != nil {
		return 0, s.wrap("end head start", err)
	}
	return int(n), nil
}
