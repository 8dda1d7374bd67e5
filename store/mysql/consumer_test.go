package mysql_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// startWorker runs a worker until the test ends (or stop is called) and
// waits for it to return.
func startWorker(t *testing.T, store backend.Store, sink outbox.Sink, opts outbox.WorkerOptions) (stop func()) {
	t.Helper()
	if opts.PollInterval == 0 {
		opts.PollInterval = 10 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = outboxtest.Logger(t)
	}
	w, err := outbox.NewWorker(store, sink, opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(ctx)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func consumer(t *testing.T, s *mysql.Store, name string) *mysql.ConsumerStore {
	t.Helper()
	c, err := s.Consumer(name)
	require.NoError(t, err)
	return c
}

func roomMessages(prefix string, n, keys int) []outbox.Message {
	ms := make([]outbox.Message, n)
	for i := range ms {
		ms[i] = outbox.Message{ID: fmt.Sprintf("%s-%04d", prefix, i), Key: fmt.Sprintf("room-%d", i%keys), Type: "RoomGiftSent", Payload: []byte(fmt.Sprint(i))}
	}
	return ms
}

func statsOf(t *testing.T, r backend.StatsReader) backend.Stats {
	t.Helper()
	st, err := r.Stats(context.Background())
	require.NoError(t, err)
	return st
}

// TestConsumersAreIndependent is the acceptance row: two consumers of one
// table, one always failing and then failing permanently, the other
// flowing. The second delivers everything, the first's state is its own,
// and the default (IM) consumer's status column is untouched by either.
func TestConsumersAreIndependent(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	require.NoError(t, s.AddConsumer(ctx, "audit", mysql.StartNow))
	require.NoError(t, s.AddConsumer(ctx, "activity", mysql.StartNow))
	const n = 300
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, roomMessages("m", n, 10)...))

	// audit: every call fails; the third attempt of each is permanent.
	var auditCalls atomic.Int64
	failing := outbox.SinkFunc(func(_ context.Context, m outbox.Message) error {
		auditCalls.Add(1)
		rec, err := consumer(t, s, "audit").Get(ctx, m.ID)
		if err == nil && rec.Attempts >= 2 {
			return outbox.Permanent(errors.New("audit endpoint rejects it"))
		}
		return errors.New("audit endpoint down")
	})
	// The breaker would take audit's failures for an outage and try one
	// record a round: this test is about the consumers' independence.
	startWorker(t, consumer(t, s, "audit"), failing, outbox.WorkerOptions{Name: "audit", Retry: outbox.FixedInterval{Interval: 10 * time.Millisecond}, Breaker: outbox.SinkBreaker{Off: true}})
	activity := outboxtest.NewRecorder()
	startWorker(t, consumer(t, s, "activity"), activity, outbox.WorkerOptions{Name: "activity", Ordering: true})

	outboxtest.Eventually(t, "activity has every message, settled", func() bool {
		return activity.Distinct() == n && statsOf(t, consumer(t, s, "activity")).Pending == 0
	})
	outboxtest.Eventually(t, "audit has given up on every message", func() bool { return statsOf(t, consumer(t, s, "audit")).Dead == n })

	require.Empty(t, activity.Duplicates())
	act, audit := statsOf(t, consumer(t, s, "activity")), statsOf(t, consumer(t, s, "audit"))
	require.Zero(t, act.Pending+act.Dead, "activity: all published")
	require.Equal(t, n, audit.Dead)
	rec, err := consumer(t, s, "audit").Get(ctx, "m-0007")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusDead, rec.Status)
	require.Equal(t, 3, rec.Attempts)
	require.Contains(t, rec.LastError, "audit endpoint rejects it")
	rec, err = consumer(t, s, "activity").Get(ctx, "m-0007")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPublished, rec.Status)
	require.Zero(t, rec.Attempts)
	t.Logf("audit: %d calls, %d dead; activity: %d delivered", auditCalls.Load(), audit.Dead, activity.Distinct())

	// The IM consumer (the outbox table's own status) saw none of it.
	im := statsOf(t, s)
	require.Equal(t, n, im.Pending)
	require.Zero(t, im.Dead)
	rec, err = s.Get(ctx, "m-0007")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPending, rec.Status)
	require.Zero(t, rec.Attempts)
	require.Empty(t, rec.LastError)

	// And when it runs, it delivers everything, still unaffected.
	imSink := outboxtest.NewRecorder()
	startWorker(t, s, imSink, outbox.WorkerOptions{Name: "im"})
	outboxtest.Eventually(t, "the IM consumer has every message", func() bool { return imSink.Distinct() == n })
	outboxtest.Eventually(t, "the IM consumer has settled everything", func() bool { return statsOf(t, s).Pending == 0 })
	require.Equal(t, n, statsOf(t, consumer(t, s, "audit")).Dead, "audit's dead letters stay its own")

	// Requeueing audit's dead letters touches audit only.
	requeued, err := consumer(t, s, "audit").RequeueDead(ctx, mysql.DeadFilter{Key: "room-3"}, mysql.RequeueOptions{})
	require.NoError(t, err)
	require.Equal(t, n/10, requeued)
	rec, err = s.Get(ctx, "m-0003")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPublished, rec.Status)
}

