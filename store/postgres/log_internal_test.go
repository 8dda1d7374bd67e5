package postgres

// The log claims of log.go, driven directly.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

type logHarness struct {
	db    *sql.DB
	dsn   string
	s     *Store
	table string
}

// newLogHarness makes a table with Migrate.
func newLogHarness(t *testing.T) *logHarness {
	t.Helper()
	d := pgtest.NewDatabase(t)
	s, err := New(d.DB, Options{Table: "log_outbox"})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Migrate(ctx))
	return &logHarness{db: d.DB, dsn: d.DSN, s: s, table: "log_outbox"}
}

func (h *logHarness) target(consumer int64) *target { return newTarget(h.table, consumer) }

// enqueue writes msgs through q (a transaction of the test's, or the
// database), each message ID given, keyed key.
func (h *logHarness) enqueue(t *testing.T, q backend.Execer, key string, ids ...string) {
	t.Helper()
	var msgs []backend.Message
	for _, id := range ids {
		msgs = append(msgs, backend.Message{ID: id, Key: key, Type: "T", Payload: []byte("p")})
	}
	cols, err := h.s.encode(msgs)
	require.NoError(t, err)
	_, err = q.ExecContext(context.Background(), h.target(0).render(insertLogSQL), cols.ids, cols.keys, cols.types, cols.payloads,
		cols.headers, cols.occurred, int64(0), int64(0), "")
	require.NoError(t, err)
}

func (h *logHarness) claim(t *testing.T, consumer int64, p backend.ClaimParams) backend.Batch {
	t.Helper()
	if p.Owner == "" {
		p.Owner = "w"
	}
	if p.LeaseFor == 0 {
		p.LeaseFor = time.Minute
	}
	token, err := newToken()
	require.NoError(t, err)
	var rows []scanned
	var more bool
	require.NoError(t, inTx(context.Background(), h.db, func(tx *sql.Tx) error {
		var err error
		rows, more, err = logClaim(context.Background(), tx, h.target(consumer), token, p, DefaultMaxClaimBytes)
		return err
	}))
	b := toBatch(token, rows)
	b.More = more
	return b
}

// claimWait claims until the claim takes something: the walk waits
// for transactions that may still be running (other tests' too, when it
// cannot tell their database).
func (h *logHarness) claimWait(t *testing.T, consumer int64, p backend.ClaimParams) backend.Batch {
	t.Helper()
	var b backend.Batch
	require.Eventually(t, func() bool {
		b = h.claim(t, consumer, p)
		return b.Len() > 0
	}, 10*time.Second, 2*time.Millisecond)
	return b
}

func (h *logHarness) settle(t *testing.T, consumer int64, b backend.Batch, kind backend.OutcomeKind) backend.SettleResult {
	t.Helper()
	var outcomes []backend.Outcome
	for _, r := range b.Records {
		outcomes = append(outcomes, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: kind, Error: "e"})
	}
	tok, ok := parseToken(b.Token)
	require.True(t, ok)
	var res backend.SettleResult
	require.NoError(t, inTx(context.Background(), h.db, func(tx *sql.Tx) error {
		var err error
		res, err = logSettle(context.Background(), tx, h.target(consumer), tok, outcomes)
		return err
	}))
	return res
}

// delivered writes n messages and moves the default consumer's position
// past them: a log of n delivered messages.
func (h *logHarness) delivered(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	_, err := h.db.ExecContext(ctx, `INSERT INTO log_outbox (event_id, event_key, event_type, payload, occurred_at, created_at)
SELECT 'delivered-' || g, '', 'T', 'p', now(), now() FROM generate_series(1, $1::int) g`, n)
	require.NoError(t, err)
	_, err = h.db.ExecContext(ctx, `UPDATE log_outbox_consumers SET walked_xid = (SELECT max(xid) FROM log_outbox),
	walked_seq = (SELECT max(seq) FROM log_outbox) WHERE id = 0`)
	require.NoError(t, err)
}

func (h *logHarness) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	require.NoError(t, h.db.QueryRow("SELECT count(*) FROM "+quote(h.table+table)).Scan(&n))
	return n
}

func ids(b backend.Batch) []string {
	var out []string
	for _, r := range b.Records {
		out = append(out, r.ID)
	}
	return out
}

