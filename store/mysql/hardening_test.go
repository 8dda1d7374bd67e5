package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// Regression tests for defects found by trying the store from outside
// with hostile but legal inputs and interleavings (issue 12). Each failed
// on the code before its fix.

// lockWaitSeen closes its channel once a transaction on database dbName
// waits for a row lock, so that a test can let go of a lock it holds at
// the moment that matters (see testutil.LockWaits).
func lockWaitSeen(t *testing.T, db *sql.DB, dbName string) <-chan struct{} {
	seen := make(chan struct{})
	go func() {
		defer close(seen)
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if n, err := testutil.LockWaits(context.Background(), db, dbName); err == nil && n > 0 {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Error("no transaction waited for a lock within a minute")
	}()
	return seen
}

// TestPurgeWaitsForARequeueOfANamedConsumersDeadLetter: with PurgeDead, a
// purge that meets a named consumer's dead letter while it is being
// requeued must not delete it (or its message).
func TestPurgeWaitsForARequeueOfANamedConsumersDeadLetter(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s, err := mysql.New(d.DB, mysql.Options{Table: testTable, PurgeDead: true})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.AddConsumer(ctx, "activity", mysql.StartNow))
	// "last" keeps "m" from being the log's last message, which
	// retention never deletes.
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "m", Type: "T"}, outbox.Message{ID: "last", Type: "T"}))
	b, err := s.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	_, err = s.Settle(ctx, b.Token, []backend.Outcome{{ID: "m", Kind: backend.OutcomePublished}})
	require.NoError(t, err)
	activity := consumer(t, s, "activity")
	b, err = activity.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	_, err = activity.Settle(ctx, b.Token, []backend.Outcome{{ID: "m", Kind: backend.OutcomeDead, Error: "x"}})
	require.NoError(t, err)
	age(t, d, "m", time.Hour)

	// An operator's requeue is under way: its transaction has made the
	// dead letter pending and not committed yet.
	tx, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "UPDATE "+testTable+"_state s JOIN "+testTable+"_consumers c ON c.id = s.consumer_id SET s.status = 'pending', s.retry_count = 0 WHERE c.name = 'activity'")
	require.NoError(t, err)
	purged := make(chan int, 1)
	go func() {
		n, err := s.PurgePublished(ctx, time.Minute, 10)
		if err != nil {
			t.Error(err)
		}
		purged <- n
	}()
	<-lockWaitSeen(t, d.DB, d.Name)
	require.NoError(t, tx.Commit())
	require.Zero(t, <-purged, "the requeued message is pending for activity again (and last is the log's last)")
	r, err := activity.Get(ctx, "m")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPending, r.Status)
}

// age moves the time message id was written back by ago (retention
// counts a message's age from then).
func age(t *testing.T, d *testutil.Database, id string, ago time.Duration) {
	t.Helper()
	_, err := d.DB.Exec("UPDATE "+testTable+" SET created_at = created_at - INTERVAL ? MICROSECOND WHERE event_id = ?", ago.Microseconds(), id)
	require.NoError(t, err)
}

// TestPurgeDoesNotPassOverALockedRecord: a finished message that someone
// holds a lock on at that moment (a settle in progress) is deleted by
// the purge that meets it, not passed over until the sweep comes round
// again.
func TestPurgeDoesNotPassOverALockedRecord(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	ms := roomMessages("m", 10, 2)
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, ms...))
	b, err := s.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	var outcomes []backend.Outcome
	for _, r := range b.Records {
		outcomes = append(outcomes, backend.Outcome{ID: r.ID, Kind: backend.OutcomePublished})
	}
	_, err = s.Settle(ctx, b.Token, outcomes)
	require.NoError(t, err)

	tx, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	var id string
	require.NoError(t, tx.QueryRowContext(ctx, "SELECT event_id FROM "+testTable+" ORDER BY id LIMIT 1 FOR UPDATE").Scan(&id))
	purged := make(chan int, 1)
	go func() {
		n, err := s.PurgePublished(ctx, time.Microsecond, 5)
		if err != nil {
			t.Error(err)
		}
		purged <- n
	}()
	select {
	case n := <-purged:
		t.Fatalf("the purge returned (%d deleted) without waiting for the locked record %s", n, id)
	case <-lockWaitSeen(t, d.DB, d.Name):
	}
	require.NoError(t, tx.Rollback())
	require.Equal(t, 5, <-purged)
	_, err = s.Get(ctx, id)
	require.ErrorIs(t, err, outbox.ErrNotFound, "the oldest record goes first, locked or not")
}

// requeueChannel is what TestRequeuedRecordWaitsOnlyForItsKeyInFlight
// needs of the default consumer's Store and of a ConsumerStore.
type requeueChannel interface {
	backend.Store
	Requeue(ctx context.Context, id string) error
	RequeueDead(ctx context.Context, f mysql.DeadFilter, opts mysql.RequeueOptions) (int, error)
}

