package backendtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// testOrderedPublishNowLeavesLaterDue: with Ordering, a key's second
// message, published after commit while its first is still in flight,
// is not its key's head: PublishNow says it left it to the worker, and
// the running worker delivers it after the first, without waiting out the
// head start (an hour here; 963872d kept it under the head start and
// returned nil: the second message arrived 10 s later with the default).
func testOrderedPublishNowLeavesLaterDue(t *testing.T, h Harness) {
	ctx := context.Background()
	first, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	rec := outboxtest.NewRecorder()
	sink := outbox.SinkFunc(func(ctx context.Context, m outbox.Message) error {
		if m.ID == "k-1" {
			close(first)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return rec.Publish(ctx, m)
	})
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{Ordering: true, PublishTimeout: time.Minute, AfterCommitTimeout: time.Minute})
	runWorker(t, w)

	m1 := outbox.Message{ID: "k-1", Key: "room-1", Type: "T"}
	m2 := outbox.Message{ID: "k-2", Key: "room-1", Type: "T"}
	enqueue(t, h, outbox.EnqueueOptions{HeadStart: time.Hour}, m1)
	done := make(chan error, 1)
	go func() { done <- w.PublishNow(ctx, m1) }()
	<-first // k-1 is in flight
	enqueue(t, h, outbox.EnqueueOptions{HeadStart: time.Hour}, m2)
	err := w.PublishNow(ctx, m2)
	require.ErrorIs(t, err, outbox.ErrLeftToWorker, "k-2 is not room-1's head while k-1 is pending: PublishNow says so")
	require.ErrorContains(t, err, `"k-2"`)
	once.Do(func() { close(release) })
	if err := <-done; err != nil {
		// The running worker's claim held k-1 for a moment: then the
		// worker published it, and PublishNow said so.
		require.ErrorIs(t, err, outbox.ErrLeftToWorker)
	}

	waitDistinct(t, rec, 2)
	require.Equal(t, []string{"k-1", "k-2"}, msgIDs(rec.Messages()), "in order, and k-2 without waiting out its head start")
}

// testAfterCommitTimeout: PublishNow's sink call gets AfterCommitTimeout
// (500 ms by default), not the worker's PublishTimeout: a sink that hangs
// costs the request that long at most (on 963872d, PublishTimeout: 3 s).
func testAfterCommitTimeout(t *testing.T, h Harness) {
	ctx := context.Background()
	var left atomic.Int64
	sink := outbox.SinkFunc(func(ctx context.Context, _ outbox.Message) error {
		dl, ok := ctx.Deadline()
		require.True(t, ok, "every sink call has a deadline")
		left.Store(int64(time.Until(dl)))
		<-ctx.Done()
		return ctx.Err()
	})
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{PublishTimeout: time.Minute})
	m := outbox.Message{ID: "slow-1", Type: "T"}
	enqueue(t, h, outbox.EnqueueOptions{HeadStart: time.Hour}, m)
	err := w.PublishNow(ctx, m)
	require.ErrorIs(t, err, outbox.ErrLeftToWorker)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.LessOrEqual(t, time.Duration(left.Load()), outbox.DefaultAfterCommitTimeout, "the sink call's deadline")
	require.Equal(t, outbox.StatusPending, get(t, h.Store, "slow-1").Status)
	require.Zero(t, get(t, h.Store, "slow-1").Attempts, "an after-commit failure is not an attempt")
	// Left due at once, not an hour later.
	rec := outboxtest.NewRecorder()
	res := processBatch(t, newWorker(t, h.Store, rec, outbox.WorkerOptions{}))
	require.Equal(t, 1, res.Published)
}

// testPublishNowHoldsOffAFailingSink: after Breaker.Failures failed
// publishes in a row, PublishNow calls the sink no more (a broker outage
// must not add its timeout to every request) and leaves the messages to
// the worker, due at once, saying so; the first publish that goes
// through ends it. The worker reports both.
func testPublishNowHoldsOff(t *testing.T, h Harness) {
	ctx := context.Background()
	var (
		calls   atomic.Int64
		failing atomic.Bool
		mu      sync.Mutex
		events  []outbox.EventKind
	)
	failing.Store(true)
	sink := outbox.SinkFunc(func(context.Context, outbox.Message) error {
		calls.Add(1)
		if failing.Load() {
			return outboxtest.ErrInjected
		}
		return nil
	})
	obs := outbox.ObserverFunc(func(_ context.Context, e outbox.Event) {
		if e.Kind == outbox.EventSinkDown || e.Kind == outbox.EventSinkUp {
			mu.Lock()
			events = append(events, e.Kind)
			mu.Unlock()
		}
	})
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{Breaker: outbox.SinkBreaker{Failures: 3, MaxProbeInterval: time.Hour}, PollInterval: time.Hour, Observer: obs})
	publishNow := func(id string) error {
		m := outbox.Message{ID: id, Type: "T"}
		enqueue(t, h, outbox.EnqueueOptions{HeadStart: time.Hour}, m)
		return w.PublishNow(ctx, m)
	}
	for i, id := range []string{"f-1", "f-2", "f-3"} {
		err := publishNow(id)
		require.ErrorIs(t, err, outbox.ErrLeftToWorker)
		require.ErrorIs(t, err, outboxtest.ErrInjected)
		require.EqualValues(t, i+1, calls.Load())
	}
	err := publishNow("held-1")
	require.ErrorIs(t, err, outbox.ErrLeftToWorker)
	require.ErrorIs(t, err, outbox.ErrSinkHeldOff)
	require.EqualValues(t, 3, calls.Load(), "no sink call while the sink is held off")

	// The worker's round tries the sink; it is back.
	failing.Store(false)
	res := processBatch(t, w)
	require.Equal(t, 4, res.Published, "the held-off message too: due at once, not an hour later")
	require.NoError(t, publishNow("ok-1"))
	require.EqualValues(t, 8, calls.Load())
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []outbox.EventKind{outbox.EventSinkDown, outbox.EventSinkUp}, events)
}

