package mysql

import (
	"context"
	"database/sql"
	"slices"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

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
	unkeyed, err := readRowsWithin(ctx, tx, budget, claimUnkeyedSQL(s.t, 0, max(1, limit/4)))
	if err != nil {
		return nil, err
	}
	heads, err := s.lockHeads(ctx, tx, budget, limit-len(unkeyed))
	if err != nil {
		return nil, err
	}
	out := append(unkeyed, heads...)
	if room := limit - len(out); room > 0 && len(unkeyed) == max(1, limit/4) && !budget.full {
		more, err := readRowsWithin(ctx, tx, budget, claimUnkeyedSQL(s.t, unkeyed[len(unkeyed)-1].seq, room))
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// lockHeads claims up to want due key heads, walking the keys in order
// from a cursor kept across claims: a round robin, so that every key with
// a due head gets its turn before any key gets a second one. SKIP LOCKED
// does not skip this transaction's own locks, so the walk never offers a
// key to the locking select twice (see keyWalk).
func (s *channel) lockHeads(ctx context.Context, tx *sql.Tx, budget *byteBudget, want int) ([]scannedRecord, error) {
	if want <= 0 || budget.full {
		return nil, nil
	}
	window := max(headWindowFactor*want, minHeadWindow)
	s.cursorMu.Lock()
	walk := keyWalk{start: s.keyCursor, at: s.keyCursor}
	s.cursorMu.Unlock()
	var out []scannedRecord
	for i := 0; i < maxHeadWindows && !walk.done; i++ {
		heads, err := readHeads(ctx, tx, keyHeadsSQL(s.t, walk.at, window))
		if err != nil {
			return nil, err
		}
		heads = walk.visit(heads, window)
		if len(heads) == 0 {
			continue
		}
		// Due heads in key order: the walk goes on after the last one taken.
		rows, err := readRowsWithin(ctx, tx, budget, claimHeadsSQL(s.t, heads, want-len(out)))
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
		if len(out) == want || budget.full {
			// The next claim goes on after the last head taken (or,
			// with none taken, where this one began).
			walk.at = walk.start
			if len(out) > 0 {
				walk.at = out[len(out)-1].rec.Key
			}
			break
		}
	}
	s.cursorMu.Lock()
	s.keyCursor = walk.at
	s.cursorMu.Unlock()
	return out, nil
}

// keyWalk is one claim's walk over the keys, in windows of key heads. It
// starts after the key start, wraps around to the first key at most once,
// and stops where it began.
type keyWalk struct {
	start string
	// at is the key the next window starts after ("": from the first).
	at      string
	wrapped bool
	done    bool
}

// visit takes the heads of a window read after w.at, of at most window
// keys, and moves the walk past them. It returns the heads this walk has
// not visited yet: on the second lap, those before start.
func (w *keyWalk) visit(heads []keyHead, window int) []keyHead {
	full := len(heads) == window
	if len(heads) > 0 {
		w.at = heads[len(heads)-1].key
	}
	if w.wrapped { // the second lap ends where the first began
		if i := slices.IndexFunc(heads, func(h keyHead) bool { return h.key > w.start }); i >= 0 {
			heads, w.done, w.at = heads[:i], true, w.start
		}
	}
	if !full && !w.done { // past the last key: once more from the first
		w.at = ""
		w.done = w.wrapped || w.start == ""
		w.wrapped = true
	}
	return heads
}

type keyHead struct {
	key string
	id  uint64
}

// readHeads runs a statement that selects key heads (key, seq).
func readHeads(ctx context.Context, tx *sql.Tx, st statement) ([]keyHead, error) {
	rows, err := st.query(ctx, tx)
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
	rows, err := readRowsWithin(ctx, tx, budget, claimIDsSQL(s.t, p.IDs, p.Limit))
	if err != nil {
		return nil, err
	}
	rows = exactly(rows, p.IDs)
	byKey := map[string][]uint64{}
	for _, r := range rows {
		if r.rec.Key != "" {
			byKey[r.rec.Key] = append(byKey[r.rec.Key], r.seq)
		}
	}
	headsOf := map[string]bool{}
	for key, seqs := range byKey {
		oldest, err := column[uint64](ctx, tx, oldestPendingSQL(s.t, key, len(seqs)))
		if err != nil {
			return nil, err
		}
		headsOf[key] = slices.Equal(oldest, seqs)
	}
	return slices.DeleteFunc(rows, func(r scannedRecord) bool { return r.rec.Key != "" && !headsOf[r.rec.Key] }), nil
}

// keyHeadsSQL reads the heads of up to limit keys after the key after, in
// key order, by a loose index scan of idx_status_key (idx_key in a
// consumption table): one read per key, however many records each holds,
// and none of the published or dead history (TestKeyHeadsPlan).
func keyHeadsSQL(t *target, after string, limit int) statement {
	return t.render("SELECT event_key, MIN({seq}) FROM {table} WHERE {scope}status = 'pending' AND event_key > ? GROUP BY {scopecols}status, event_key ORDER BY {scopecols}status, event_key LIMIT ?", after, limit)
}

// claimHeadsSQL locks the due heads among heads, in key order, skipping
// those other claims hold. Each is checked to be still its key's head once
// locked: a requeue may have made an older record of the key pending since
// the heads were read. (The check reads the key's first pending record in
// index order, LIMIT 1, where a NOT EXISTS of an older one would read the
// whole key.) A head waiting for its key's record in flight (a requeued
// dead letter: see Requeue) is claimed only once no record of its key is
// leased any more.
func claimHeadsSQL(t *target, heads []keyHead, limit int) statement {
	args := make([]any, 0, len(heads)+1)
	for _, h := range heads {
		args = append(args, h.id)
	}
	return t.renderList("SELECT {cols} FROM {table} h WHERE {scope}{seq} IN ({list}) AND status = 'pending' AND next_attempt_at <= UTC_TIMESTAMP(6) AND "+orderedUnclaimed+" AND h.{seq} = (SELECT x.{seq} FROM {table} x WHERE {scope}x.status = 'pending' AND x.event_key = h.event_key ORDER BY x.{seq} LIMIT 1) ORDER BY event_key LIMIT ? FOR UPDATE SKIP LOCKED", len(heads), append(args, limit)...)
}

// claimUnkeyedSQL locks up to limit due pending records without a key
// after sequence number after, skipping those other claims hold: a range
// of idx_status_key (idx_key), pending records only.
func claimUnkeyedSQL(t *target, after uint64, limit int) statement {
	return t.render("SELECT {cols} FROM {table} WHERE {scope}status = 'pending' AND event_key = '' AND {seq} > ? AND next_attempt_at <= UTC_TIMESTAMP(6) AND "+unclaimed+" ORDER BY {seq} LIMIT ? FOR UPDATE SKIP LOCKED", after, limit)
}

// oldestPendingSQL lists the sequence numbers of a key's limit oldest
// pending records.
func oldestPendingSQL(t *target, key string, limit int) statement {
	return t.render("SELECT {seq} FROM {table} WHERE {scope}status = 'pending' AND event_key = ? ORDER BY {seq} LIMIT ?", key, limit)
}

// behindHeads reports whether pending records of the keys of rows, the
// heads an ordered claim took, are left: they are due once their head is
// settled.
func behindHeads(ctx context.Context, tx *sql.Tx, t *target, rows []scannedRecord) (bool, error) {
	var keys []string
	for _, r := range rows {
		if r.rec.Key != "" {
			keys = append(keys, r.rec.Key)
		}
	}
	if len(keys) == 0 {
		return false, nil
	}
	n, err := column[int](ctx, tx, pendingOfKeysSQL(t, keys, len(keys)+1))
	if err != nil || len(n) == 0 {
		return false, err
	}
	return n[0] > len(keys), nil
}

// pendingOfKeysSQL counts the pending records of keys, up to limit: a
// range of idx_status_key (idx_key) per key. Each of an ordered claim's
// keys has one head pending; a count above the number of keys means
// records wait behind them.
func pendingOfKeysSQL(t *target, keys []string, limit int) statement {
	args := make([]any, 0, len(keys)+1)
	for _, k := range keys {
		args = append(args, k)
	}
	return t.renderList("SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE {scope}status = 'pending' AND event_key IN ({list}) LIMIT ?) AS x", len(keys), append(args, limit)...)
}