// TestConsumerAddedLater is the acceptance row: a consumer added after
// 1,000 messages sees only new ones when it starts from now, and all
// 1,000 plus the new ones, once each and in per-key order, when it
// starts from the beginning.
func TestConsumerAddedLater(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	// An early consumer has all 1,000 handed over (their fanout flag set)
	// before the others exist, so the backfill cannot lean on the flag.
	require.NoError(t, s.AddConsumer(ctx, "early", mysql.StartNow))
	old := roomMessages("old", 1000, 100)
	for i := 0; i < len(old); i += 100 {
		require.NoError(t, s.Enqueue(ctx, d.DB, nil, old[i:i+100]...))
	}
	early := outboxtest.NewRecorder()
	stopEarly := startWorker(t, consumer(t, s, "early"), early, outbox.WorkerOptions{Name: "early"})
	outboxtest.Eventually(t, "early has the old messages", func() bool { return early.Distinct() == len(old) })
	stopEarly()

	require.NoError(t, s.AddConsumer(ctx, "fromnow", mysql.StartNow))
	require.NoError(t, s.AddConsumer(ctx, "backfill", mysql.StartBeginning))
	require.ErrorIs(t, s.AddConsumer(ctx, "backfill", mysql.StartNow), mysql.ErrConsumerExists)
	infos, err := s.Consumers(ctx)
	require.NoError(t, err)
	require.Len(t, infos, 3)
	require.Equal(t, "backfill", infos[0].Name)
	require.True(t, infos[0].Backfilling)
	require.False(t, infos[2].Backfilling)

	st := statsOf(t, consumer(t, s, "backfill"))
	require.Equal(t, len(old), st.Pending, "the retained messages wait for the backfill")
	require.Zero(t, statsOf(t, consumer(t, s, "fromnow")).Pending)
	_, err = consumer(t, s, "fromnow").Get(ctx, "old-0001")
	require.ErrorIs(t, err, outbox.ErrNotFound, "written before it started")
	rec, err := consumer(t, s, "backfill").Get(ctx, "old-0001")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPending, rec.Status)

	// New messages: half before the workers start (so that they wait for
	// the backfill to reach them), half while they run.
	fresh := roomMessages("new", 200, 100)
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, fresh[:100]...))
	fromNow, backfill := outboxtest.NewRecorder(), outboxtest.NewRecorder()
	startWorker(t, consumer(t, s, "fromnow"), fromNow, outbox.WorkerOptions{Name: "fromnow"})
	startWorker(t, consumer(t, s, "backfill"), backfill, outbox.WorkerOptions{Name: "backfill", Ordering: true, BatchSize: 50})
	for i := 100; i < len(fresh); i += 20 {
		require.NoError(t, s.Enqueue(ctx, d.DB, nil, fresh[i:i+20]...))
	}

	outboxtest.Eventually(t, "fromnow has the new messages", func() bool { return fromNow.Distinct() == len(fresh) })
	outboxtest.Eventually(t, "backfill has old and new", func() bool { return backfill.Distinct() == len(old)+len(fresh) })
	require.Equal(t, len(fresh), fromNow.Len(), "only the new ones, once each")
	require.Empty(t, backfill.Duplicates())
	require.Equal(t, len(old)+len(fresh), backfill.Len())
	for _, m := range fromNow.Messages() {
		require.Contains(t, m.ID, "new-")
	}
	// Per key, the backfilled consumer got the old ones first, in order.
	written := map[string]int{}
	for i, m := range append(append([]outbox.Message{}, old...), fresh...) {
		written[m.ID] = i + 1
	}
	last := map[string]int{}
	for _, m := range backfill.Messages() {
		require.Greater(t, written[m.ID], last[m.Key], "key %s: %s out of order", m.Key, m.ID)
		last[m.Key] = written[m.ID]
	}
	// The backfill ends at the first claim that finds nothing more.
	outboxtest.Eventually(t, "the backfill is done", func() bool {
		infos, err = s.Consumers(ctx)
		require.NoError(t, err)
		return !infos[0].Backfilling
	})
}

