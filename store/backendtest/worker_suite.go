package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// fastRetry makes failed records due again quickly.
var fastRetry = outbox.FixedInterval{Interval: 20 * time.Millisecond}

func newWorker(t *testing.T, s backend.Store, sink outbox.Sink, opts outbox.WorkerOptions) *outbox.Worker {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = outboxtest.Logger(t)
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 20 * time.Millisecond
	}
	if opts.Retry == nil {
		opts.Retry = fastRetry
	}
	w, err := outbox.NewWorker(s, sink, opts)
	require.NoError(t, err)
	return w
}

// runWorker runs w.Run in the background. The returned stop cancels it and
// waits until Run has returned; it also runs when the test ends, before the
// database is closed.
func runWorker(t *testing.T, w *outbox.Worker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	return runWorkerCtx(t, ctx, cancel, w)
}

// runWorkerCtx is runWorker on ctx, which cancel ends: a test that must
// end Run's context at a moment of its choosing, before it waits for Run
// to return, calls cancel itself.
func runWorkerCtx(t *testing.T, ctx context.Context, cancel context.CancelFunc, w *outbox.Worker) (stop func()) {
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v, want nil on a clean stop", err)
				}
			case <-time.After(outboxtest.WaitTimeout):
				t.Errorf("Run did not return within %v of cancel", outboxtest.WaitTimeout)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitClosed waits until ch is closed, and fails t if it is not within
// outboxtest.WaitTimeout.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(outboxtest.WaitTimeout):
		t.Fatalf("timed out after %v waiting until %s", outboxtest.WaitTimeout, what)
	}
}

func processBatch(t *testing.T, w *outbox.Worker) outbox.BatchResult {
	t.Helper()
	res, err := w.ProcessBatch(context.Background())
	require.NoError(t, err)
	return res
}

// bulkWait bounds the waits of tests that move many records through real
// workers and a real database: thousands of sink calls, each retry a
// round. A loaded machine took over a minute for some; the bound only
// guards against a hang.
const bulkWait = 5 * time.Minute

// waitDistinct waits until r has n distinct messages.
func waitDistinct(t *testing.T, r *outboxtest.Recorder, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bulkWait)
	defer cancel()
	require.NoError(t, r.WaitDistinct(ctx, n))
}

func requireStatus(t *testing.T, s backend.Store, want outbox.Status, ids ...string) {
	t.Helper()
	for _, id := range ids {
		require.Equal(t, want, get(t, s, id).Status, id)
	}
}

// waitPublished waits until every message of ms is published.
func waitPublished(t *testing.T, s backend.Store, ms []outbox.Message) {
	t.Helper()
	waitSettled(t, s, msgIDs(ms))
	requireStatus(t, s, outbox.StatusPublished, msgIDs(ms)...)
}

// waitSettled waits until none of the records ids names is pending. Where
// the store reports stats, it waits until nothing at all is pending, one
// statement a poll: a poll of one Get per record takes seconds for
// thousands of them on a loaded machine, and takes the database from the
// workers.
func waitSettled(t *testing.T, s backend.Store, ids []string) {
	t.Helper()
	if _, ok := s.(backend.StatsReader); ok {
		outboxtest.EventuallyWithin(t, bulkWait, "nothing is pending", func() bool { return statsOf(t, s).Pending == 0 })
		return
	}
	outboxtest.EventuallyWithin(t, bulkWait, fmt.Sprintf("none of %d records is pending", len(ids)), func() bool {
		for _, id := range ids {
			if get(t, s, id).Status == outbox.StatusPending {
				return false
			}
		}
		return true
	})
}

// commitThenPublishNow is a writer's command: enqueue m with a head start
// in its own transaction, commit, then publish at once.
func commitThenPublishNow(t *testing.T, h Harness, w *outbox.Worker, m outbox.Message) error {
	t.Helper()
	ctx := context.Background()
	tx, err := h.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, h.Store.Enqueue(ctx, tx, &outbox.EnqueueOptions{HeadStart: outbox.DefaultHeadStart}, m))
	require.NoError(t, tx.Commit())
	return w.PublishNow(ctx, m)
}