// A drain reads the log in batches and writes no row per message: one
// range per batch while it is out, none after.
func TestLogDrainWritesNoRowPerMessage(t *testing.T) {
	t.Parallel()
	h := newLogHarness(t)
	for i := range 10 {
		h.enqueue(t, h.db, "", fmt.Sprintf("m%d", i))
	}
	var got []string
	for range 3 {
		b := h.claimWait(t, 0, backend.ClaimParams{Limit: 4})
		require.Equal(t, 1, h.count(t, "_ranges"))
		require.Equal(t, 4, h.settle(t, 0, b, backend.OutcomePublished).Applied+4-len(b.Records))
		got = append(got, ids(b)...)
	}
	require.Equal(t, []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"}, got)
	require.Empty(t, h.claim(t, 0, backend.ClaimParams{Limit: 4}).Records)
	require.Zero(t, h.count(t, "_ranges"))
	require.Zero(t, h.count(t, "_state"))
}

// A message of a transaction that commits after a later one's is not
// skipped: the walk stops below the oldest transaction still running.
func TestLogWalkDoesNotSkipALateCommit(t *testing.T) {
	t.Parallel()
	h := newLogHarness(t)
	ctx := context.Background()
	early, err := h.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer early.Rollback()
	_, err = early.ExecContext(ctx, "SELECT pg_current_xact_id()")
	require.NoError(t, err)
	h.enqueue(t, h.db, "", "late-xid")
	require.Empty(t, h.claim(t, 0, backend.ClaimParams{Limit: 10}).Records, "a message above the horizon was handed out")
	h.enqueue(t, early, "", "early-xid")
	require.NoError(t, early.Commit())
	b := h.claimWait(t, 0, backend.ClaimParams{Limit: 10})
	require.Equal(t, []string{"late-xid", "early-xid"}, ids(b), "the batch is in seq order")
}

// A failed message gets a state row and comes back with its attempt
// counted; a stale token applies nothing.
func TestLogRetryAndFencing(t *testing.T) {
	t.Parallel()
	h := newLogHarness(t)
	h.enqueue(t, h.db, "", "a", "b")
	b := h.claimWait(t, 0, backend.ClaimParams{Limit: 10})
	require.Len(t, b.Records, 2)
	stale := b
	stale.Token = "12345"
	require.Equal(t, backend.SettleResult{Stale: 2}, h.settle(t, 0, stale, backend.OutcomePublished))
	res := h.settle(t, 0, b, backend.OutcomeRetry)
	require.Equal(t, 2, res.Applied)
	require.Equal(t, 2, h.count(t, "_state"))
	again := h.claimWait(t, 0, backend.ClaimParams{Limit: 10})
	require.Equal(t, []string{"a", "b"}, ids(again))
	require.Equal(t, 1, again.Records[0].Attempts)
	require.Equal(t, 2, h.settle(t, 0, again, backend.OutcomePublished).Applied)
	require.Empty(t, h.claim(t, 0, backend.ClaimParams{Limit: 10}).Records)
}

// A range whose lease ran out is claimed again, whole, by the next
// claimer; the first claimer's settle is then stale.
func TestLogExpiredRangeIsTakenOver(t *testing.T) {
	t.Parallel()
	h := newLogHarness(t)
	h.enqueue(t, h.db, "", "a", "b", "c")
	first := h.claimWait(t, 0, backend.ClaimParams{Limit: 10, LeaseFor: time.Millisecond})
	require.Len(t, first.Records, 3)
	var again backend.Batch
	require.Eventually(t, func() bool {
		again = h.claim(t, 0, backend.ClaimParams{Limit: 2})
		return len(again.Records) > 0
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"a", "b"}, ids(again), "the range is split at the claim's limit")
	require.Equal(t, 3, h.settle(t, 0, first, backend.OutcomePublished).Stale)
	require.Equal(t, 2, h.settle(t, 0, again, backend.OutcomePublished).Applied)
	rest := h.claimWait(t, 0, backend.ClaimParams{Limit: 2})
	require.Equal(t, []string{"c"}, ids(rest))
}

// Two consumers read the one log, each at its own position, with no row
// per message.
func TestLogTwoConsumersShareTheLog(t *testing.T) {
	t.Parallel()
	h := newLogHarness(t)
	_, err := h.db.Exec(`INSERT INTO ` + quote(h.table+"_consumers") + ` (name, start_seq, walked_xid, walked_seq) VALUES ('activity', 0, '0', 0)`)
	require.NoError(t, err)
	var named int64
	require.NoError(t, h.db.QueryRow(`SELECT id FROM `+quote(h.table+"_consumers")+` WHERE name = 'activity'`).Scan(&named))
	h.enqueue(t, h.db, "k", "a", "b")
	for _, c := range []int64{0, named} {
		// The walk waits for transactions that may still be running
		// (other tests' too, when it cannot tell their database): poll.
		var b backend.Batch
		require.Eventually(t, func() bool {
			b = h.claim(t, c, backend.ClaimParams{Limit: 10, Ordered: true})
			return len(b.Records) > 0
		}, 10*time.Second, 5*time.Millisecond)
		require.Equal(t, []string{"a", "b"}, ids(b), "consumer %d", c)
		require.Equal(t, 2, h.settle(t, c, b, backend.OutcomePublished).Applied)
	}
	require.Zero(t, h.count(t, "_state"))
	require.Zero(t, h.count(t, "_ranges"))
}

// Issue 37's defect 1 on the log: a writer that took its transaction ID
// first writes a key's second message after another writer's first. The
// walk meets the second first (xid order) and holds it back until the
// first is delivered, also when a batch ends between them.
func TestLogOrderedKeepsKeyOrderAcrossXIDOrder(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{1, 2, 10} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			t.Parallel()
			h := newLogHarness(t)
			ctx := context.Background()
			a, err := h.db.BeginTx(ctx, nil)
			require.NoError(t, err)
			defer a.Rollback()
			h.enqueue(t, a, "", "a-other")
			h.enqueue(t, h.db, "room-1", "room-1-first")
			h.enqueue(t, a, "room-1", "room-1-second")
			require.NoError(t, a.Commit())
			var got []string
			deadline := time.Now().Add(30 * time.Second)
			for len(got) < 3 {
				require.False(t, time.Now().After(deadline), "delivered %v", got)
				b := h.claim(t, 0, backend.ClaimParams{Limit: limit, Ordered: true})
				got = append(got, ids(b)...)
				if len(b.Records) > 0 {
					h.settle(t, 0, b, backend.OutcomePublished)
				}
			}
			var room []string
			for _, id := range got {
				if id != "a-other" {
					room = append(room, id)
				}
			}
			require.Equal(t, []string{"room-1-first", "room-1-second"}, room)
		})
	}
}

