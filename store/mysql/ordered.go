package mysql

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"time"

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
// marked reports that it marked key states done on the way.
func (s *channel) lockOrdered(ctx context.Context, tx *sql.Tx, budget *byteBudget, limit int) (out []scannedRecord, marked bool, err error) {
	if marked, err = s.sweepUnkeyed(ctx, tx); err != nil {
		return nil, false, err
	}
	unkeyed, err := readRowsWithin(ctx, tx, budget, claimUnkeyedSQL(s.t, 0, max(1, limit/4)))
	if err != nil {
		return nil, false, err
	}
	heads, markedHeads, err := s.lockHeads(ctx, tx, budget, limit-len(unkeyed))
	if err != nil {
		return nil, false, err
	}
	marked = marked || markedHeads
	out = append(unkeyed, heads...)
	if room := limit - len(out); room > 0 && len(unkeyed) == max(1, limit/4) && !budget.full {
		more, err := readRowsWithin(ctx, tx, budget, claimUnkeyedSQL(s.t, unkeyed[len(unkeyed)-1].seq, room))
		if err != nil {
			return nil, false, err
		}
		out = append(out, more...)
	}
	return out, marked, nil
}

// lockHeads claims up to want due key heads, walking the keys in order
// from a cursor kept across claims: a round robin, so that every key with
// a due head gets its turn before any key gets a second one. SKIP LOCKED
// does not skip this transaction's own locks, so the walk never offers a
// key to the locking select twice (see keyWalk).
//
// A head it passes over because it is stale (no longer pending, its key
// state not marked done: see create.sql) makes it mark its key's stale
// records done and claim the key's pending head (see reclaimStale);
// marked reports that it marked records.
func (s *channel) lockHeads(ctx context.Context, tx *sql.Tx, budget *byteBudget, want int) (out []scannedRecord, marked bool, err error) {
	if want <= 0 || budget.full {
		return nil, false, nil
	}
	window := max(headWindowFactor*want, minHeadWindow)
	s.cursorMu.Lock()
	walk := keyWalk{start: s.keyCursor, at: s.keyCursor}
	s.cursorMu.Unlock()
	lastTaken := "" // the last key taken, in the walk's order
	for i := 0; i < maxHeadWindows && !walk.done; i++ {
		heads, err := s.headWindow(ctx, tx, walk.at, window)
		if err != nil {
			return nil, false, err
		}
		heads = walk.visit(heads, window)
		if len(heads) == 0 {
			continue
		}
		// Due heads in key order: the walk goes on after the last one taken.
		asked := want - len(out)
		rows, err := readRowsWithin(ctx, tx, budget, claimHeadsSQL(s.t, heads, asked))
		if err != nil {
			return nil, false, err
		}
		out = append(out, rows...)
		// Heads passed over may be stale (see create.sql): if so, mark
		// their keys' stale records and claim the pending heads behind.
		more, n, err := s.reclaimStale(ctx, tx, budget, skippedHeads(heads, rows, asked), want-len(out))
		if err != nil {
			return nil, false, err
		}
		out, marked = append(out, more...), marked || n > 0
		if taken := append(rows, more...); len(taken) > 0 {
			// One window's keys are one lap's: the greatest is the last.
			lastTaken = taken[0].rec.Key
			for _, r := range taken {
				lastTaken = max(lastTaken, r.rec.Key)
			}
		}
		if len(out) == want || budget.full {
			// The next claim goes on after the last head taken (or,
			// with none taken, where this one began).
			walk.at = walk.start
			if len(out) > 0 {
				walk.at = lastTaken
			}
			break
		}
	}
	s.cursorMu.Lock()
	s.keyCursor = walk.at
	s.cursorMu.Unlock()
	return out, marked, nil
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

// headWindow returns the heads of up to window keys after cursor, in key
// order.
func (s *channel) headWindow(ctx context.Context, tx *sql.Tx, cursor string, window int) ([]keyHead, error) {
	return readHeads(ctx, tx, keyHeadsSQL(s.t, cursor, window))
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

// skippedHeads are the heads a claim of asked heads read and did not
// take: before the last one it took, or all it did not take when it took
// fewer than it asked for (claimHeadsSQL reads them in key order).
func skippedHeads(heads []keyHead, taken []scannedRecord, asked int) []keyHead {
	took := map[uint64]bool{}
	for _, r := range taken {
		took[r.seq] = true
	}
	var out []keyHead
	for _, h := range heads {
		if len(taken) == asked && h.key > taken[len(taken)-1].rec.Key {
			break
		}
		if !took[h.id] {
			out = append(out, h)
		}
	}
	return out
}

// reclaimStale finds the stale heads among skipped (records no longer
// pending whose key state is not marked done yet: published by an
// unordered claim), marks their keys' stale records done, and claims up
// to room of the pending heads behind them. marked is how many records
// it marked. Only the outbox table has key states: in a consumption
// table a head is never stale.
//
// Heads are passed over mostly because other claims hold them, and stale
// heads come only from outcomes of unordered claims on the same table, so
// after a check that found none the channel checks again only after
// sweepEvery; after one that found some, at every claim.
func (s *channel) reclaimStale(ctx context.Context, tx *sql.Tx, budget *byteBudget, skipped []keyHead, room int) (rows []scannedRecord, marked int64, err error) {
	if s.t.consumer != "" || len(skipped) == 0 || !s.staleCheckDue() {
		return nil, 0, nil
	}
	ids := make([]uint64, len(skipped))
	for i, h := range skipped {
		ids[i] = h.id
	}
	keys, err := column[string](ctx, tx, staleHeadsSQL(s.t, ids))
	if err != nil {
		return nil, 0, err
	}
	s.noteStaleCheck(len(keys) > 0)
	if len(keys) == 0 {
		return nil, 0, nil
	}
	keys = keys[:min(len(keys), staleKeysPerPass)]
	if marked, err = s.markKeysDone(ctx, tx, keys); err != nil || room <= 0 || budget.full {
		return nil, marked, err
	}
	heads, err := readHeads(ctx, tx, headsOfSQL(s.t, keys))
	if err != nil || len(heads) == 0 {
		return nil, marked, err
	}
	rows, err = readRowsWithin(ctx, tx, budget, claimHeadsSQL(s.t, heads, room))
	return rows, marked, err
}

// staleCheckDue reports whether a claim looks for stale heads now (see
// reclaimStale).
func (s *channel) staleCheckDue() bool {
	s.cursorMu.Lock()
	defer s.cursorMu.Unlock()
	return s.quietSince.IsZero() || s.clock().Sub(s.quietSince) >= sweepEvery
}

// noteStaleCheck records what a look for stale heads found.
func (s *channel) noteStaleCheck(found bool) {
	s.cursorMu.Lock()
	defer s.cursorMu.Unlock()
	s.quietSince = time.Time{}
	if !found {
		s.quietSince = s.clock()
	}
}

// Marking records' key state done (outbox table only: in a consumption
// table, ordered claims go by status, which is never stale).
const (
	// staleRun is how many of a key's first records that still count for
	// it one pass reads, and marks done those no longer pending.
	staleRun = 256
	// staleKeysPerPass bounds the keys one pass reads, so that a pass
	// reads at most staleKeysPerPass × staleRun rows.
	staleKeysPerPass = 32
	// sweepEvery is how often a channel's ordered claims sweep the front
	// of the unkeyed records that still count (see sweepUnkeyed), and look
	// for stale heads while they find none (see reclaimStale).
	sweepEvery = time.Second
)

// markKeysDone marks done the key state of the records of keys (at most
// staleKeysPerPass of them: the caller bounds them) that are no longer
// pending, among each key's first staleRun records that still count for
// it: a key whose
// records an unordered claim published (a consumer of the table without
// ordering, a writer's head start, a store of schema version 6) gets its
// pending head back in one pass, if there were at most staleRun.
func (s *channel) markKeysDone(ctx context.Context, tx *sql.Tx, keys []string) (marked int64, err error) {
	if s.t.consumer != "" || len(keys) == 0 {
		return 0, nil
	}
	seqs, err := column[uint64](ctx, tx, staleRecordsSQL(s.t, keys, staleRun))
	if err != nil || len(seqs) == 0 {
		return 0, err
	}
	return markDoneSQL(s.t, seqs).exec(ctx, tx)
}

// sweepUnkeyed marks done the key state of the unkeyed records no longer
// pending among the first staleRun unkeyed records that still count, at
// most once per sweepEvery per channel: the unkeyed claim steps over them
// otherwise, and nothing else would ever mark them (they are nobody's key
// head).
func (s *channel) sweepUnkeyed(ctx context.Context, tx *sql.Tx) (marked bool, err error) {
	if s.t.consumer != "" {
		return false, nil
	}
	now := s.clock()
	s.cursorMu.Lock()
	due := s.lastSweep.IsZero() || now.Sub(s.lastSweep) >= sweepEvery
	if due {
		s.lastSweep = now
	}
	s.cursorMu.Unlock()
	if !due {
		return false, nil
	}
	n, err := s.markKeysDone(ctx, tx, []string{""})
	return n > 0, err
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
// key order, by a loose index scan of idx_head (idx_key in a consumption
// table): one read per key, however many records each holds
// (TestKeyHeadsPlan). A head read from idx_head may be stale (see
// reclaimStale).
func keyHeadsSQL(t *target, after string, limit int) statement {
	return t.render("SELECT event_key, MIN({seq}) FROM {table} WHERE {scope}{keystate} = 'pending' AND event_key > ? GROUP BY {scopecols}{keystate}, event_key ORDER BY {scopecols}{keystate}, event_key LIMIT ?", after, limit)
}

// headsOfSQL reads the heads of keys from idx_head, in key order (outbox
// table only).
func headsOfSQL(t *target, keys []string) statement {
	return t.renderList("SELECT event_key, MIN(id) FROM {table} WHERE key_state = 'pending' AND event_key IN ({list}) GROUP BY key_state, event_key ORDER BY key_state, event_key", len(keys), anyArgs(keys)...)
}

// staleHeadsSQL lists the keys of the records ids names that are no
// longer pending (outbox table only; a plain read, by primary key).
func staleHeadsSQL(t *target, ids []uint64) statement {
	return t.renderList("SELECT event_key FROM {table} WHERE id IN ({list}) AND status <> 'pending'", len(ids), anyArgs(ids)...)
}

// staleRecordsSQL lists the records no longer pending among the first
// limit records of each key that still count for it (key_state
// 'pending'). A plain read: markDoneSQL checks again.
func staleRecordsSQL(t *target, keys []string, limit int) statement {
	parts := make([]string, len(keys))
	args := make([]any, 0, 2*len(keys))
	for i, k := range keys {
		parts[i] = "(SELECT id, status FROM {table} WHERE key_state = 'pending' AND event_key = ? ORDER BY id LIMIT ?)"
		args = append(args, k, limit)
	}
	return t.render("SELECT id FROM ("+strings.Join(parts, " UNION ALL ")+") r WHERE status <> 'pending'", args...)
}

// markDoneSQL marks done the key state of the records seqs names that are
// no longer pending. (A record is pending only with key_state 'pending':
// a requeue sets both in one statement.)
func markDoneSQL(t *target, seqs []uint64) statement {
	return t.renderList("UPDATE {table} SET key_state = 'done' WHERE id IN ({list}) AND status <> 'pending' AND key_state = 'pending'", len(seqs), anyArgs(seqs)...)
}

// claimHeadsSQL locks the due heads among heads, in key order, skipping
// those other claims hold. Each is checked to be still its key's head once
// locked: a requeue may have made an older record of the key pending since
// the heads were read. (The check reads the key's first pending record in
// index order, LIMIT 1, where a NOT EXISTS of an older one would read the
// whole key. It reads idx_head only, not status: a head was the key's
// first entry of key state 'pending' when read, and no older record can
// become one but by a requeue, which makes it pending.)
func claimHeadsSQL(t *target, heads []keyHead, limit int) statement {
	args := make([]any, 0, len(heads)+1)
	for _, h := range heads {
		args = append(args, h.id)
	}
	return t.renderList("SELECT {cols} FROM {table} h WHERE {scope}{seq} IN ({list}) AND status = 'pending' AND next_attempt_at <= UTC_TIMESTAMP(6) AND "+unclaimed+" AND h.{seq} = (SELECT x.{seq} FROM {table} x WHERE {scope}x.{keystate} = 'pending' AND x.event_key = h.event_key ORDER BY x.{seq} LIMIT 1) ORDER BY event_key LIMIT ? FOR UPDATE SKIP LOCKED", len(heads), append(args, limit)...)
}

// claimUnkeyedSQL locks up to limit due pending records without a key
// after sequence number after, skipping those other claims hold.
func claimUnkeyedSQL(t *target, after uint64, limit int) statement {
	return t.render("SELECT {cols} FROM {table} WHERE {scope}{keystate} = 'pending' AND status = 'pending' AND event_key = '' AND {seq} > ? AND next_attempt_at <= UTC_TIMESTAMP(6) AND "+unclaimed+" ORDER BY {seq} LIMIT ? FOR UPDATE SKIP LOCKED", after, limit)
}

// oldestPendingSQL lists the sequence numbers of a key's limit oldest
// pending records.
func oldestPendingSQL(t *target, key string, limit int) statement {
	return t.render("SELECT {seq} FROM {table} WHERE {scope}{keystate} = 'pending' AND status = 'pending' AND event_key = ? ORDER BY {seq} LIMIT ?", key, limit)
}
