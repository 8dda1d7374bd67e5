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
