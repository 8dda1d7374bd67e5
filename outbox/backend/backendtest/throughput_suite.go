package backendtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// throughputStoreTests cover a claim that settles the previous batch.
var throughputStoreTests = []struct {
	name string
	fn   func(t *testing.T, h Harness)
}{
	{"ClaimSettlesThePreviousBatchInItsTransaction", testClaimWithSettle},
}

// throughputWorkerTests cover concurrent publishing, wake-ups and
// carried settlements.
var throughputWorkerTests = []struct {
	name string
	fn   func(t *testing.T, h Harness)
}{
	{"ConcurrencyKeepsEachKeyInOrder", testConcurrency},
	{"NotifyWakesTheWorker", testNotify},
	{"FullBatchOutcomesAreRecordedByTheNextClaim", testCarriedSettle},
}

// settleClaimer returns the store as a backend.SettleClaimer, or skips
// the test for a store that is not one.
func settleClaimer(t *testing.T, s backend.Store) backend.SettleClaimer {
	t.Helper()
	sc, ok := s.(backend.SettleClaimer)
	if !ok {
		t.Skipf("%T does not settle and claim in one transaction", s)
	}
	return sc
}

// settleAndClaim records outcomes under token and claims up to limit.
func settleAndClaim(t *testing.T, s backend.Store, token string, p backend.ClaimParams, outcomes ...backend.Outcome) (backend.SettleResult, backend.Batch) {
	t.Helper()
	if p.Owner == "" {
		p.Owner, p.LeaseFor = "w", time.Minute
	}
	res, b, err := settleClaimer(t, s).SettleAndClaim(context.Background(), backend.Settlement{Token: token, Outcomes: outcomes}, p)
	require.NoError(t, err)
	return res, b
}

func testClaimWithSettle(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("x1"), msg("x2"), msg("x3"), msg("x4"))
	b1 := claim(t, h.Store, 2, time.Minute)
	require.Len(t, b1.Records, 2)

	settled, b2 := settleAndClaim(t, h.Store, b1.Token, backend.ClaimParams{Limit: 2},
		backend.Outcome{ID: "x1", Kind: backend.OutcomePublished}, backend.Outcome{ID: "x2", Kind: backend.OutcomeRetry, Error: "e", RetryIn: time.Hour})
	require.Equal(t, backend.SettleResult{Applied: 2}, settled)
	require.Equal(t, []string{"x3", "x4"}, ids(b2.Records))
	require.Equal(t, outbox.StatusPublished, get(t, h.Store, "x1").Status)
	require.Equal(t, 1, get(t, h.Store, "x2").Attempts)

	// Fenced like Settle; and nothing to claim still records the outcomes.
	settled, b3 := settleAndClaim(t, h.Store, b2.Token, backend.ClaimParams{Limit: 2},
		backend.Outcome{ID: "x3", Kind: backend.OutcomePublished}, backend.Outcome{ID: "x1", Kind: backend.OutcomeDead, Error: "late"})
	require.Zero(t, b3.Len())
	require.Equal(t, backend.SettleResult{Applied: 1, Stale: 1}, settled)
	require.Equal(t, outbox.StatusPublished, get(t, h.Store, "x3").Status)
	require.Equal(t, outbox.StatusPublished, get(t, h.Store, "x1").Status, "a stale outcome changes nothing")

	// Ordered: the key a published head frees is claimable in the same call.
	enqueue(t, h, outbox.EnqueueOptions{}, keyed("k1", "K"), keyed("k2", "K"))
	bk := orderedClaim(t, h.Store, 10, time.Minute)
	require.Equal(t, []string{"k1"}, ids(bk.Records))
	_, bk2 := settleAndClaim(t, h.Store, bk.Token, backend.ClaimParams{Limit: 10, Ordered: true},
		backend.Outcome{ID: "k1", Kind: backend.OutcomePublished})
	require.Equal(t, []string{"k2"}, ids(bk2.Records))
}