// The breaker of testHeldOffSinkOnlyProbed, and how long its sink is
// down.
const (
	holdOffPoll     = 20 * time.Millisecond
	holdOffMaxProbe = 320 * time.Millisecond
	holdOffFailures = 3
	holdOffWindow   = 1500 * time.Millisecond
	// holdOffInFlight is how many calls may have started before the
	// breaker held the sink off and still reach it: one of the running
	// worker's round, one of the writer's after-commit publish.
	holdOffInFlight = 2
)

// probesWithin is how many probes the breaker's schedule allows within
// d of the moment it held the sink off: the first after
// min(poll, maxWait), then at waits that double after each failed probe,
// up to maxWait. A probe never comes earlier than its schedule says (a
// loaded machine only delays it), so this is an upper bound.
func probesWithin(d, poll, maxWait time.Duration) int {
	n, at, wait := 0, time.Duration(0), min(poll, maxWait)
	for {
		at += wait
		if at > d {
			return n
		}
		n++
		wait = min(2*wait, maxWait)
	}
}

// testHeldOffSinkOnlyProbed: a service writes through Writer (commit,
// then the after-commit publish) at a steady rate while a running worker
// with Ordering polls every 20 ms, and its sink fails every call with
// failure. Once the worker holds the sink off, nothing but the probes
// may call it, at the breaker's schedule, shared by both paths; every
// after-commit publish leaves its message to the worker without a sink
// call. When the sink is back it gets every message, in key order.
// (d72aedb: every after-commit publish woke the worker, whose held-off
// round called the sink, and so did every poll: a call per write and per
// PollInterval.)
func testHeldOffSinkOnlyProbed(t *testing.T, h Harness, failure error, opensAfter int) {
	ctx := context.Background()
	rec := outboxtest.NewRecorder()
	var (
		mu    sync.Mutex
		down  bool
		calls []time.Time // when each call of the sink started while it was down
	)
	sink := outbox.SinkFunc(func(ctx context.Context, m outbox.Message) error {
		mu.Lock()
		if down {
			calls = append(calls, time.Now())
			mu.Unlock()
			return failure
		}
		mu.Unlock()
		return rec.Publish(ctx, m)
	})
	var heldOff, back atomic.Int64
	obs := outbox.ObserverFunc(func(_ context.Context, e outbox.Event) {
		switch e.Kind {
		case outbox.EventSinkDown:
			heldOff.Add(1)
		case outbox.EventSinkUp:
			back.Add(1)
		}
	})
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{
		PollInterval: holdOffPoll, Ordering: true, Observer: obs,
		Breaker: outbox.SinkBreaker{Failures: holdOffFailures, MaxProbeInterval: holdOffMaxProbe},
	})
	runWorker(t, w)
	writer, err := outbox.NewWriter(h.Store, w)
	require.NoError(t, err)
	written := 0
	write := func() {
		const keys = 3
		m := keyedSeq(fmt.Sprintf("hold-%d", written%keys), written/keys)
		written++
		tx, err := h.Begin(ctx)
		require.NoError(t, err)
		sent, err := writer.Enqueue(ctx, tx, m)
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		writer.Publish(ctx, sent...)
	}

	for range 6 {
		write()
	}
	waitDistinct(t, rec, written)

	mu.Lock()
	down = true
	mu.Unlock()
	downAt, before := time.Now(), written
	tick := time.NewTicker(5 * time.Millisecond) // a service's steady rate of commands, not a wait
	for time.Since(downAt) < holdOffWindow {
		write()
		<-tick.C
	}
	tick.Stop()
	end := time.Now()
	require.EqualValues(t, 1, heldOff.Load(), "the worker held the sink off once")
	mu.Lock()
	n := 0
	for _, c := range calls {
		if !c.After(end) {
			n++
		}
	}
	first := calls[0]
	mu.Unlock()
	probes := probesWithin(end.Sub(first), holdOffPoll, holdOffMaxProbe)
	t.Logf("sink down for %v: %d writes, %d sink calls; the breaker's schedule allows %d to hold it off, %d in flight and %d probes",
		end.Sub(first).Round(time.Millisecond), written-before, n, opensAfter, holdOffInFlight, probes)
	require.LessOrEqual(t, n, opensAfter+holdOffInFlight+probes,
		"while the sink is held off, only probes may call it, at the breaker's schedule")

	mu.Lock()
	down = false
	mu.Unlock()
	for range 3 {
		write()
	}
	waitDistinct(t, rec, written)
	requireKeyOrder(t, rec.Messages())
	outboxtest.Eventually(t, "the worker to report the sink back", func() bool { return back.Load() == 1 })
}
