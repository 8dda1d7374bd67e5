package mysql_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// Retention running flat out against live claims and settles: no
// deadlock or lock wait error reaches either side, and nothing that was
// not published is deleted (every message still reaches the sink, and
// the dead letters survive).
func TestRetentionConcurrentWithClaimsAndSettles(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "dead-1", Type: "T"}, outbox.Message{ID: "dead-2", Type: "T"}))
	kill(t, s, "poison", "dead-1", "dead-2")

	rec := outboxtest.NewRecorder()
	var roundErrors []error
	var mu sync.Mutex
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range 2 {
		w, err := outbox.NewWorker(newStore(t, d.Open(t)), rec, outbox.WorkerOptions{
			NodeID: fmt.Sprintf("w%d", i), BatchSize: 20, PollInterval: 10 * time.Millisecond, Logger: outboxtest.Logger(t),
		})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				if _, err := w.ProcessBatch(runCtx); err != nil && runCtx.Err() == nil {
					mu.Lock()
					roundErrors = append(roundErrors, err)
					mu.Unlock()
				}
			}
		}()
	}
	purger := newStore(t, d.Open(t))
	purged, purges := 0, 0
	var purgeErrors []error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for runCtx.Err() == nil {
			n, err := purger.PurgePublished(runCtx, time.Microsecond, 50)
			if runCtx.Err() != nil {
				return
			}
			if err != nil {
				purgeErrors = append(purgeErrors, err)
			}
			purged += n
			purges++
		}
	}()

	const n = 3000
	for i := range n / 100 {
		var ms []outbox.Message
		for j := range 100 {
			ms = append(ms, outbox.Message{ID: fmt.Sprintf("m-%d-%d", i, j), Key: fmt.Sprintf("k%d", j%7), Type: "T"})
		}
		require.NoError(t, s.Enqueue(ctx, d.DB, nil, ms...))
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, rec.WaitDistinct(waitCtx, n), "a deleted pending record would never arrive")
	stop()
	wg.Wait()
	require.Empty(t, roundErrors, "claims and settles never saw an error")
	require.Empty(t, purgeErrors, "retention never surfaced a deadlock")
	for _, id := range []string{"dead-1", "dead-2"} {
		r, err := s.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, outbox.StatusDead, r.Status)
	}
	t.Logf("%d purge calls deleted %d published rows while %d messages were delivered", purges, purged, n)
	require.Positive(t, purged)
}