// slowSink takes a while per call and records concurrency per key. Its
// calls wait until gather of them have been in flight at once (or
// outboxtest.WaitTimeout has passed), so that a worker that makes that
// many calls at once is seen to do so however its goroutines are
// scheduled: with the delay alone, a loaded machine could start the last
// of them after the first had ended.
type slowSink struct {
	delay    time.Duration
	gather   int
	gathered chan struct{}
	once     sync.Once
	mu       sync.Mutex
	inFlight int
	maxSeen  int
	perKey   map[string]int
	overlap  int
	order    map[string][]string
}

func (s *slowSink) Publish(_ context.Context, m outbox.Message) error {
	s.mu.Lock()
	s.inFlight++
	s.maxSeen = max(s.maxSeen, s.inFlight)
	s.perKey[m.Key]++
	if s.perKey[m.Key] > 1 {
		s.overlap++
	}
	s.order[m.Key] = append(s.order[m.Key], m.ID)
	if s.inFlight == s.gather {
		s.once.Do(func() { close(s.gathered) })
	}
	s.mu.Unlock()
	select {
	case <-s.gathered:
	case <-time.After(outboxtest.WaitTimeout):
		s.once.Do(func() { close(s.gathered) }) // the test fails on maxSeen, once
	}
	time.Sleep(s.delay) // the sink's latency, not synchronisation
	s.mu.Lock()
	s.inFlight--
	s.perKey[m.Key]--
	s.mu.Unlock()
	return nil
}

func testConcurrency(t *testing.T, h Harness) {
	var ms []outbox.Message // each key's records next to each other in the batch
	for k := range 8 {
		for i := range 5 {
			ms = append(ms, outbox.Message{ID: fmt.Sprintf("c-%d-%d", k, i), Key: fmt.Sprintf("key-%d", k), Type: "T"})
		}
	}
	enqueue(t, h, outbox.EnqueueOptions{}, ms...)
	sink := &slowSink{delay: 20 * time.Millisecond, gather: 4, gathered: make(chan struct{}), perKey: map[string]int{}, order: map[string][]string{}}
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{BatchSize: 40, Concurrency: 4})
	res := processBatch(t, w)
	require.Equal(t, 4, sink.maxSeen, "up to Concurrency calls at once")
	require.Equal(t, 40, res.Published)
	require.Zero(t, sink.overlap, "never two calls for one key at once")
	for k := range 8 {
		var want []string
		for i := range 5 {
			want = append(want, fmt.Sprintf("c-%d-%d", k, i))
		}
		require.Equal(t, want, sink.order[fmt.Sprintf("key-%d", k)], "a key's records in order")
	}
}

func testNotify(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("primer"))
	rec := outboxtest.NewRecorder()
	w := newWorker(t, h.Store, rec, outbox.WorkerOptions{PollInterval: time.Hour})
	runWorker(t, w)
	waitDistinct(t, rec, 1) // the first round is over; the next is an hour away
	enqueue(t, h, outbox.EnqueueOptions{}, msg("woken"))
	w.Notify()
	waitDistinct(t, rec, 2)
}

func testCarriedSettle(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msgs("full", 10)...)
	rec := outboxtest.NewRecorder()
	w := newWorker(t, h.Store, rec, outbox.WorkerOptions{BatchSize: 5, PollInterval: time.Hour})
	stop := runWorker(t, w)
	waitDistinct(t, rec, 10)
	// Two full batches: their outcomes ride on the following claims; the
	// last one on a claim that finds nothing, or on the way out.
	outboxtest.Eventually(t, "every record is published", func() bool {
		for _, m := range msgs("full", 10) {
			if get(t, h.Store, m.ID).Status != outbox.StatusPublished {
				return false
			}
		}
		return true
	})
	stop()
	require.Equal(t, 10, rec.Len())
}
