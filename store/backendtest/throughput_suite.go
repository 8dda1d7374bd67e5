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

// settleAndClaim records outcomes under token and claims up to limit,
// or skips t for a store that is not a backend.SettleClaimer.
func settleAndClaim(t *testing.T, s backend.Store, token string, p backend.ClaimParams, outcomes ...backend.Outcome) (backend.SettleResult, backend.Batch) {
	t.Helper()
	if p.Owner == "" {
		p.Owner, p.LeaseFor = "w", time.Minute
	}
	sc := storeAs[backend.SettleClaimer](t, s, "settle and claim in one transaction")
	res, b, err := sc.SettleAndClaim(context.Background(), backend.Settlement{Token: token, Outcomes: outcomes}, p)
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
	if keyPrefixes(t, bk, map[string][]string{"K": {"k1", "k2"}}, nil, true)["K"] == 2 {
		return // a store that took the key's two records at once
	}
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

// testClaimMore: Batch.More says the claim left due records it could
// have taken but for its limit or, ordered, because their key's head is
// in the batch; it is false when the claim took everything that was due.
func testClaimMore(t *testing.T, h Harness) {
	ordered := func(limit int) backend.Batch {
		t.Helper()
		b, err := h.Store.Claim(context.Background(), backend.ClaimParams{Owner: "w", Limit: limit, LeaseFor: time.Minute, Ordered: true})
		require.NoError(t, err)
		return b
	}
	publishAll := func(b backend.Batch) {
		t.Helper()
		var os []backend.Outcome
		for _, r := range b.Records {
			os = append(os, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomePublished})
		}
		settle(t, h.Store, b.Token, os...)
	}
	enqueue(t, h, outbox.EnqueueOptions{}, keyed("a1", "A"), keyed("a2", "A"), keyed("b1", "B"), keyed("u1", ""), keyed("u2", ""))
	b := claim(t, h.Store, 3, time.Minute)
	require.Len(t, b.Records, 3)
	require.True(t, b.More, "unordered, the limit left two due records")
	publishAll(b)
	b = claim(t, h.Store, 10, time.Minute)
	require.Len(t, b.Records, 2)
	require.False(t, b.More, "unordered, everything due was taken")
	publishAll(b)

	enqueue(t, h, outbox.EnqueueOptions{}, keyed("c1", "C"), keyed("c2", "C"), keyed("d1", "D"), keyed("u3", ""))
	b = ordered(10)
	if keyPrefixes(t, b, map[string][]string{"C": {"c1", "c2"}, "D": {"d1"}}, []string{"u3"}, true)["C"] == 1 {
		require.True(t, b.More, "ordered, c2 is due once c1 is settled")
		publishAll(b)
		b = ordered(10)
		require.Equal(t, []string{"c2"}, ids(b.Records))
	}
	require.False(t, b.More, "ordered, nothing is left behind the records taken")
	publishAll(b)
	require.False(t, ordered(10).More, "nothing due")
}

// testOrderedKeepsUp: an ordered worker claims one record per key at a
// time, so that with few keys its batches are never full; after a round
// that left due work behind its heads it claims again at once, not after
// PollInterval (an hour here: without that, 3 keys of 40 records each
// took 40 poll intervals to drain; on MariaDB at 200 events/s a named
// consumer's backlog grew without bound at the default settings).
func testOrderedKeepsUp(t *testing.T, h Harness) {
	const perKey = 40
	var ms []outbox.Message
	for i := range perKey {
		for _, k := range []string{"A", "B", "C"} {
			ms = append(ms, keyed(fmt.Sprintf("%s-%02d", k, i), k))
		}
	}
	enqueue(t, h, outbox.EnqueueOptions{}, ms...)
	var (
		mu  sync.Mutex
		got = map[string][]string{}
		n   int
	)
	done := make(chan struct{})
	sink := outbox.SinkFunc(func(_ context.Context, m outbox.Message) error {
		mu.Lock()
		defer mu.Unlock()
		got[m.Key] = append(got[m.Key], m.ID)
		if n++; n == len(ms) {
			close(done)
		}
		return nil
	})
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{Ordering: true, PollInterval: time.Hour, BatchSize: 100})
	stop := runWorker(t, w)
	defer stop()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("delivered %d of %d: the worker waited for PollInterval with due work left", n, len(ms))
	}
	stop()
	for _, k := range []string{"A", "B", "C"} {
		want := make([]string, perKey)
		for i := range want {
			want[i] = fmt.Sprintf("%s-%02d", k, i)
		}
		require.Equal(t, want, got[k], "key %s in order", k)
	}
}
