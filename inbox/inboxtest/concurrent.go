package inboxtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox"
)

// instances is how many instances of one consumer the concurrent tests
// run: three, each on its own connection pool.
const instances = 3

// outcome is what one Process call returned.
type outcome struct {
	id  string
	res inbox.Result
	err error
}

// redeliver processes id on every instance at once (released together)
// and returns what each call returned.
func redeliver(ibs []inbox.Inbox, id string, handler func(i int) inbox.Handler) []outcome {
	start := make(chan struct{})
	out := make([]outcome, len(ibs))
	var wg sync.WaitGroup
	for i, ib := range ibs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := ib.Process(context.Background(), id, handler(i))
			out[i] = outcome{id: id, res: res, err: err}
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// awaitWaiters returns once the other instances' calls wait for the
// lock the calling handler holds (when the harness can tell), or fails t
// after a deadline.
func awaitWaiters(ctx context.Context, t *testing.T, h Harness) error {
	if h.LockWaiters == nil {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for h.LockWaiters(t) < instances-1 {
		if time.Now().After(deadline) {
			return fmt.Errorf("inboxtest: the other %d instances did not wait for the first handler within 30s", instances-1)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// newInstancesOf returns the IDs of n messages with their effects, and
// the instances of consumer "orders", all reporting to one new counter.
func newInstancesOf(t *testing.T, h Harness, n int) ([]string, *effects, *counter, []inbox.Inbox) {
	ids := messageIDs(n)
	fx := newEffects(t, h, ids...)
	obs := newCounter()
	ibs := make([]inbox.Inbox, instances)
	for i := range ibs {
		ibs[i] = h.New(t, "orders", obs)
	}
	return ids, fx, obs, ibs
}

// testConcurrentRedelivery: one message delivered to three instances at
// the same moment, many times over: its effect is there once, exactly one
// call processed it, and none returned an error.
func testConcurrentRedelivery(t *testing.T, h Harness) {
	const rounds = 12
	ids, fx, obs, ibs := newInstancesOf(t, h, rounds)
	for _, id := range ids {
		outs := redeliver(ibs, id, func(int) inbox.Handler {
			return func(ctx context.Context, tx *sql.Tx) error {
				if err := fx.handler(id)(ctx, tx); err != nil {
					return err
				}
				return awaitWaiters(ctx, t, h)
			}
		})
		processed := 0
		for _, o := range outs {
			require.NoError(t, o.err, "id %s", id)
			if o.res == inbox.Processed {
				processed++
			} else {
				require.Equal(t, inbox.Duplicate, o.res)
			}
		}
		require.Equal(t, 1, processed, "id %s: exactly one instance processes it", id)
		require.Equal(t, 1, fx.count(t, id), "id %s: its effect exactly once", id)
	}
	require.Equal(t, rounds, obs.get(inbox.EventProcessed))
	require.Equal(t, (instances-1)*rounds, obs.get(inbox.EventDuplicate))
	require.Zero(t, obs.get(inbox.EventFailed))
	t.Logf("%d rounds on %d instances: %d conflicts retried", rounds, instances, obs.get(inbox.EventConflict))
}

// testRedeliveryTakesOver: when the first handler of a message fails,
// the redeliveries waiting on it take over: one processes it, the other
// skips it.
func testRedeliveryTakesOver(t *testing.T, h Harness) {
	const rounds = 12
	ids, fx, obs, ibs := newInstancesOf(t, h, rounds)
	boom := errors.New("first attempt fails")
	for _, id := range ids {
		var first atomic.Bool
		outs := redeliver(ibs, id, func(int) inbox.Handler {
			return func(ctx context.Context, tx *sql.Tx) error {
				if err := fx.handler(id)(ctx, tx); err != nil {
					return err
				}
				if first.CompareAndSwap(false, true) {
					if err := awaitWaiters(ctx, t, h); err != nil {
						return err
					}
					return boom
				}
				return nil
			}
		})
		got := map[string]int{}
		for _, o := range outs {
			switch {
			case errors.Is(o.err, boom):
				got["failed"]++
			case o.err != nil:
				t.Fatalf("id %s: unexpected error: %v", id, o.err)
			default:
				got[o.res.String()]++
			}
		}
		require.Equal(t, map[string]int{"failed": 1, "processed": 1, "duplicate": 1}, got, "id %s", id)
		require.Equal(t, 1, fx.count(t, id), "id %s", id)
	}
	require.Zero(t, obs.get(inbox.EventFailed))
	t.Logf("%d rounds on %d instances: %d conflicts retried", rounds, instances, obs.get(inbox.EventConflict))
}

// testManyIDsWithDeadlocks: three instances, each with several workers,
// process every message of a set in their own shuffled order; each
// handler increments two shared rows, half of them in the opposite
// order, so that the handlers deadlock one another as well as the
// redeliveries. Every message's effect is there exactly once and no call
// fails.
func testManyIDsWithDeadlocks(t *testing.T, h Harness) {
	const messages, workersPerInstance = 60, 3
	ids, fx, obs, ibs := newInstancesOf(t, h, messages)
	handler := func(id string, i int) inbox.Handler {
		first := "a"
		if i%2 == 1 {
			first = "b"
		}
		return func(ctx context.Context, tx *sql.Tx) error {
			fx.called(id)
			if err := fx.lockShared(ctx, tx, first); err != nil {
				return err
			}
			return fx.increment(ctx, tx, id)
		}
	}
	var (
		mu   sync.Mutex
		outs []outcome
		wg   sync.WaitGroup
	)
	start := make(chan struct{})
	for n, ib := range ibs {
		queue := make(chan int, messages)
		for _, i := range rand.Perm(messages) {
			queue <- i
		}
		close(queue)
		for range workersPerInstance {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := range queue {
					res, err := ib.Process(context.Background(), ids[i], handler(ids[i], i+n))
					mu.Lock()
					outs = append(outs, outcome{id: ids[i], res: res, err: err})
					mu.Unlock()
				}
			}()
		}
	}
	close(start)
	wg.Wait()

	processed := map[string]int{}
	for _, o := range outs {
		require.NoError(t, o.err, "id %s", o.id)
		if o.res == inbox.Processed {
			processed[o.id]++
		}
	}
	retried := 0
	for _, id := range ids {
		require.Equal(t, 1, processed[id], "id %s: exactly one call processes it", id)
		require.Equal(t, 1, fx.count(t, id), "id %s: its effect exactly once", id)
		retried += fx.callsOf(id) - 1
	}
	require.Equal(t, messages, fx.shared(t, "a"), "the shared rows count every message once")
	require.Equal(t, messages, fx.shared(t, "b"))
	require.Equal(t, messages, obs.get(inbox.EventProcessed))
	require.Equal(t, (instances-1)*messages, obs.get(inbox.EventDuplicate))
	require.Zero(t, obs.get(inbox.EventFailed)+obs.get(inbox.EventHandlerFailed))
	t.Logf("%d messages × %d instances: %d conflicts retried, %d handler calls rolled back and repeated",
		messages, instances, obs.get(inbox.EventConflict), retried)
}

// testConsumersAreIndependent: each consumer processes a message once,
// whatever another consumer did with it.
func testConsumersAreIndependent(t *testing.T, h Harness) {
	fx := newEffects(t, h, "m-1", "m-2")
	orders, audit := h.New(t, "orders", nil), h.New(t, "audit", nil)
	process(t, orders, "m-1", fx.handler("m-1"), inbox.Processed)
	require.False(t, contains(t, audit, "m-1"))
	process(t, audit, "m-1", fx.handler("m-1"), inbox.Processed)
	process(t, audit, "m-1", fx.handler("m-1"), inbox.Duplicate)
	process(t, orders, "m-1", fx.handler("m-1"), inbox.Duplicate)
	require.Equal(t, 2, fx.count(t, "m-1"), "once per consumer")

	_, err := audit.Process(context.Background(), "m-2", func(context.Context, *sql.Tx) error { return errors.New("audit fails") })
	require.Error(t, err)
	process(t, orders, "m-2", fx.handler("m-2"), inbox.Processed)
	require.False(t, contains(t, audit, "m-2"))
}