// TestConsumerFromNowOnATableWithoutConsumers: history written before any
// consumer existed (never handed over) stays out of a from-now consumer.
func TestConsumerFromNowOnATableWithoutConsumers(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, roomMessages("old", 1000, 10)...))
	require.NoError(t, s.AddConsumer(ctx, "fromnow", mysql.StartNow))
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, roomMessages("new", 10, 10)...))
	rec := outboxtest.NewRecorder()
	startWorker(t, consumer(t, s, "fromnow"), rec, outbox.WorkerOptions{})
	outboxtest.Eventually(t, "the new messages arrive", func() bool { return rec.Distinct() == 10 })
	outboxtest.Eventually(t, "nothing is pending", func() bool { return statsOf(t, consumer(t, s, "fromnow")).Pending == 0 })
	require.Equal(t, 10, rec.Len())
}

// TestRetentionWaitsForTheSlowestConsumer is the acceptance row: a
// message is purged only once every consumer has finished with it; dead
// letters hold it too unless Options.PurgeDead says otherwise; removing a
// consumer lets retention go on.
func TestRetentionWaitsForTheSlowestConsumer(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	for _, name := range []string{"fast", "slow"} {
		require.NoError(t, s.AddConsumer(ctx, name, mysql.StartNow))
	}
	const n = 40
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, roomMessages("m", n, 4)...))
	purge := func(s *mysql.Store) int {
		t.Helper()
		total := 0
		for {
			deleted, err := s.PurgePublished(ctx, time.Microsecond, 7) // small batches: the sweep moves on
			require.NoError(t, err)
			total += deleted
			if deleted == 0 {
				return total
			}
		}
	}
	count := func(q string) int {
		t.Helper()
		var c int
		require.NoError(t, d.DB.QueryRow(q).Scan(&c))
		return c
	}

	// The default consumer and fast deliver everything; slow only room-0
	// and room-1, and gives up on m-0001.
	im, fast := outboxtest.NewRecorder(), outboxtest.NewRecorder()
	startWorker(t, s, im, outbox.WorkerOptions{Name: "im"})
	startWorker(t, consumer(t, s, "fast"), fast, outbox.WorkerOptions{Name: "fast"})
	outboxtest.Eventually(t, "im and fast are done", func() bool {
		return statsOf(t, s).Pending == 0 && statsOf(t, consumer(t, s, "fast")).Pending == 0
	})
	require.Zero(t, purge(s), "slow has nothing yet")

	slow := outboxtest.NewFlakySink(outboxtest.NewRecorder(), 1)
	slow.FailIf(func(m outbox.Message) error {
		switch {
		case m.ID == "m-0001":
			return outbox.Permanent(errors.New("slow rejects it"))
		case m.Key != "room-0" && m.Key != "room-1":
			return errors.New("slow is behind")
		}
		return nil
	})
	// Half the keys fail: five in a row hold the sink off, and then
	// only probes call it, one record each. Probes at every poll try
	// each record once quickly; the breaker's own schedule (doubling
	// waits up to 10 s) is the worker suite's business.
	stopSlow := startWorker(t, consumer(t, s, "slow"), slow, outbox.WorkerOptions{Name: "slow", Retry: outbox.FixedInterval{Interval: time.Hour},
		Breaker: outbox.SinkBreaker{MaxProbeInterval: 10 * time.Millisecond}})
	outboxtest.Eventually(t, "slow has tried everything once", func() bool {
		st := statsOf(t, consumer(t, s, "slow"))
		return st.Dead == 1 && st.Leased == 0 && count("SELECT COUNT(*) FROM room_outbox_state s JOIN room_outbox_consumers c ON c.id = s.consumer_id WHERE c.name = 'slow' AND s.retry_count > 0") == n/2+1
	})
	stopSlow()

	require.Equal(t, n/2-1, purge(s), "room-0 and room-1 but the dead letter")
	require.Equal(t, n/2+1, count("SELECT COUNT(*) FROM room_outbox"))
	require.Zero(t, count("SELECT COUNT(*) FROM room_outbox_state s LEFT JOIN room_outbox o ON o.id = s.id WHERE o.id IS NULL"),
		"the consumers' state went with the messages")
	_, err := s.Get(ctx, "m-0004")
	require.ErrorIs(t, err, outbox.ErrNotFound)
	_, err = s.Get(ctx, "m-0002")
	require.NoError(t, err, "slow still needs it")

	// With PurgeDead, the dead letter no longer holds its message.
	withDead, err := mysql.New(d.DB, mysql.Options{Table: testTable, PurgeDead: true})
	require.NoError(t, err)
	require.Equal(t, 1, purge(withDead))
	_, err = s.Get(ctx, "m-0001")
	require.ErrorIs(t, err, outbox.ErrNotFound)

	// Removing slow releases its state, and retention goes on.
	deleted, err := s.RemoveConsumer(ctx, "slow")
	require.NoError(t, err)
	require.Equal(t, n/2, deleted)
	require.Equal(t, n/2-1, purge(s), "all but the last message written, which retention keeps (LOG-DESIGN.md, the AUTO_INCREMENT counter)")
	require.Equal(t, 1, count("SELECT COUNT(*) FROM room_outbox"))
	require.Zero(t, count("SELECT COUNT(*) FROM room_outbox_state"))
	_, err = s.RemoveConsumer(ctx, "slow")
	require.ErrorIs(t, err, mysql.ErrUnknownConsumer)
	_, err = consumer(t, s, "slow").Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 1, LeaseFor: time.Second})
	require.ErrorIs(t, err, mysql.ErrUnknownConsumer, "a worker left running for a removed consumer fails its claims")
}