func msgIDs(ms []outbox.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func testRepublish(t *testing.T, h Harness) {
	ms := msgs("r", 3)
	enqueue(t, h, outbox.EnqueueOptions{}, ms...)
	rec := outboxtest.NewRecorder()
	w := newWorker(t, h.Store, rec, outbox.WorkerOptions{})

	res := processBatch(t, w)
	require.Equal(t, outbox.BatchResult{Claimed: 3, Published: 3}, res)
	got := rec.Messages()
	require.Len(t, got, 3)
	for i, m := range ms {
		require.False(t, got[i].CreatedAt.IsZero(), "the store stamps CreatedAt")
		got[i].CreatedAt = time.Time{}
		require.Equal(t, m, got[i], "the sink gets the same event IDs and content, in order")
	}
	requireStatus(t, h.Store, outbox.StatusPublished, msgIDs(ms)...)

	require.Zero(t, processBatch(t, w).Claimed, "published records are not scanned again")
	require.Equal(t, 3, rec.Len())
}

func testFailureKeepsPending(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("f"))
	sink := outboxtest.NewFlakySink(outboxtest.NewRecorder(), 1)
	sink.FailIf(func(outbox.Message) error { return errors.New("downstream: 503 internal error") })
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{})

	require.Equal(t, outbox.BatchResult{Claimed: 1, Retried: 1}, processBatch(t, w))
	r := get(t, h.Store, "f")
	require.Equal(t, outbox.StatusPending, r.Status)
	require.Equal(t, 1, r.Attempts)
	require.Contains(t, r.LastError, "503 internal error")

	outboxtest.Eventually(t, "the second attempt", func() bool { return processBatch(t, w).Retried == 1 })
	require.Equal(t, 2, get(t, h.Store, "f").Attempts, "each worker attempt counts")
}

func testFailThenSucceed(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("ft"))
	rec := outboxtest.NewRecorder()
	sink := outboxtest.NewFlakySink(rec, 1)
	sink.FailNext(1)
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{})

	require.Equal(t, 1, processBatch(t, w).Retried)
	outboxtest.Eventually(t, "the retry publishes", func() bool { return processBatch(t, w).Published == 1 })
	r := get(t, h.Store, "ft")
	require.Equal(t, outbox.StatusPublished, r.Status)
	require.Equal(t, 1, r.Attempts)
	require.Empty(t, r.LastError)
	require.Equal(t, 1, rec.Count("ft"))
}

func testSyncSuccess(t *testing.T, h Harness) {
	m := msg("sync-ok")
	enqueue(t, h, outbox.EnqueueOptions{HeadStart: outbox.DefaultHeadStart}, m)
	rec := outboxtest.NewRecorder()
	w := newWorker(t, h.Store, rec, outbox.WorkerOptions{})

	require.NoError(t, w.PublishNow(context.Background(), m))
	r := get(t, h.Store, "sync-ok")
	require.Equal(t, outbox.StatusPublished, r.Status)
	require.Zero(t, r.Attempts)
	require.Equal(t, 1, rec.Count("sync-ok"))

	require.Zero(t, processBatch(t, w).Claimed, "the worker never scans a record the fast path published")
	require.NoError(t, w.PublishNow(context.Background(), m), "publishing a published message again is a no-op")
	require.Equal(t, 1, rec.Len())
}