// Ordered, a failed message holds back the later messages of its key,
// and only those.
func TestLogOrderedFailureHoldsBackItsKeyOnly(t *testing.T) {
	t.Parallel()
	h := newLogHarness(t)
	h.enqueue(t, h.db, "k", "k1")
	h.enqueue(t, h.db, "j", "j1")
	b := h.claimWait(t, 0, backend.ClaimParams{Limit: 1, Ordered: true})
	require.Equal(t, []string{"k1"}, ids(b))
	h.enqueue(t, h.db, "k", "k2")
	h.settle(t, 0, b, backend.OutcomeRetry) // due at once (RetryIn 0)
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < 3 {
		require.False(t, time.Now().After(deadline), "delivered %v", got)
		b := h.claim(t, 0, backend.ClaimParams{Limit: 10, Ordered: true})
		got = append(got, ids(b)...)
		if len(b.Records) > 0 {
			h.settle(t, 0, b, backend.OutcomePublished)
		}
	}
	require.Less(t, indexOf(got, "k1"), indexOf(got, "k2"), "delivered %v", got)
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// Writers commit out of transaction-ID order, roll back, and take their
// transaction IDs early (writers of one key take turns, as
// docs/ordering.md asks); claimers fail some messages, and die holding
// others (their range runs out and is taken over). Every committed
// message is delivered, and, ordered, each key's messages are first
// published in seq order.
func TestLogNoSkipUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			t.Parallel()
			h := newLogHarness(t)
			ctx := context.Background()
			var (
				mu        sync.Mutex
				committed = map[string]bool{}
				seqOf     = map[string]int64{}
				keyOf     = map[string]string{}
				first     = map[string]int{} // first publish, as a tick
				tick      int
			)
			const writers, perWriter = 4, 40
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rnd := rand.New(rand.NewPCG(uint64(w), 1))
					for i := range perWriter {
						tx, err := h.db.BeginTx(ctx, nil)
						if !assert.NoError(t, err) {
							return
						}
						if rnd.IntN(2) == 0 {
							_, err = tx.ExecContext(ctx, "SELECT pg_current_xact_id()")
							assert.NoError(t, err)
						}
						time.Sleep(time.Duration(rnd.IntN(3)) * time.Millisecond) // writers interleave
						var idsOf, keysOf []string
						for range 1 + rnd.IntN(3) {
							keysOf = append(keysOf, fmt.Sprintf("k%d", rnd.IntN(5)))
						}
						// Writers of a key take turns, as
						// docs/ordering.md asks (a row lock on the key's
						// entity; here an advisory lock), in one order.
						locks := slices.Clone(keysOf)
						slices.Sort(locks)
						for _, key := range locks {
							_, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", key)
							assert.NoError(t, err)
						}
						for j, key := range keysOf {
							id := fmt.Sprintf("w%d-%d-%d", w, i, j)
							h.enqueue(t, tx, key, id)
							idsOf = append(idsOf, id)
							mu.Lock()
							keyOf[id] = key
							mu.Unlock()
						}
						if rnd.IntN(10) == 0 {
							assert.NoError(t, tx.Rollback())
							continue
						}
						if assert.NoError(t, tx.Commit()) {
							mu.Lock()
							for _, id := range idsOf {
								committed[id] = true
							}
							mu.Unlock()
						}
					}
				}()
			}
			done := make(chan struct{})
			var cw sync.WaitGroup
			for c := range 3 {
				cw.Add(1)
				go func() {
					defer cw.Done()
					rnd := rand.New(rand.NewPCG(uint64(c), 2))
					for {
						select {
						case <-done:
							return
						default:
						}
						b := h.claim(t, 0, backend.ClaimParams{Limit: 7, LeaseFor: 300 * time.Millisecond, Ordered: ordered})
						if len(b.Records) == 0 {
							time.Sleep(time.Millisecond)
							continue
						}
						if rnd.IntN(30) == 0 {
							continue // dies holding the batch
						}
						var outcomes []backend.Outcome
						held := map[string]bool{}
						for _, r := range b.Records {
							if ordered && held[r.Key] {
								outcomes = append(outcomes, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomeRelease})
								continue
							}
							if rnd.IntN(15) == 0 {
								held[r.Key] = true
								outcomes = append(outcomes, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomeRetry, Error: "x"})
								continue
							}
							mu.Lock()
							tick++
							if _, ok := first[r.ID]; !ok {
								first[r.ID] = tick
							}
							seqOf[r.ID] = r.Seq
							mu.Unlock()
							outcomes = append(outcomes, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomePublished})
						}
						tok, _ := parseToken(b.Token)
						assert.NoError(t, inTx(ctx, h.db, func(tx *sql.Tx) error {
							_, err := logSettle(ctx, tx, h.target(0), tok, outcomes)
							return err
						}))
					}
				}()
			}
			wg.Wait()
			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				for id := range committed {
					if _, ok := first[id]; !ok {
						return false
					}
				}
				return true
			}, time.Minute, 10*time.Millisecond, "not every committed message was delivered")
			close(done)
			cw.Wait()
			mu.Lock()
			defer mu.Unlock()
			for id := range first {
				require.True(t, committed[id], "%s was delivered but not committed", id)
			}
			if !ordered {
				return
			}
			byKey := map[string][]string{}
			for id := range first {
				byKey[keyOf[id]] = append(byKey[keyOf[id]], id)
			}
			for k, ids := range byKey {
				slices.SortFunc(ids, func(a, b string) int { return int(seqOf[a] - seqOf[b]) })
				for i := 1; i < len(ids); i++ {
					require.Less(t, first[ids[i-1]], first[ids[i]], "key %s: %s (seq %d) was first published after %s (seq %d)",
						k, ids[i-1], seqOf[ids[i-1]], ids[i], seqOf[ids[i]])
				}
			}
		})
	}
}

