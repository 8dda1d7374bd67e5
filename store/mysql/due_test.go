package mysql

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// lateWriter sets up what a resumed claim could skip: a record ("late")
// that a writer inserted first but commits only after a claim has passed
// it, and n records after it ("r1"…) that others committed meanwhile.
// It returns the first claim, of limit records, made while "late" was
// not committed, and commits it.
func lateWriter(t *testing.T, s *Store, n, limit int) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, readCommitted)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	require.NoError(t, s.Enqueue(ctx, tx, nil, outbox.Message{ID: "late", Type: "T"}))
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = outbox.Message{ID: fmt.Sprintf("r%d", i+1), Type: "T"}
	}
	require.NoError(t, s.Enqueue(ctx, s.db, nil, msgs...))
	first := claimIDs(t, s, limit)
	require.NoError(t, tx.Commit())
	return first
}

func claimIDs(t *testing.T, s *Store, limit int) []string {
	t.Helper()
	b, err := s.Claim(context.Background(), backend.ClaimParams{Owner: "w", Limit: limit, LeaseFor: time.Hour})
	require.NoError(t, err)
	var ids []string
	for _, r := range b.Records {
		ids = append(ids, r.ID)
	}
	return ids
}

// TestClaimResumesAfterItsLastBatch: a claim of due records starts where
// the last one stopped, not at the first due record; a record before
// that point ("late", committed after a claim passed it) is claimed as
// soon as a claim finds fewer records after it than it asked for.
func TestClaimResumesAfterItsLastBatch(t *testing.T) {
	_, s := migrated(t, "due_resume")
	require.Equal(t, []string{"r1", "r2", "r3"}, lateWriter(t, s, 6, 3), "late is not committed: skipped")
	require.Equal(t, []string{"r4", "r5", "r6"}, claimIDs(t, s, 3),
		"the claim resumes after r3 (from the beginning, late would come first)")
	require.Equal(t, []string{"late"}, claimIDs(t, s, 3),
		"nothing is left after r6: the claim scans what lies before it")
	require.Empty(t, claimIDs(t, s, 3))
}

// TestClaimStartsOverAfterFullScanEvery: while every resumed claim finds
// a full batch, a record before the cursor is found by the claim that
// starts from the beginning again, fullScanEvery after the scan began.
func TestClaimStartsOverAfterFullScanEvery(t *testing.T) {
	_, s := migrated(t, "due_rescan")
	var (
		mu  sync.Mutex
		now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	)
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	require.Equal(t, []string{"r1", "r2"}, lateWriter(t, s, 8, 2))
	advance(fullScanEvery - time.Millisecond)
	require.Equal(t, []string{"r3", "r4"}, claimIDs(t, s, 2), "the scan is resumed")
	advance(time.Millisecond)
	require.Equal(t, []string{"late", "r5"}, claimIDs(t, s, 2), "the scan began fullScanEvery ago: it starts over")
	require.Equal(t, []string{"r6", "r7"}, claimIDs(t, s, 2), "and is resumed again")
}

// TestResumedClaimPlan: a resumed claim's scan starts at its position in
// idx_due, even among records due at the same instant, and the scan of
// what lies before the position stops there.
func TestResumedClaimPlan(t *testing.T) {
	d, s := migrated(t, "due_plan")
	ctx := context.Background()
	const (
		published = 50_000
		due       = 400 // due at the same instant
		limit     = 100
	)
	fill(t, d.DB, s.table, 0, published, "published", "UTC_TIMESTAMP(6) - INTERVAL 1 DAY")
	fill(t, d.DB, s.table, published, due, "pending", "UTC_TIMESTAMP(6) - INTERVAL 1 SECOND")
	_, err := d.DB.ExecContext(ctx, "ANALYZE TABLE "+s.table)
	require.NoError(t, err)
	var at duePos
	var next string
	require.NoError(t, d.DB.QueryRowContext(ctx, "SELECT id, next_attempt_at FROM "+s.table+" WHERE event_id = ?",
		fmt.Sprintf("plan-%d", published+due-limit/2)).Scan(&at.seq, &next))
	at.next, err = time.ParseInLocation(dbTimeLayout, next, time.UTC)
	require.NoError(t, err)

	inline := func(st statement) string {
		q := st.text
		for _, a := range st.args {
			v := fmt.Sprint(a)
			if _, ok := a.(string); ok {
				v = "'" + v + "'"
			}
			q = strings.Replace(q, "?", v, 1)
		}
		return q
	}
	for _, c := range []struct {
		name string
		st   statement
		rows int
	}{
		{"after", claimDueAfterSQL(s.t, at, limit), limit/2 - 1},
		{"before", claimDueBeforeSQL(s.t, at, limit), limit},
	} {
		query := inline(c.st)
		plan := explain(t, d.DB, query)
		t.Logf("%s plan: %v", c.name, plan)
		require.Equal(t, "idx_due", plan["key"], c.name)
		require.Equal(t, "range", plan["type"], c.name)
		require.NotContains(t, plan["Extra"], "filesort", c.name)
		n, read := countReads(t, d.DB, query, readCommitted)
		require.Equal(t, c.rows, n, c.name)
		t.Logf("%s: %d rows, %d index entries read", c.name, n, read)
		require.LessOrEqual(t, read, int64(2*c.rows+10), "%s: the scan read %d entries for %d rows", c.name, read, c.rows)
	}
}