func testSyncFailure(t *testing.T, h Harness) {
	m := msg("sync-fail")
	enqueue(t, h, outbox.EnqueueOptions{HeadStart: outbox.DefaultHeadStart}, m)
	rec := outboxtest.NewRecorder()
	sink := outboxtest.NewFlakySink(rec, 1)
	sink.FailNext(1)
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{})

	err := w.PublishNow(context.Background(), m)
	require.ErrorIs(t, err, outboxtest.ErrInjected, "the failure is reported for logging")
	require.Contains(t, err.Error(), "sync-fail")
	r := get(t, h.Store, "sync-fail")
	require.Equal(t, outbox.StatusPending, r.Status)
	require.Zero(t, r.Attempts, "a failed synchronous publish does not count as a retry")
	require.Empty(t, r.LastError)

	// Released for the worker at once, head start or not.
	require.Equal(t, outbox.BatchResult{Claimed: 1, Published: 1}, processBatch(t, w))
	requireStatus(t, h.Store, outbox.StatusPublished, "sync-fail")
	require.Equal(t, 1, rec.Count("sync-fail"))
}

func testCancel(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("c-0"), msg("c-1"), msg("c-2"))
	// The first publish hangs until the test has cancelled Run, and then
	// until its own deadline: the cancel comes while it is in flight
	// however slow the machine is (with a plain hang, a test slower than
	// PublishTimeout let the worker claim c-1 before it cancelled).
	entered, cancelled := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	sink := outbox.SinkFunc(func(ctx context.Context, m outbox.Message) error {
		if calls.Add(1) == 1 {
			close(entered)
			<-cancelled
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	// c-0's retry is an hour away, so that the claim below sees only the
	// records never attempted (with fastRetry c-0 was due again 20 ms
	// after its outcome, and a slow run claimed it too).
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{BatchSize: 1, PublishTimeout: 300 * time.Millisecond, Retry: outbox.FixedInterval{Interval: time.Hour}})

	ctx, cancel := context.WithCancel(context.Background())
	stop := runWorkerCtx(t, ctx, cancel, w)
	letGo := sync.OnceFunc(func() { close(cancelled) })
	t.Cleanup(letGo) // before stop, on a failure path too
	waitClosed(t, entered, "the first publish is in flight")
	cancel()
	letGo()
	stop() // waits for Run to return

	require.Equal(t, int32(1), calls.Load(), "no batch is claimed after cancel")
	r := get(t, h.Store, "c-0")
	require.Equal(t, 1, r.Attempts, "the in-flight result is recorded before Run returns")
	require.Contains(t, r.LastError, "deadline exceeded", "the in-flight publish ran until PublishTimeout, not cut by cancel")
	b := claim(t, h.Store, 10, time.Minute)
	require.Equal(t, []string{"c-1", "c-2"}, ids(b.Records), "records not yet attempted stay pending and unleased")
	require.Zero(t, b.Records[0].Attempts)
}

func testNoOpSink(t *testing.T, h Harness) {
	nothingToSend := map[string]bool{"CartCreated": true, "CartTotalsChanged": true, "CartRankChanged": true}
	downstream := outboxtest.NewRecorder()
	sink := outbox.SinkFunc(func(ctx context.Context, m outbox.Message) error {
		if nothingToSend[m.Type] {
			return nil // nothing to send for this type: a no-op success
		}
		return downstream.Publish(ctx, m)
	})
	all := []outbox.Message{
		{ID: "n-1", Key: "order-1", Type: "CartCreated"},
		{ID: "n-2", Key: "order-1", Type: "OrderPlaced"},
		{ID: "n-3", Key: "order-1", Type: "CartTotalsChanged"},
		{ID: "n-4", Key: "order-1", Type: "CartRankChanged"},
	}
	enqueue(t, h, outbox.EnqueueOptions{}, all...)
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{})

	require.Equal(t, 4, processBatch(t, w).Published)
	requireStatus(t, h.Store, outbox.StatusPublished, "n-1", "n-2", "n-3", "n-4")
	require.Equal(t, []string{"n-2"}, msgIDs(downstream.Messages()), "only the event with something to send went downstream")
}