// TestRetentionWaitsForABackfill: a consumer that starts from the
// beginning holds every retained message until it has had it.
func TestRetentionWaitsForABackfill(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, roomMessages("m", 30, 3)...))
	im := outboxtest.NewRecorder()
	stopIM := startWorker(t, s, im, outbox.WorkerOptions{})
	outboxtest.Eventually(t, "im is done", func() bool { return statsOf(t, s).Pending == 0 })
	stopIM()
	require.NoError(t, s.AddConsumer(ctx, "late", mysql.StartBeginning))
	deleted, err := s.PurgePublished(ctx, time.Microsecond, 100)
	require.NoError(t, err)
	require.Zero(t, deleted, "late has not had them yet")
	late := outboxtest.NewRecorder()
	startWorker(t, consumer(t, s, "late"), late, outbox.WorkerOptions{BatchSize: 7})
	outboxtest.Eventually(t, "late is done", func() bool { return late.Distinct() == 30 && statsOf(t, consumer(t, s, "late")).Pending == 0 })
	deleted, err = s.PurgePublished(ctx, time.Microsecond, 100)
	require.NoError(t, err)
	require.Equal(t, 29, deleted, "all but the last message written")
}

func TestConsumerNamesAndStartAreValidated(t *testing.T) {
	d := testutil.NewDatabase(t)
	s := newStore(t, d.DB)
	for _, bad := range []string{"", "-x", "a b", "o'brien", string(make([]byte, 65))} {
		_, err := s.Consumer(bad)
		require.ErrorContains(t, err, "consumer name")
		require.ErrorContains(t, s.AddConsumer(context.Background(), bad, mysql.StartNow), "consumer name")
	}
	require.ErrorContains(t, s.AddConsumer(context.Background(), "ok", mysql.StartFrom(7)), "want StartNow or StartBeginning")
	_, err := consumer(t, s, "nobody").Stats(context.Background())
	require.ErrorIs(t, err, mysql.ErrUnknownConsumer)
}