// TestRequeuedRecordWaitsOnlyForItsKeyInFlight (issue 28, defect 4): a
// dead letter requeued while a later record of its key is in flight is
// due at once for claims without ordering; ordered claims never put two
// records of a key in flight, and take it as soon as the record in flight
// is settled, not when that record's lease would have ended. In the
// default consumer and in a named one, requeued alone or by filter.
func TestRequeuedRecordWaitsOnlyForItsKeyInFlight(t *testing.T) {
	for _, named := range []bool{false, true} {
		for _, bulk := range []bool{false, true} {
			for _, orderedClaims := range []bool{false, true} {
				t.Run(fmt.Sprintf("named=%v/bulk=%v/ordered=%v", named, bulk, orderedClaims), func(t *testing.T) {
					d := testutil.NewDatabase(t)
					ctx := context.Background()
					s := newStore(t, d.DB)
					var ch requeueChannel = s
					if named {
						require.NoError(t, s.AddConsumer(ctx, "activity", mysql.StartBeginning))
						ch = consumer(t, s, "activity")
					}
					require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "k1", Key: "K", Type: "T"}, outbox.Message{ID: "k2", Key: "K", Type: "T"}))
					claim := func(ordered bool) backend.Batch {
						t.Helper()
						b, err := ch.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 10, LeaseFor: time.Hour, Ordered: ordered})
						require.NoError(t, err)
						return b
					}
					// One record: an ordered claim may take a key's records
					// together, in order.
					b, err := ch.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 1, LeaseFor: time.Hour, Ordered: true})
					require.NoError(t, err)
					require.Equal(t, []string{"k1"}, recordIDs(b.Records))
					_, err = ch.Settle(ctx, b.Token, []backend.Outcome{{ID: "k1", Kind: backend.OutcomeDead, Error: "x"}})
					require.NoError(t, err)
					inFlight := claim(true)
					require.Equal(t, []string{"k2"}, recordIDs(inFlight.Records))

					if bulk {
						n, err := ch.RequeueDead(ctx, mysql.DeadFilter{Key: "K"}, mysql.RequeueOptions{})
						require.NoError(t, err)
						require.Equal(t, 1, n)
					} else {
						require.NoError(t, ch.Requeue(ctx, "k1"))
					}
					k1, err := ch.Get(ctx, "k1")
					require.NoError(t, err)
					require.Equal(t, outbox.StatusPending, k1.Status)
					require.WithinDuration(t, time.Now(), k1.NextAttemptAt, time.Minute, "due now, not when k2's hour-long lease ends")
					if !orderedClaims {
						require.Equal(t, []string{"k1"}, recordIDs(claim(false).Records), "without ordering: due at once")
						return
					}
					require.Zero(t, claim(true).Len(), "k2 is in flight: k1 must wait")
					res, err := ch.Settle(ctx, inFlight.Token, []backend.Outcome{{ID: "k2", Kind: backend.OutcomeRetry, Error: "later"}})
					require.NoError(t, err)
					require.Equal(t, 1, res.Applied)
					require.Equal(t, []string{"k1", "k2"}, recordIDs(claim(true).Records), "k2 settled: k1, K's head again, is claimed at once, with k2 (due again) behind it")
				})
			}
		}
	}
}

// TestRequeuedRecordWaitsForALaterOneRetried: as
// TestRequeuedRecordWaitsOnlyForItsKeyInFlight, with the later record
// in flight from its state row (it failed once) rather than from the
// log: a dead letter requeued meanwhile is its key's oldest pending
// record, and must still wait for it.
func TestRequeuedRecordWaitsForALaterOneRetried(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "k1", Key: "K", Type: "T"}, outbox.Message{ID: "k2", Key: "K", Type: "T"}))
	claim := func(limit int) backend.Batch {
		t.Helper()
		b, err := s.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: limit, LeaseFor: time.Hour, Ordered: true})
		require.NoError(t, err)
		return b
	}
	settle := func(b backend.Batch, o backend.Outcome) {
		t.Helper()
		res, err := s.Settle(ctx, b.Token, []backend.Outcome{o})
		require.NoError(t, err)
		require.Equal(t, 1, res.Applied)
	}
	b := claim(1)
	require.Equal(t, []string{"k1"}, recordIDs(b.Records))
	settle(b, backend.Outcome{ID: "k1", Kind: backend.OutcomeDead, Error: "x"})
	b = claim(10)
	require.Equal(t, []string{"k2"}, recordIDs(b.Records))
	settle(b, backend.Outcome{ID: "k2", Kind: backend.OutcomeRetry, Error: "once"})
	inFlight := claim(10)
	require.Equal(t, []string{"k2"}, recordIDs(inFlight.Records), "k2 again, from its state row")
	require.NoError(t, s.Requeue(ctx, "k1"))
	require.Zero(t, claim(10).Len(), "k2 is in flight: k1 must wait")
	settle(inFlight, backend.Outcome{ID: "k2", Kind: backend.OutcomePublished})
	require.Equal(t, []string{"k1"}, recordIDs(claim(10).Records))
}