func testBatchIsolation(t *testing.T, h Harness) {
	ms := msgs("b", 10)
	enqueue(t, h, outbox.EnqueueOptions{}, ms...)
	rec := outboxtest.NewRecorder()
	sink := outboxtest.NewFlakySink(rec, 1)
	sink.FailIf(func(m outbox.Message) error {
		if m.ID == "b-3" {
			return errors.New("bad record")
		}
		return nil
	})
	sink.PanicIf(func(m outbox.Message) bool { return m.ID == "b-6" })
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{Retry: outbox.FixedInterval{Interval: time.Hour}})

	require.Equal(t, outbox.BatchResult{Claimed: 10, Published: 8, Retried: 2}, processBatch(t, w))
	for _, m := range ms {
		r := get(t, h.Store, m.ID)
		switch m.ID {
		case "b-3":
			require.Equal(t, outbox.StatusPending, r.Status)
			require.Equal(t, "bad record", r.LastError)
		case "b-6":
			require.Equal(t, outbox.StatusPending, r.Status)
			require.Contains(t, r.LastError, "panic")
		default:
			require.Equal(t, outbox.StatusPublished, r.Status, m.ID)
		}
	}
}

// faultyStore wraps a real store and fails chosen calls, as a database
// outage would. While leaseFor is set, its claims lease for that long
// instead of what the worker asks: a worker's own lease must cover its
// PublishTimeout and two StoreTimeouts, so a test that needs a lease to
// run out soon cuts it here and leaves the worker timeouts of seconds,
// which a loaded machine does not miss.
type faultyStore struct {
	backend.Store
	failClaims  atomic.Int32
	failSettles atomic.Int32
	leaseFor    atomic.Int64 // a time.Duration; 0: as asked
}

var errStoreDown = errors.New("injected: database unreachable")

// Capabilities has none of the store's fast paths: every claim and
// settle goes through the faults.
func (f *faultyStore) Capabilities() backend.Capabilities { return backend.Capabilities{} }

func (f *faultyStore) Claim(ctx context.Context, p backend.ClaimParams) (backend.Batch, error) {
	if f.failClaims.Add(-1) >= 0 {
		return backend.Batch{}, errStoreDown
	}
	if d := time.Duration(f.leaseFor.Load()); d > 0 {
		p.LeaseFor = d
	}
	return f.Store.Claim(ctx, p)
}

func (f *faultyStore) Settle(ctx context.Context, token string, o []backend.Outcome) (backend.SettleResult, error) {
	if f.failSettles.Add(-1) >= 0 {
		return backend.SettleResult{}, errStoreDown
	}
	return f.Store.Settle(ctx, token, o)
}

func testStoreErrors(t *testing.T, h Harness) {
	ms := msgs("s", 5)
	enqueue(t, h, outbox.EnqueueOptions{}, ms...)
	fs := &faultyStore{Store: h.Store}
	rec := outboxtest.NewRecorder()
	// The default timeouts: a store call of a loaded machine that missed
	// a short one would lose an outcome the test does not count on.
	w := newWorker(t, fs, rec, outbox.WorkerOptions{})

	fs.failClaims.Store(1)
	_, err := w.ProcessBatch(context.Background())
	require.ErrorIs(t, err, errStoreDown, "a failed claim ends the round with an error")
	require.Zero(t, rec.Len())

	// The round whose settle is lost leases for a moment only, so that
	// its records come back soon rather than after LeaseTimeout.
	fs.failSettles.Store(1)
	fs.leaseFor.Store(int64(time.Millisecond))
	res, err := w.ProcessBatch(context.Background())
	fs.leaseFor.Store(0)
	require.ErrorIs(t, err, errStoreDown, "a failed settle ends the round with an error")
	require.Equal(t, 5, res.Published, "the sink took them; the outcome is what got lost")

	// Run keeps going through failing rounds; the records whose outcome was
	// lost are delivered again once their lease expires.
	fs.failClaims.Store(3)
	runWorker(t, w)
	waitPublished(t, h.Store, ms)
	for _, m := range ms {
		require.Equal(t, 2, rec.Count(m.ID), "delivered once before the lost settle, once after (at-least-once)")
	}
}