// The WAL a drain of the log writes, per message, beside what enqueuing
// wrote: a figure for the log (no assertion on it), and the check that
// a drain leaves no row behind.
func TestLogDrainWAL(t *testing.T) {
	h := newLogHarness(t)
	const n, batch = 3000, 100
	for i := 0; i < n; i += 100 {
		tx, err := h.db.Begin()
		require.NoError(t, err)
		var idsOf []string
		for j := i; j < i+100; j++ {
			idsOf = append(idsOf, fmt.Sprintf("m%d", j))
		}
		h.enqueue(t, tx, "", idsOf...)
		require.NoError(t, tx.Commit())
	}
	lsn := func() int64 {
		var v int64
		require.NoError(t, h.db.QueryRow("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").Scan(&v))
		return v
	}
	before := lsn()
	got := 0
	for got < n {
		b := h.claimWait(t, 0, backend.ClaimParams{Limit: batch})
		require.NotEmpty(t, b.Records)
		got += len(b.Records)
		h.settle(t, 0, b, backend.OutcomePublished)
	}
	t.Logf("drain of %d messages in batches of %d: %.1f B of WAL per message", n, batch, float64(lsn()-before)/n)
	require.Zero(t, h.count(t, "_state"))
	require.Zero(t, h.count(t, "_ranges"))
}

// A claim that found nothing looks at what waits unread in a second
// statement. When the transaction that held the walk back ends between
// the two, the claim looks again and takes the message; it does not
// return empty-handed with nothing said, which left a worker that polls
// rarely asleep with a message due (NotifyWakesTheWorker hung for 300 s
// of a 1 h poll before the fix).
func TestClaimLooksAgainWhenTheHorizonMovesBetweenItsStatements(t *testing.T) {
	h := newLogHarness(t)
	ctx := context.Background()
	early, err := h.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer early.Rollback()
	_, err = early.ExecContext(ctx, "SELECT pg_current_xact_id()")
	require.NoError(t, err)
	h.enqueue(t, h.db, "", "behind-the-horizon")
	var once sync.Once
	h.s.afterEmptyClaim = func() { once.Do(func() { require.NoError(t, early.Rollback()) }) }
	b, err := h.s.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	if b.Len() == 0 {
		// Held back past horizonWait by something else (a loaded
		// machine): then it must say when to look again.
		require.Positive(t, b.RetryAfter, "an empty claim with a message waiting said nothing")
		return
	}
	require.Equal(t, []string{"behind-the-horizon"}, ids(b))
}

