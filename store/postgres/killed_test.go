package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// TestOrderedWorkersRideOutKilledConnections is the run: two
// ordered workers drain 3,000 messages of 50 keys while every connection
// to the database is terminated every 50-250 ms (150 times, then no
// more, so that a machine too loaded to finish a transaction between two
// kills still ends the run), for the default consumer and for a named
// one. Nothing may be lost or reordered. The failed claims and settles
// and the duplicates are logged: with the lost connection tried again,
// they fell from 2,621 failed claims, 12 failed settles and 216
// duplicates to a handful (a failed settle costs the batch's
// redelivery after its lease, 5 s here). TestStoreSurvivesALostConnection
// is the exact check of the retry.
func TestOrderedWorkersRideOutKilledConnections(t *testing.T) {
	for _, consumer := range []string{"", "activity"} {
		t.Run(map[string]string{"": "Default", "activity": "Named"}[consumer], func(t *testing.T) {
			const total, keys = 3000, 50
			d := pgtest.NewDatabase(t)
			ctx := context.Background()
			s := newStore(t, d.DB)
			if consumer != "" {
				require.NoError(t, s.AddConsumer(ctx, consumer, postgres.StartNow))
			}
			var msgs []outbox.Message
			for i := range total {
				msgs = append(msgs, outbox.Message{ID: fmt.Sprintf("m-%04d", i), Key: fmt.Sprintf("k-%02d", i%keys), Type: "T", Payload: []byte(fmt.Sprint(i))})
			}
			for i := 0; i < total; i += 500 {
				enqueueCommitted(t, d, s, msgs[i:i+500]...)
			}

			var (
				mu        sync.Mutex
				seen      = map[string]int{}
				lastOfKey = map[string]int{}
				disorder  []string
				delivered atomic.Int64
				settleErr atomic.Int64
				claimErr  atomic.Int64
				done      = make(chan struct{})
			)
			sink := outbox.SinkFunc(func(_ context.Context, m outbox.Message) error {
				var n int
				fmt.Sscan(string(m.Payload), &n)
				mu.Lock()
				defer mu.Unlock()
				seen[m.ID]++
				if seen[m.ID] == 1 {
					if last, ok := lastOfKey[m.Key]; ok && n < last {
						disorder = append(disorder, fmt.Sprintf("%s after %d", m.ID, last))
					}
					lastOfKey[m.Key] = max(lastOfKey[m.Key], n)
					if delivered.Add(1) == total {
						close(done)
					}
				}
				return nil
			})
			observer := outbox.ObserverFunc(func(_ context.Context, e outbox.Event) {
				switch e.Kind {
				case outbox.EventSettleFailed:
					settleErr.Add(1)
				case outbox.EventClaimFailed:
					if claimErr.Add(1) <= 5 {
						t.Logf("claim failed: %v", e.Err)
					}
				}
			})
			runCtx, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			for w := range 2 {
				st := newStore(t, d.Open(t))
				var store backend.Store = st
				if consumer != "" {
					c, err := st.Consumer(consumer)
					require.NoError(t, err)
					store = c
				}
				worker, err := outbox.NewWorker(store, sink, outbox.WorkerOptions{
					NodeID: fmt.Sprintf("w%d", w), Ordering: true, BatchSize: 100, PollInterval: 20 * time.Millisecond,
					PublishTimeout: time.Second, StoreTimeout: 2 * time.Second, LeaseTimeout: 5 * time.Second,
					Observer: observer, Logger: slog.New(slog.DiscardHandler),
				})
				require.NoError(t, err)
				wg.Go(func() { _ = worker.Run(runCtx) })
			}
			killed := 0
			wg.Go(func() {
				for range 150 {
					select {
					case <-runCtx.Done():
						return
					case <-time.After(time.Duration(50+rand.IntN(200)) * time.Millisecond):
					}
					n, err := d.KillConnections(ctx)
					if err == nil {
						killed += n
					}
				}
			})
			select {
			case <-done:
			case <-time.After(4 * time.Minute):
				t.Errorf("delivered %d of %d in 4 minutes", delivered.Load(), total)
			}
			stop()
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			dups := 0
			for _, n := range seen {
				dups += n - 1
			}
			t.Logf("%d delivered, %d duplicates, %d connections killed, %d failed claims, %d failed settles",
				delivered.Load(), dups, killed, claimErr.Load(), settleErr.Load())
			require.Empty(t, disorder, "per-key order")
			require.Equal(t, total, len(seen), "nothing lost")
		})
	}
}