// stallingStore wraps a real store. Its claims wait for their context to
// end and then fail with the context's error, as a claim whose query a
// stop cuts short does (some stores ignore a context that ends before
// they start).
type stallingStore struct {
	backend.Store
	claiming chan struct{} // closed when a claim is waiting
	once     sync.Once
}

// Capabilities has none of the store's fast paths: every claim stalls.
func (s *stallingStore) Capabilities() backend.Capabilities { return backend.Capabilities{} }

func (s *stallingStore) Claim(ctx context.Context, p backend.ClaimParams) (backend.Batch, error) {
	s.once.Do(func() { close(s.claiming) })
	<-ctx.Done()
	return backend.Batch{}, fmt.Errorf("claim: %w", ctx.Err())
}

// testStopDuringClaim: a claim that a stop interrupts is not a failure
// of the store. The worker stops cleanly, logs nothing at ERROR and
// reports no EventClaimFailed, so that each deploy's shutdown does not
// page anyone or count as a database error.
func testStopDuringClaim(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("sc-1"))
	store := &stallingStore{Store: h.Store, claiming: make(chan struct{})}
	var logs outboxtest.LogBuffer
	events := &eventLog{}
	w := newWorker(t, store, outboxtest.NewRecorder(), outbox.WorkerOptions{Logger: slogJSON(&logs), Observer: events})
	stop := runWorker(t, w)
	waitClosed(t, store.claiming, "a claim is waiting")
	stop()

	require.Zero(t, events.count(outbox.EventClaimFailed), "a claim cut short by the stop was reported as failed")
	for _, line := range strings.Split(logs.String(), "\n") {
		require.NotContains(t, line, `"level":"ERROR"`, "an interrupted claim was logged as an error")
	}
	require.Contains(t, logs.String(), "outbox worker stopped")
	requireStatus(t, h.Store, outbox.StatusPending, "sc-1")
}

func testBatchSize(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msgs("bs", 25)...)
	w := newWorker(t, h.Store, outboxtest.NewRecorder(), outbox.WorkerOptions{BatchSize: 10})
	require.Equal(t, 10, processBatch(t, w).Claimed)
	require.Equal(t, 10, processBatch(t, w).Claimed)
	require.Equal(t, 5, processBatch(t, w).Claimed)
}

func testRunTwice(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("busy"))
	sink := outboxtest.NewFlakySink(outboxtest.NewRecorder(), 1)
	sink.HangNext(1)
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{PublishTimeout: 500 * time.Millisecond})
	stop := runWorker(t, w)
	outboxtest.Eventually(t, "Run is publishing", func() bool { return sink.Calls() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, w.Run(ctx), outbox.ErrWorkerRunning)
	stop()
	require.NoError(t, w.Run(ctx), "after a stop the worker can run again")
}

func testLogFields(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, outbox.Message{ID: "log-1", Key: "order-42", Type: "OrderPaid"})
	var buf outboxtest.LogBuffer
	logger := slogJSON(&buf)
	sink := outboxtest.NewFlakySink(outboxtest.NewRecorder(), 1)
	sink.FailNext(1)
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{Name: "orders_outbox", NodeID: "node-7", KeyAttr: "order_id", Logger: logger})
	processBatch(t, w)

	line := findLogLine(t, buf.String(), "outbox publish failed; will retry")
	want := map[string]any{
		"worker": "orders_outbox", "node_id": "node-7", "event_id": "log-1", "event_type": "OrderPaid",
		"order_id": "order-42", "retry_count": float64(1), "status": "pending", "error": outboxtest.ErrInjected.Error(),
	}
	for k, v := range want {
		require.Equal(t, v, line[k], "log field %q", k)
	}
}