// Retention with PurgeDead never deletes a dead letter whose requeue is
// in progress. The purge used to lock the message only: it waited for
// the requeue's lock on the state row, then deleted the row (pending by
// then) and the message with it, and the requeued message was gone.
func TestPurgeLeavesADeadLetterBeingRequeued(t *testing.T) {
	t.Parallel()
	h := newLogHarness(t)
	ctx := context.Background()
	s, err := New(h.db, Options{Table: h.table, PurgeDead: true})
	require.NoError(t, err)
	h.enqueue(t, h.db, "", "poison")
	h.settle(t, 0, h.claimWait(t, 0, backend.ClaimParams{Limit: 1}), backend.OutcomeDead)
	requeue, err := h.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer requeue.Rollback()
	// Requeue's statement, in a transaction the test ends.
	res, err := requeue.ExecContext(ctx, h.target(0).render(`UPDATE {state} s SET status = 'pending', retry_count = 0,
	next_attempt_at = statement_timestamp(), lease_token = 0, finished_at = NULL
FROM {outbox} o WHERE s.consumer_id = 0 AND o.seq = s.seq AND o.event_id = 'poison' AND s.status = 'dead'`))
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	purged := make(chan int, 1)
	go func() {
		n, err := s.PurgePublished(ctx, time.Microsecond, 10)
		assert.NoError(t, err)
		purged <- n
	}()
	// Either the purge passes the message over at once, or it waits for
	// the requeue's lock: end the requeue then.
	got, done := 0, false
	waitingOrDone := func() bool {
		select {
		case got = <-purged:
			done = true
			return true
		default:
		}
		var waiting bool
		err := h.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
	WHERE NOT l.granted AND a.datname = current_database())`).Scan(&waiting)
		return err == nil && waiting
	}
	require.Eventually(t, waitingOrDone, time.Minute, 2*time.Millisecond)
	require.NoError(t, requeue.Commit())
	if !done {
		select {
		case got = <-purged:
		case <-time.After(time.Minute):
			t.Fatal("the purge did not return within a minute of the requeue's commit")
		}
	}
	require.Zero(t, got, "the purge deleted the message being requeued")
	require.Equal(t, []string{"poison"}, ids(h.claimWait(t, 0, backend.ClaimParams{Limit: 1})), "the requeued message is delivered")
}

// Stats reads the backlog, not the log behind it: with 20,000 delivered
// messages and 3 pending, the plan reads a handful of the outbox's rows
// (it read every one, 330 ms for 300,000, when the position was a join:
// the planner took the primary key in seq order and filtered out the
// delivered messages one by one).
func TestStatsReadsTheBacklogOnly(t *testing.T) {
	t.Parallel()
	h := newLogHarness(t)
	ctx := context.Background()
	h.delivered(t, 20000)
	h.enqueue(t, h.db, "", "p1", "p2", "p3")
	_, err := h.db.ExecContext(ctx, "ANALYZE log_outbox")
	require.NoError(t, err)
	st, err := h.s.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, st.Pending)

	read, plan := outboxRowsRead(t, h.db, h.target(0).render(statsSQL))
	require.Less(t, read, 100.0, "Stats read %v of the outbox's rows for 3 pending:\n%s", read, plan)
}

// outboxRowsRead runs query under EXPLAIN ANALYZE and counts the rows
// its plan read from log_outbox: those it returned, and those a filter,
// a join filter or an index recheck removed.
func outboxRowsRead(t *testing.T, db *sql.DB, query string, args ...any) (float64, []byte) {
	t.Helper()
	var plan []byte
	require.NoError(t, db.QueryRow("EXPLAIN (ANALYZE, FORMAT JSON) "+query, args...).Scan(&plan))
	return planRowsRead(t, plan), plan
}

// planRowsRead counts the rows an EXPLAIN (ANALYZE, FORMAT JSON) plan
// read from log_outbox.
func planRowsRead(t *testing.T, plan []byte) float64 {
	t.Helper()
	var nodes []struct{ Plan map[string]any }
	require.NoError(t, json.Unmarshal(plan, &nodes))
	read := 0.0
	var visit func(n map[string]any)
	visit = func(n map[string]any) {
		num := func(k string) float64 { f, _ := n[k].(float64); return f }
		if n["Relation Name"] == "log_outbox" {
			read += num("Actual Loops")*num("Actual Rows") + num("Rows Removed by Filter") + num("Rows Removed by Index Recheck")
		}
		// A join filter removes rows of either side: counted when the
		// log is one of them.
		if num("Rows Removed by Join Filter") > 0 && strings.Contains(fmt.Sprint(n["Plans"]), "log_outbox") {
			read += num("Rows Removed by Join Filter")
		}
		children, _ := n["Plans"].([]any)
		for _, c := range children {
			visit(c.(map[string]any))
		}
	}
	visit(nodes[0].Plan)
	return read
}

// An empty claim's look at what waits unread reads the log past the
// position, not the log behind it: with 20,000 delivered messages, a
// handful of rows. It read them all (the soak's empty claims spent 44 ms
// each at 63,000 messages: the planner joined the position to a
// sequential scan of the log).
func TestUnreadCheckReadsPastThePositionOnly(t *testing.T) {
	t.Parallel()
	h := newLogHarness(t)
	ctx := context.Background()
	h.delivered(t, 20000)
	_, err := h.db.ExecContext(ctx, "ANALYZE log_outbox")
	require.NoError(t, err)
	for _, unread := range []bool{false, true} {
		if unread {
			h.enqueue(t, h.db, "", "p1")
		}
		var b bool
		require.NoError(t, h.db.QueryRowContext(ctx, h.target(0).render(unreadSQL)).Scan(&b))
		require.Equal(t, unread, b)
		read, plan := outboxRowsRead(t, h.db, h.target(0).render(unreadSQL))
		require.Less(t, read, 100.0, "the unread check read %v of the outbox's rows:\n%s", read, plan)
	}
}

// The fast claim and its read are planned once per connection, not on
// every claim: the server's generic plan serves them from the sixth
// execution on (pg_prepared_statements counts them). With LIMIT a parameter the
// server judged a generic plan costlier and planned it anew each time
// (8 custom plans of 8 executions), about 1 ms of CPU per claim, a third
// of the statement's cost.
func TestFastClaimIsPlannedOnce(t *testing.T) {
	t.Parallel()
	h := newLogHarness(t)
	ctx := context.Background()
	conn, err := h.db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	for _, settle := range []bool{false, true} {
		name := fmt.Sprintf("fast_claim_%v", settle)
		types := "bigint, text, bigint, bigint"
		if settle {
			types += ", bigint, integer"
		}
		_, err = conn.ExecContext(ctx, "PREPARE "+name+" ("+types+") AS "+h.target(0).render(fastStatement(100, settle)))
		require.NoError(t, err)
		for i := range 10 {
			args := "1, 'w', 60000000, 16777216"
			if settle {
				args += fmt.Sprintf(", %d, 100", i+1)
			}
			_, err = conn.ExecContext(ctx, "EXECUTE "+name+" ("+args+")")
			require.NoError(t, err)
		}
		var generic, custom int
		require.NoError(t, conn.QueryRowContext(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1`, name).Scan(&generic, &custom))
		require.Positive(t, generic, "settle %v: %d custom plans of 10 executions, no generic one", settle, custom)
	}
	// The read of the range the claim took, likewise, and its generic
	// plan, on a log of some size, reads the range from the (xid, seq)
	// index: it was a bitmap scan and a sort, or a scan of the primary
	// key from the consumer's start.
	for i := range 50 {
		ids := make([]string, 100)
		for j := range ids {
			ids[j] = fmt.Sprintf("m%d-%d", i, j)
		}
		h.enqueue(t, h.db, "", ids...)
	}
	_, err = conn.ExecContext(ctx, "ANALYZE "+h.table)
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, "PREPARE fast_read (bigint) AS "+h.target(0).render(fastReadStatement(100)))
	require.NoError(t, err)
	for i := range 10 {
		_, err = conn.ExecContext(ctx, fmt.Sprintf("EXECUTE fast_read (%d)", i+1))
		require.NoError(t, err)
	}
	var generic, custom int
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'fast_read'`).Scan(&generic, &custom))
	require.Positive(t, generic, "the read: %d custom plans of 10 executions, no generic one", custom)
	_, err = conn.ExecContext(ctx, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	defer func() { _, _ = conn.ExecContext(ctx, "RESET plan_cache_mode") }()
	plan := explainText(t, conn, "EXPLAIN EXECUTE fast_read (1)")
	require.NotContains(t, plan, "Sort", "the read's generic plan sorts:\n%s", plan)
	require.Contains(t, plan, "Index Scan using "+h.table+"_xid on", "the read's generic plan:\n%s", plan)
}

// A fast claim that fails inside its transaction (here the consumer's
// row, held elsewhere, outlasts lock_timeout) ends the transaction: the
// pool keeps the connection (pgx's driver would drop one left in a
// transaction), and the next claim on it takes the range.
func TestAFailedFastClaimEndsItsTransaction(t *testing.T) {
	t.Parallel()
	h := newLogHarness(t)
	ctx := context.Background()
	h.enqueue(t, h.db, "", "a", "b")
	// The store's pool is one connection, with a lock_timeout.
	h.db.SetMaxOpenConns(1)
	_, err := h.db.ExecContext(ctx, "SET lock_timeout = '100ms'")
	require.NoError(t, err)
	var pid int
	require.NoError(t, h.db.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	holder, err := sql.Open("pgx", h.dsn)
	require.NoError(t, err)
	defer holder.Close()
	tx, err := holder.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, h.target(0).render(`SELECT 1 FROM {consumers} WHERE id = {c} FOR UPDATE`))
	require.NoError(t, err)

	p := backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute}
	_, err = h.s.Claim(ctx, p)
	require.ErrorContains(t, err, "lock timeout")
	require.NoError(t, tx.Rollback())
	var state string
	require.NoError(t, holder.QueryRowContext(ctx, "SELECT state FROM pg_stat_activity WHERE pid = $1", pid).Scan(&state))
	require.Equal(t, "idle", state, "the failed claim's connection")

	var again int
	require.NoError(t, h.db.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&again))
	require.Equal(t, pid, again, "the pool dropped the connection of the failed claim")
	b, err := h.s.Claim(ctx, p)
	require.NoError(t, err)
	require.Len(t, b.Records, 2)
}

// explainText runs an EXPLAIN on conn and returns its lines.
func explainText(t *testing.T, conn *sql.Conn, explain string) string {
	t.Helper()
	rows, err := conn.QueryContext(context.Background(), explain)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		out = append(out, line)
	}
	require.NoError(t, rows.Err())
	return strings.Join(out, "\n")
}

// Per-key order holds past a message its writer holds (the head start
// of an after-commit publish) for the default consumer: a later message
// of its key waits, whether the walk passes both in one claim or the
// held one in an earlier claim, and so does the later one's own writer's
// publish (a claim by ID). The soak (cmd/outboxsoak, no faults) found 9
// order violations in 677 events: the walk passed the held message
// without a row, and nothing told the order gate of it.
func TestOrderHoldsPastAMessageItsWriterHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ordered := backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute, Ordered: true}
	for _, earlier := range []bool{false, true} {
		h := newLogHarness(t)
		require.NoError(t, h.s.Enqueue(ctx, h.db, &backend.EnqueueOptions{HeadStart: time.Hour},
			backend.Message{ID: "first", Key: "K", Type: "T", Payload: []byte("p")}))
		if earlier {
			// The walk passes "first" (held) before "second" is written.
			_, err := h.s.Claim(ctx, ordered)
			require.NoError(t, err)
			var held string
			require.NoError(t, h.db.QueryRow(`SELECT held::text FROM log_outbox_consumers WHERE id = 0`).Scan(&held))
			require.NotEqual(t, "{}", held, "the walk passed the held message")
		}
		h.enqueue(t, h.db, "K", "second")
		// No claim hands out "second" while "first" is held.
		require.Eventually(t, func() bool {
			b, err := h.s.Claim(ctx, ordered)
			require.NoError(t, err)
			require.Zero(t, b.Len(), "earlier %v: %v handed out while its key's first message is held by its writer", earlier, ids(b))
			var walked bool
			require.NoError(t, h.db.QueryRow(`SELECT walked_seq >= (SELECT seq FROM log_outbox WHERE event_id = 'second') FROM log_outbox_consumers WHERE id = 0`).Scan(&walked))
			return walked
		}, 10*time.Second, 5*time.Millisecond)
		b, err := h.s.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute, Ordered: true, IDs: []string{"second"}})
		require.NoError(t, err)
		require.Zero(t, b.Len(), "earlier %v: the publish by ID took %v", earlier, ids(b))
		// The writer gives up its hold: first, then second.
		_, err = h.s.EndHeadStart(ctx, []string{"first"})
		require.NoError(t, err)
		var got []string
		require.Eventually(t, func() bool {
			b, err := h.s.Claim(ctx, ordered)
			require.NoError(t, err)
			got = append(got, ids(b)...)
			_, err = h.s.Settle(ctx, b.Token, publishedOutcomes(b))
			require.NoError(t, err)
			return len(got) >= 2
		}, 10*time.Second, 5*time.Millisecond)
		require.Equal(t, []string{"first", "second"}, got, "earlier %v", earlier)
	}
}

func publishedOutcomes(b backend.Batch) []backend.Outcome {
	var os []backend.Outcome
	for _, r := range b.Records {
		os = append(os, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomePublished})
	}
	return os
}

// A writer's ordered publish (a claim by ID, as PublishNow with Ordering
// makes) does not wait for an older message of its key that its own
// writer has delivered already and the walk has not passed yet. It did:
// the order gate counted every message still to be walked, so with a
// few keys written often nearly every after-commit publish was left to
// the workers (the soak's default consumer lagged 513 ms at the median
// against 46 ms for a named one; 12 ms on MySQL).
func TestWritersOrderedPublishPassesADeliveredPredecessor(t *testing.T) {
	t.Parallel()
	h := newLogHarness(t)
	ctx := context.Background()
	byID := func(id string) backend.Batch {
		b, err := h.s.Claim(ctx, backend.ClaimParams{Owner: "writer", Limit: 1, LeaseFor: time.Minute, Ordered: true, IDs: []string{id}})
		require.NoError(t, err)
		return b
	}
	for _, id := range []string{"m0", "m1"} {
		require.NoError(t, h.s.Enqueue(ctx, h.db, &backend.EnqueueOptions{HeadStart: time.Hour},
			backend.Message{ID: id, Key: "K", Type: "T", Payload: []byte("p")}))
		b := byID(id)
		require.Equal(t, []string{id}, ids(b), "the writer's publish of %s", id)
		_, err := h.s.Settle(ctx, b.Token, publishedOutcomes(b))
		require.NoError(t, err)
	}
}

// The writer's ordered publish (a claim by ID) takes its message even
// when a worker's walk has passed it meanwhile (into the held list): in
// the soak, workers woken by the commit walked past nearly every
// message before its writer's publish ran, and 580 of 650 after-commit
// publishes were left to the workers.
func TestWritersOrderedPublishTakesAMessageTheWalkPassed(t *testing.T) {
	t.Parallel()
	h := newLogHarness(t)
	ctx := context.Background()
	require.NoError(t, h.s.Enqueue(ctx, h.db, &backend.EnqueueOptions{HeadStart: time.Hour},
		backend.Message{ID: "mine", Key: "K", Type: "T", Payload: []byte("p")}))
	ordered := backend.ClaimParams{Owner: "worker", Limit: 10, LeaseFor: time.Minute, Ordered: true}
	require.Eventually(t, func() bool {
		b, err := h.s.Claim(ctx, ordered)
		require.NoError(t, err)
		require.Zero(t, b.Len(), "the worker took a message its writer holds")
		var held string
		require.NoError(t, h.db.QueryRow(`SELECT held::text FROM log_outbox_consumers WHERE id = 0`).Scan(&held))
		return held != "{}"
	}, 10*time.Second, 5*time.Millisecond, "the walk passes the held message")
	ordered.Owner, ordered.IDs = "writer", []string{"mine"}
	b, err := h.s.Claim(ctx, ordered)
	require.NoError(t, err)
	require.Equal(t, []string{"mine"}, ids(b), "the writer's publish")
	_, err = h.s.Settle(ctx, b.Token, publishedOutcomes(b))
	require.NoError(t, err)
	ordered.Owner, ordered.IDs = "worker", nil
	b, err = h.s.Claim(ctx, ordered)
	require.NoError(t, err)
	require.Zero(t, b.Len(), "delivered once")
	r, err := h.s.Get(ctx, "mine")
	require.NoError(t, err)
	require.Equal(t, backend.StatusPublished, r.Status)
}

// Writers' publishes by ID do not take turns: each leases its own
// messages, so one in flight does not hold up another's. They did (the
// registry row was locked FOR UPDATE): at 1,000 commands a second the
// soak's writers queued on that row behind each other's after-commit
// publish, Writer.Do took 146 ms at the median and the run made 97
// events a second.
func TestWritersPublishesByIDDoNotTakeTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, ordered := range []bool{true, false} {
		h := newLogHarness(t)
		for _, id := range []string{"a", "b"} {
			require.NoError(t, h.s.Enqueue(ctx, h.db, &backend.EnqueueOptions{HeadStart: time.Hour},
				backend.Message{ID: id, Key: "key-" + id, Type: "T", Payload: []byte("p")}))
		}
		p := backend.ClaimParams{Owner: "writer", Limit: 1, LeaseFor: time.Minute, Ordered: ordered}
		// Writer a's publish, in flight: its claim has run, its
		// transaction is open.
		txA, err := h.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		tokA, err := newToken()
		require.NoError(t, err)
		pa := p
		pa.IDs = []string{"a"}
		rows, err := claimIDs(ctx, txA, h.target(0), tokA, pa, h.s.headStart)
		require.NoError(t, err)
		require.Len(t, rows, 1)
		// Writer b's publish runs meanwhile.
		bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		pb := p
		pb.IDs = []string{"b"}
		b, err := h.s.Claim(bctx, pb)
		cancel()
		require.NoError(t, err, "ordered %v: b's publish waited for a's", ordered)
		require.Equal(t, []string{"b"}, ids(b), "ordered %v", ordered)
		require.NoError(t, txA.Commit())
		_, err = h.s.Settle(ctx, b.Token, publishedOutcomes(b))
		require.NoError(t, err)
	}
}

// The writer's ordered after-commit publish (PublishNow with Ordering)
// runs under the head start its transaction took, as the unordered one
// does: a read, the sink, one update of the message, and no state row.
// It claimed by ID instead, which wrote a state row for every message
// (and locked the registry row): in the soak the state table held a row
// for nearly every message in the log, 67,800 of them. It still holds a
// key back behind an older message of the key that is still to be
// delivered, and publishes a key's messages of one call in order.
func TestOrderedPublishNowWritesNoStateRow(t *testing.T) {
	t.Parallel()
	h := newLogHarness(t)
	ctx := context.Background()
	rec := outboxtest.NewRecorder()
	w, err := outbox.NewWorker(h.s, rec, outbox.WorkerOptions{Ordering: true, PollInterval: time.Hour,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	msg := func(id, key string) outbox.Message {
		return outbox.Message{ID: id, Key: key, Type: "T", Payload: []byte("p")}
	}
	write := func(headStart time.Duration, msgs ...outbox.Message) {
		t.Helper()
		require.NoError(t, h.s.Enqueue(ctx, h.db, &backend.EnqueueOptions{HeadStart: headStart}, msgs...))
	}
	for i := range 5 {
		m := msg(fmt.Sprintf("k-%d", i), "K")
		write(w.HeadStart(), m)
		require.NoError(t, w.PublishNow(ctx, m))
	}
	both := []outbox.Message{msg("two-1", "T"), msg("two-2", "T")}
	write(w.HeadStart(), both...)
	require.NoError(t, w.PublishNow(ctx, both...))
	var got []string
	for _, m := range rec.Messages() {
		got = append(got, m.ID)
	}
	require.Equal(t, []string{"k-0", "k-1", "k-2", "k-3", "k-4", "two-1", "two-2"}, got)
	require.Zero(t, h.count(t, "_state"), "state rows after ordered publishes under the head start")
	for _, id := range got {
		r, err := h.s.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, backend.StatusPublished, r.Status, id)
	}

	// An older message of the key that no writer publishes (no head
	// start) holds the writer's back: left to the workers, in order.
	write(0, msg("g-0", "G"))
	g1 := msg("g-1", "G")
	write(w.HeadStart(), g1)
	require.ErrorIs(t, w.PublishNow(ctx, g1), outbox.ErrLeftToWorker)
	require.Zero(t, rec.Count("g-1"), "published before its key's older message")
	require.Eventually(t, func() bool {
		_, err := w.ProcessBatch(ctx)
		require.NoError(t, err)
		return rec.Count("g-1") > 0
	}, 10*time.Second, 5*time.Millisecond)
	got = nil
	for _, m := range rec.Messages() {
		if m.Key == "G" {
			got = append(got, m.ID)
		}
	}
	require.Equal(t, []string{"g-0", "g-1"}, got)
}

// An ordered claim of due state rows looks for a message of the key in
// the consumer's live ranges by reading the ranges' messages, not every
// message the key ever had: with a key of 20,000 delivered messages and
// a due state row at its end, a handful of the log's rows, whether a
// range is live or not. It read them all, for each candidate, with no
// range live at all (an upgraded table of a million messages: 2.3 s a
// claim, TestUpgradeOfALargeTable); the planner put the log outside the
// join with the ranges.
func TestKeyGateReadsTheRangesOnly(t *testing.T) {
	t.Parallel()
	h := newLogHarness(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO log_outbox (event_id, event_key, event_type, payload, occurred_at, created_at)
SELECT 'delivered-' || g, 'k', 'T', 'p', now(), now() FROM generate_series(1, 20000) g`,
		`UPDATE log_outbox_consumers SET walked_xid = (SELECT max(xid) FROM log_outbox), walked_seq = (SELECT max(seq) FROM log_outbox) WHERE id = 0`,
		`INSERT INTO log_outbox_state (consumer_id, seq, event_key, next_attempt_at)
SELECT 0, seq, event_key, now() - interval '1 second' FROM log_outbox ORDER BY seq DESC LIMIT 5`,
		"ANALYZE log_outbox, log_outbox_state, log_outbox_ranges",
	} {
		_, err := h.db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	var xid, seq int64
	require.NoError(t, h.db.QueryRowContext(ctx, "SELECT walked_xid::text::bigint, walked_seq FROM log_outbox_consumers WHERE id = 0").Scan(&xid, &seq))
	for _, live := range []bool{false, true} {
		if live { // a range over the last 100 messages, of another claimer
			_, err := h.db.ExecContext(ctx, `INSERT INTO log_outbox_ranges (consumer_id, token, from_xid, from_seq, to_xid, to_seq, n, owner, claimed_at, lease_until)
SELECT 0, 7, xid, seq - 100, xid, seq, 100, 'other', now(), now() + interval '1 minute' FROM log_outbox WHERE seq = $1`, seq)
			require.NoError(t, err)
		}
		tx, err := h.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		var plan []byte
		require.NoError(t, tx.QueryRowContext(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+h.target(0).render(claimStateSQL(true)),
			int64(0), 100, int64(1), int64(60_000_000), xid, seq).Scan(&plan))
		require.NoError(t, tx.Rollback())
		read := planRowsRead(t, plan)
		require.Less(t, read, 500.0, "live range %v: the claim read %v of the log's rows:\n%s", live, read, plan)
	}
}