// TestAddConsumerAfterALostCommit: AddConsumer whose commit reply was
// lost, and which retried, succeeded and says so.
func TestAddConsumerAfterALostCommit(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	newStore(t, d.DB)
	s := newStoreOn(t, faultyDB(t, d.DSN, onceFor(faultLoseReply, "COMMIT")))
	require.NoError(t, s.AddConsumer(ctx, "activity", mysql.StartNow))
	cs, err := newStore(t, d.DB).Consumers(ctx)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.ErrorIs(t, newStoreOn(t, d.DB).AddConsumer(ctx, "activity", mysql.StartNow), mysql.ErrConsumerExists, "a second AddConsumer is still refused")
}

// TestRemoveConsumerAfterALostReply: RemoveConsumer whose statements'
// replies were lost, and which retried, succeeded and says so.
func TestRemoveConsumerAfterALostReply(t *testing.T) {
	for _, step := range []string{"UPDATE", "DELETE FROM `" + testTable + "_consumers`"} {
		t.Run(step, func(t *testing.T) {
			d := testutil.NewDatabase(t)
			ctx := context.Background()
			require.NoError(t, newStore(t, d.DB).AddConsumer(ctx, "fresh", mysql.StartNow))
			s := newStoreOn(t, faultyDB(t, d.DSN, onceFor(faultLoseReply, step, testTable+"_consumers")))
			_, err := s.RemoveConsumer(ctx, "fresh")
			require.NoError(t, err)
			cs, err := newStoreOn(t, d.DB).Consumers(ctx)
			require.NoError(t, err)
			require.Empty(t, cs)
		})
	}
}

// TestReAddingAConsumerWhoseRemovalDidNotFinish: a consumer whose removal
// failed half way cannot be added again until the removal is finished,
// and then starts clean: none of the old consumer's rows reach it.
func TestReAddingAConsumerWhoseRemovalDidNotFinish(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	require.NoError(t, s.AddConsumer(ctx, "activity", mysql.StartNow))
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, roomMessages("old", 5, 1)...))
	b, err := consumer(t, s, "activity").Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, 1, b.Len(), "the old consumer has rows")

	failing := newStoreOn(t, faultyDB(t, d.DSN, onceFor(faultFail, "DELETE FROM `"+testTable+"_state`")))
	_, err = failing.RemoveConsumer(ctx, "activity")
	require.ErrorIs(t, err, errInjected)

	err = s.AddConsumer(ctx, "activity", mysql.StartNow)
	require.ErrorIs(t, err, mysql.ErrConsumerExists)
	require.ErrorContains(t, err, "being removed")
	_, err = consumer(t, s, "activity").Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 10, LeaseFor: time.Minute})
	require.ErrorIs(t, err, mysql.ErrUnknownConsumer, "a consumer being removed claims nothing")

	_, err = s.RemoveConsumer(ctx, "activity")
	require.NoError(t, err, "running it again finishes the removal")
	require.NoError(t, s.AddConsumer(ctx, "activity", mysql.StartNow))
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "new", Type: "T"}))
	b, err = consumer(t, s, "activity").Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, []string{"new"}, recordIDs(b.Records))
}

func recordIDs(rs []outbox.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// newStoreOn is a store on db without Migrate (db may inject faults into
// the DDL's statements too).
func newStoreOn(t *testing.T, db *sql.DB) *mysql.Store {
	t.Helper()
	s, err := mysql.New(db, mysql.Options{Table: testTable})
	require.NoError(t, err)
	return s
}

// TestEnqueueBoundsPayloadAndHeaders: payloads and headers over the
// limits, and headers that JSON could not keep as they are, fail with
// ErrInvalidMessage, and nothing of the call is written.
func TestEnqueueBoundsPayloadAndHeaders(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	big := strings.Repeat("h", mysql.DefaultMaxHeaderBytes)
	cases := []struct {
		name string
		m    outbox.Message
		want string
	}{
		{"payload over the limit", outbox.Message{ID: "p", Type: "T", Payload: make([]byte, mysql.DefaultMaxPayloadBytes+1)}, "exceeds MaxPayloadBytes"},
		{"headers over the limit", outbox.Message{ID: "h", Type: "T", Headers: map[string]string{"big": big}}, "exceed MaxHeaderBytes"},
		{"header value not UTF-8", outbox.Message{ID: "u", Type: "T", Headers: map[string]string{"h": "\xff"}}, "not valid UTF-8"},
		{"header name not UTF-8", outbox.Message{ID: "n", Type: "T", Headers: map[string]string{"\xc3": "v"}}, "not valid UTF-8"},
	}
	for _, tc := range cases {
		err := s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "fine-" + tc.m.ID, Type: "T"}, tc.m)
		require.ErrorIs(t, err, outbox.ErrInvalidMessage, tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
		require.Zero(t, countRows(t, d, ""), "%s: nothing of the call is written", tc.name)
	}
	atLimit := outbox.Message{ID: "max", Type: "T", Payload: make([]byte, mysql.DefaultMaxPayloadBytes),
		Headers: map[string]string{"h": big[:mysql.DefaultMaxHeaderBytes-len(`{"h":""}`)]}}
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, atLimit))
	r, err := s.Get(ctx, "max")
	require.NoError(t, err)
	require.Len(t, r.Payload, mysql.DefaultMaxPayloadBytes)
	require.Equal(t, atLimit.Headers, r.Headers)
}