func testPublishNowOnce(t *testing.T, h Harness) {
	const n = 1000
	rec := outboxtest.NewRecorder()
	w := newWorker(t, h.Store, rec, outbox.WorkerOptions{PollInterval: outbox.MinPollInterval})
	runWorker(t, w)

	all := msgs("pn", n)
	for _, m := range all {
		// A worker's claim may hold a message PublishNow asks for: then
		// it says so, and the worker delivers it.
		if err := commitThenPublishNow(t, h, w, m); err != nil {
			require.ErrorIs(t, err, outbox.ErrLeftToWorker)
		}
	}
	waitDistinct(t, rec, n)
	waitPublished(t, h.Store, all)
	require.Empty(t, rec.Duplicates(), "the running worker raced the fast path")
	require.Equal(t, n, rec.Len())
}

func testPublishNowFailing(t *testing.T, h Harness) {
	const n = 1000
	rec := outboxtest.NewRecorder()
	sink := outboxtest.NewFlakySink(rec, 1)
	sink.FailIf(func(outbox.Message) error { return errors.New("im unreachable") })
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{PollInterval: outbox.MinPollInterval})

	all := msgs("pf", n)
	for _, m := range all {
		require.Error(t, commitThenPublishNow(t, h, w, m))
	}
	require.Zero(t, rec.Len())
	for _, m := range all {
		r := get(t, h.Store, m.ID)
		require.Equal(t, outbox.StatusPending, r.Status)
		require.Zero(t, r.Attempts)
	}

	sink.FailIf(nil) // the downstream is back
	runWorker(t, w)
	waitDistinct(t, rec, n)
	waitPublished(t, h.Store, all)
}

func testThreeWorkers(t *testing.T, h Harness) {
	const n = 5000
	all := msgs("tw", n)
	for chunk := range slices.Chunk(all, 500) {
		enqueue(t, h, outbox.EnqueueOptions{}, chunk...)
	}
	rec := outboxtest.NewRecorder()
	var sinks []*outboxtest.FlakySink
	for i := range 3 {
		sink := outboxtest.NewFlakySink(rec, uint64(i+1))
		sink.SetFailRate(0.2)
		sinks = append(sinks, sink)
		w := newWorker(t, h.OpenStore(t), sink, outbox.WorkerOptions{NodeID: fmt.Sprintf("node-%d", i), BatchSize: 50})
		runWorker(t, w)
	}
	waitDistinct(t, rec, n)
	waitPublished(t, h.Store, all)
	require.Empty(t, rec.Duplicates(), "no lease expired, so no record may be delivered twice")
	failed := 0
	for _, s := range sinks {
		require.Positive(t, s.Calls(), "every worker took part")
		failed += s.Failed()
	}
	require.Greater(t, failed, n/10, "the sinks really failed about 20%% of calls")
	t.Logf("3 workers delivered %d records; %d publish calls failed by injection", n, failed)
}

func testCrashedWorker(t *testing.T, h Harness) {
	ms := msgs("cr", 5)
	enqueue(t, h, outbox.EnqueueOptions{}, ms...)
	// A worker claims the batch and dies before publishing or settling.
	crashed, err := h.Store.Claim(context.Background(), backend.ClaimParams{Owner: "crashed-node", Limit: 10, LeaseFor: 500 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, 5, crashed.Len())

	rec := outboxtest.NewRecorder()
	w := newWorker(t, h.OpenStore(t), rec, outbox.WorkerOptions{NodeID: "survivor"})
	runWorker(t, w)
	waitDistinct(t, rec, 5)
	waitPublished(t, h.Store, ms)
	require.Empty(t, rec.Duplicates())
	res := settle(t, h.Store, crashed.Token, backend.Outcome{ID: "cr-0", Kind: backend.OutcomeRetry, Error: "zombie"})
	require.Equal(t, 1, res.Stale, "the crashed worker, if it came back, could not overwrite the result")
}

// RunLeakTest checks that a stopped worker leaves no goroutine behind:
// not its own, and not one of the store's. The check sees every goroutine
// of the test binary, so a test running beside it would count as a leak.
// Call it from a top-level test that does not call t.Parallel: Go runs
// such a test before the parallel ones start and lets none start while it
// runs. It fails at once if called from a parallel test or one of its
// subtests.
func RunLeakTest(t *testing.T, newHarness Factory) {
	t.Run("StoppedWorkerLeavesNoGoroutine", func(t *testing.T) {
		refuseParallel(t)
		testNoGoroutineLeak(t, newHarness)
	})
}

// refuseParallel fails t if t or a test above it is parallel, using the
// testing package's own check: t.Setenv panics in a parallel test.
func refuseParallel(t *testing.T) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("RunLeakTest needs a test that is not parallel, nor any test above it (%v)", r)
		}
	}()
	t.Setenv("OUTBOXRELAY_BACKENDTEST_ALONE", "1")
}