// TestResumedClaimStartsAtTheIndexPlace: a claim resumes at the place in
// idx_due of the last record it took, next_attempt_at itself. A lease
// moves its record there to the lease's end, so a record whose lease ran
// out is due from then on, after the records that were due before it
// ended; a claim that takes it resumes after it.
func TestResumedClaimStartsAtTheIndexPlace(t *testing.T) {
	_, s := migrated(t, "due_place")
	ctx := context.Background()
	require.NoError(t, s.Enqueue(ctx, s.db, nil, outbox.Message{ID: "a1", Type: "T"}, outbox.Message{ID: "a2", Type: "T"}))
	other, err := New(s.db, Options{Table: s.table}) // another process, whose lease runs out at once
	require.NoError(t, err)
	b, err := other.Claim(ctx, backend.ClaimParams{Owner: "gone", Limit: 1, LeaseFor: time.Microsecond})
	require.NoError(t, err)
	require.Len(t, b.Records, 1)
	require.NoError(t, s.Enqueue(ctx, s.db, nil, outbox.Message{ID: "a3", Type: "T"}))

	require.Equal(t, []string{"a2"}, claimIDs(t, s, 1), "a2 was due before a1's lease ended")
	require.Equal(t, []string{"a1"}, claimIDs(t, s, 1), "a1's lease has run out")
	require.Equal(t, []string{"a3"}, claimIDs(t, s, 1), "a3 was enqueued after a1's lease ended")
}

// TestOrderedClaimsFollowUnorderedOutcomes: a record that a claim
// without ordering published (a worker of another configuration, the
// writer's own publish) no longer counts for its key: the next ordered
// claim takes the key's next record at once. (Schema version 7 kept such
// records in its index of key heads until an ordered claim passed over
// them, and looked for them only once a second.)
func TestOrderedClaimsFollowUnorderedOutcomes(t *testing.T) {
	d, s := migrated(t, "stale_check")
	ctx := context.Background()
	claim := func(p backend.ClaimParams) (backend.Batch, []string) {
		t.Helper()
		b, err := s.Claim(ctx, p)
		require.NoError(t, err)
		var ids []string
		for _, r := range b.Records {
			ids = append(ids, r.ID)
		}
		return b, ids
	}
	publish := func(b backend.Batch, id string) {
		t.Helper()
		res, err := s.Settle(ctx, b.Token, []backend.Outcome{{ID: id, Kind: backend.OutcomePublished}})
		require.NoError(t, err)
		require.Equal(t, 1, res.Applied)
	}
	ordered := backend.ClaimParams{Owner: "t", Limit: 4, LeaseFor: time.Minute, Ordered: true}
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "a1", Key: "A", Type: "T"}, outbox.Message{ID: "a2", Key: "A", Type: "T"},
		outbox.Message{ID: "b1", Key: "B", Type: "T"}, outbox.Message{ID: "b2", Key: "B", Type: "T"}))
	unordered, ids := claim(backend.ClaimParams{Owner: "t", Limit: 1, LeaseFor: time.Minute, IDs: []string{"b1"}})
	require.Equal(t, []string{"b1"}, ids)

	first, ids := claim(ordered)
	require.Equal(t, []string{"a1"}, ids, "B's head is in flight")
	publish(first, "a1")
	publish(unordered, "b1")

	_, ids = claim(ordered)
	require.Equal(t, []string{"a2", "b2"}, ids, "b1 was published: b2 is B's head at once")
}