func testNoGoroutineLeak(t *testing.T, newHarness Factory) {
	h := newHarness(t)
	enqueue(t, h, outbox.EnqueueOptions{}, msgs("gl", 3)...)
	_ = get(t, h.Store, "gl-0") // open the pool's connections before the baseline
	ignore := []goleak.Option{
		goleak.IgnoreCurrent(),
		// The MySQL driver watches each pooled connection for cancellation
		// until the pool closes it; the test's pool outlives the worker.
		goleak.IgnoreAnyFunction("github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1"),
	}
	sink := outboxtest.NewFlakySink(outboxtest.NewRecorder(), 1)
	sink.HangNext(1)
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{PublishTimeout: 200 * time.Millisecond})
	stop := runWorker(t, w)
	outboxtest.Eventually(t, "a publish is in flight", func() bool { return sink.Calls() >= 1 })
	stop()
	goleak.VerifyNone(t, ignore...)
}

// testOrderedProbeTakeOverKeepsKeyOrder is the take-over in parts as a
// worker comes to it: while it holds its sink off, it probes with a
// claim of one record (holdoff.go), and the probe may take over the
// range of an instance that died with a batch out (its lease ran out).
// The probe's record (k1) fails; the next probe's goes through and the
// worker claims whole batches again. The rest of the dead range must
// still hold k2 back until k1's retry is delivered. Before the take-over
// was gated (issue 40's fault runs kill workers and take the sink down),
// k2 reached the sink first.
func testOrderedProbeTakeOverKeepsKeyOrder(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, keyed("k1", "K"), keyed("x1", "X"), keyed("y1", "Y"), keyed("k2", "K"))
	if b := orderedClaim(t, h.Store, 10, 500*time.Millisecond); b.Len() < 4 {
		t.Skipf("the store's ordered claim took %d of the 4 messages: nothing to take over in parts", b.Len())
	}
	// The dead instance's batch is out; z1 is the worker's own, and its
	// failure makes the worker hold the sink off.
	enqueue(t, h, outbox.EnqueueOptions{}, keyed("z1", "Z"))
	rec := outboxtest.NewRecorder()
	var mu sync.Mutex
	tried := map[string]bool{}
	sink := outbox.SinkFunc(func(ctx context.Context, m outbox.Message) error {
		mu.Lock()
		first := !tried[m.ID]
		tried[m.ID] = true
		mu.Unlock()
		if first && (m.ID == "z1" || m.ID == "k1") {
			return errors.New("sink down")
		}
		return rec.Publish(ctx, m)
	})
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{
		Ordering: true, BatchSize: 10, Retry: outbox.FixedInterval{Interval: time.Second},
		Breaker: outbox.SinkBreaker{Failures: 1, MaxProbeInterval: 20 * time.Millisecond},
	})
	runWorker(t, w)
	outboxtest.Eventually(t, "all five messages delivered", func() bool { return rec.Distinct() == 5 })
	var order []string
	for _, m := range rec.Messages() {
		order = append(order, m.ID)
	}
	require.Less(t, slices.Index(order, "k1"), slices.Index(order, "k2"), "key K out of order: %v", order)
}
