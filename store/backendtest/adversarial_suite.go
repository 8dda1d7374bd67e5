package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// requireStoredText checks what a store keeps as a last error: valid
// UTF-8 within backend.MaxLastErrorBytes.
func requireStoredText(t *testing.T, rec outbox.Record) {
	t.Helper()
	require.True(t, utf8.ValidString(rec.LastError), "%s: last error %q is not valid UTF-8", rec.ID, rec.LastError)
	require.LessOrEqual(t, len(rec.LastError), backend.MaxLastErrorBytes, "%s: last error too long", rec.ID)
}

// hostileOutcomes fails every record of b with a hostile text, retry and
// dead in turn, and publishes the one named published.
func hostileOutcomes(b backend.Batch, published string) []backend.Outcome {
	texts := HostileTexts()
	var out []backend.Outcome
	for i, r := range b.Records {
		o := backend.Outcome{ID: r.ID, Kind: backend.OutcomeRetry, RetryIn: time.Hour, Error: texts[i%len(texts)]}
		switch {
		case r.ID == published:
			o = backend.Outcome{ID: r.ID, Kind: backend.OutcomePublished}
		case i%2 == 1:
			o.Kind, o.RetryIn = backend.OutcomeDead, 0
		}
		out = append(out, o)
	}
	return out
}

func requireHostileOutcomes(t *testing.T, s backend.Store, outcomes []backend.Outcome) {
	t.Helper()
	for _, o := range outcomes {
		rec := get(t, s, o.ID)
		requireStoredText(t, rec)
		switch o.Kind {
		case backend.OutcomePublished:
			require.Equal(t, outbox.StatusPublished, rec.Status, o.ID)
		case backend.OutcomeDead:
			require.Equal(t, outbox.StatusDead, rec.Status, o.ID)
			require.Equal(t, 1, rec.Attempts, o.ID)
		default:
			require.Equal(t, outbox.StatusPending, rec.Status, o.ID)
			require.Equal(t, 1, rec.Attempts, o.ID)
		}
	}
}

// testSettleHostileTexts: whatever text an outcome carries, the store
// records it (made valid and bounded) and every other outcome with it.
func testSettleHostileTexts(t *testing.T, h Harness) {
	n := len(HostileTexts()) + 1
	enqueue(t, h, outbox.EnqueueOptions{}, msgs("h", n)...)
	b := claim(t, h.Store, n, time.Minute)
	require.Len(t, b.Records, n)
	outcomes := hostileOutcomes(b, "h-3")
	res := settle(t, h.Store, b.Token, outcomes...)
	require.Equal(t, backend.SettleResult{Applied: n, Dead: deadIDs(outcomes)}, res)
	requireHostileOutcomes(t, h.Store, outcomes)
}

// deadIDs lists the IDs of the dead outcomes, sorted.
func deadIDs(outcomes []backend.Outcome) []string {
	var out []string
	for _, o := range outcomes {
		if o.Kind == backend.OutcomeDead {
			out = append(out, o.ID)
		}
	}
	slices.Sort(out)
	return out
}

// testCarriedHostileSettle: outcomes a claim records in its own
// transaction may carry any text too, and the claim still claims.
func testCarriedHostileSettle(t *testing.T, h Harness) {
	n := len(HostileTexts())
	enqueue(t, h, outbox.EnqueueOptions{}, msgs("c", n)...)
	b := claim(t, h.Store, n, time.Minute)
	outcomes := hostileOutcomes(b, "")
	enqueue(t, h, outbox.EnqueueOptions{}, msg("next"))
	settled, next := settleAndClaim(t, h.Store, b.Token, backend.ClaimParams{Limit: 10}, outcomes...)
	require.Equal(t, []string{"next"}, ids(next.Records))
	require.Equal(t, backend.SettleResult{Applied: n, Dead: deadIDs(outcomes)}, settled)
	requireHostileOutcomes(t, h.Store, outcomes)
}

// testHostileErrorsNeverStall: sink errors and panics of every hostile
// kind fail their own record only, in full batches whose outcomes the
// next claim records, and permanent ones end dead.
func testHostileErrorsNeverStall(t *testing.T, h Harness) {
	texts := HostileTexts()
	var ms []outbox.Message
	for i := range 3 * len(texts) {
		ms = append(ms, outbox.Message{ID: fmt.Sprintf("s-%03d", i), Type: "T"})
	}
	enqueue(t, h, outbox.EnqueueOptions{}, ms...)
	rec := outboxtest.NewRecorder()
	var mu sync.Mutex
	tries := map[string]int{}
	sink := outbox.SinkFunc(func(ctx context.Context, m outbox.Message) error {
		var i int
		_, _ = fmt.Sscanf(m.ID, "s-%d", &i)
		mu.Lock()
		tries[m.ID]++
		first := tries[m.ID] == 1
		mu.Unlock()
		switch {
		case i%3 == 0:
			return outbox.Permanent(errors.New(texts[i/3]))
		case i%3 == 1 && first:
			return errors.New(texts[i/3])
		case i%3 == 2 && first:
			hostilePanic(i / 3)
		}
		return rec.Publish(ctx, m)
	})
	// Five first tries in a row fail: the worker holds the sink off, and
	// probes it one record at a time until a retry goes through. Probes
	// at every poll keep that quick; the breaker's own schedule is
	// testHeldOffSinkOnlyProbed's business.
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{BatchSize: 4, Breaker: outbox.SinkBreaker{MaxProbeInterval: 20 * time.Millisecond}})
	runWorker(t, w)
	outboxtest.Eventually(t, "every record is published or dead", func() bool {
		for _, m := range ms {
			if get(t, h.Store, m.ID).Status == outbox.StatusPending {
				return false
			}
		}
		return true
	})
	for i, m := range ms {
		r := get(t, h.Store, m.ID)
		requireStoredText(t, r)
		if i%3 == 0 {
			require.Equal(t, outbox.StatusDead, r.Status, m.ID)
			continue
		}
		require.Equal(t, outbox.StatusPublished, r.Status, m.ID)
	}
	require.Zero(t, len(rec.Duplicates()), "no lease was lost, so nothing went out twice")
}

// testOrderedHostileKeys: every key the store accepts is claimed, one
// head at a time, in enqueue order, however it compares.
func testOrderedHostileKeys(t *testing.T, h Harness) {
	keys := acceptedKeys(t, h)
	const perKey = 3
	total := len(keys) * perKey
	for seq := 1; seq < perKey; seq++ {
		var round []outbox.Message
		for k, key := range keys {
			round = append(round, keyedMsg(k, key, seq))
		}
		enqueue(t, h, outbox.EnqueueOptions{}, round...)
	}
	next := map[string]int{}
	done := 0
	for round := 0; done < total && round < 4*total; round++ {
		b := orderedClaim(t, h.Store, 2, time.Minute)
		var outcomes []backend.Outcome
		inBatch := map[string]bool{}
		for _, r := range b.Records {
			if r.Key != "" {
				require.False(t, inBatch[r.Key], "two records of key %q in one ordered claim", r.Key)
				inBatch[r.Key] = true
			}
			var k, seq int
			_, err := fmt.Sscanf(r.ID, "k%d-%d", &k, &seq)
			require.NoError(t, err)
			require.Equal(t, keys[k], r.Key, "%s came back with another key", r.ID)
			if r.Key != "" {
				require.Equal(t, next[r.Key], seq, "key %q: %s before its predecessor", r.Key, r.ID)
				next[r.Key]++
			}
			outcomes = append(outcomes, backend.Outcome{ID: r.ID, Kind: backend.OutcomePublished})
			done++
		}
		if b.Len() > 0 {
			settle(t, h.Store, b.Token, outcomes...)
		}
	}
	for _, key := range keys {
		if key != "" {
			require.Equal(t, perKey, next[key], "key %q was not delivered whole", key)
		}
	}
	require.Equal(t, total, done)
}

// keyedMsg is message seq of the k-th hostile key.
func keyedMsg(k int, key string, seq int) outbox.Message {
	return outbox.Message{ID: fmt.Sprintf("k%03d-%d", k, seq), Key: key, Type: "T", Payload: []byte(key)}
}

// acceptedKeys enqueues message 0 of every hostile key, each in its own
// transaction, and returns the keys the store accepted. A key it rejects
// must be rejected with outbox.ErrInvalidMessage.
func acceptedKeys(t *testing.T, h Harness) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	for k, key := range HostileKeys() {
		tx, err := h.Begin(ctx)
		require.NoError(t, err)
		err = h.Store.Enqueue(ctx, tx, nil, keyedMsg(len(keys), key, 0))
		if err != nil {
			_ = tx.Rollback()
			require.ErrorIs(t, err, outbox.ErrInvalidMessage, "key %d %q", k, key)
			t.Logf("the store rejects key %q: %v", key, err)
			continue
		}
		require.NoError(t, tx.Commit())
		keys = append(keys, key)
	}
	return keys
}

// testDeadIsReportedOnlyWhenRecorded: a sink that ignores its deadline
// outlives the lease; another worker publishes the record meanwhile. The
// permanent error that finally comes back is not recorded (the lease is
// lost), so neither OnDead nor the Observer may report a dead letter.
//
// The lease is cut short in the store (faultyStore.leaseFor), not by
// short worker timeouts: the worker's claim and settle keep the default
// StoreTimeout, so that a loaded machine never fails them, and the test
// waits for events (the sink entered, the record taken over), not for
// time.
func testDeadOnlyWhenRecorded(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("slow"))
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	sink := outbox.SinkFunc(func(context.Context, outbox.Message) error {
		once.Do(func() { close(entered) })
		<-release // ignores its context, as a badly written sink would
		return outbox.Permanent(errors.New("too late: the group is gone"))
	})
	letGo := sync.OnceFunc(func() { close(release) })
	t.Cleanup(letGo) // on a failure path too
	onDead, deadCalls := deadRecorder()
	events := &eventLog{}
	store := &faultyStore{Store: h.Store}
	store.leaseFor.Store(int64(time.Millisecond))
	w := newWorker(t, store, sink, outbox.WorkerOptions{OnDead: onDead, Observer: events})
	type result struct {
		res outbox.BatchResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := w.ProcessBatch(context.Background())
		done <- result{res, err}
	}()
	select {
	case <-entered:
	case r := <-done:
		t.Fatalf("the round ended before it reached the sink: %+v, %v", r.res, r.err)
	}
	other := h.OpenStore(t)
	stolen := reclaim(t, other, "the lease expires and another claim takes the record")
	settle(t, other, stolen.Token, backend.Outcome{ID: "slow", Kind: backend.OutcomePublished})
	letGo()
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, 1, r.res.Stale)
	require.Zero(t, r.res.Dead, "the dead letter was not recorded")
	require.Equal(t, outbox.StatusPublished, get(t, h.Store, "slow").Status)
	require.Empty(t, deadCalls(), "OnDead fired for an outcome the store did not apply")
	require.Zero(t, events.kinds()[outbox.EventDead], "the Observer saw a dead letter the store did not record")
	require.Equal(t, 1, events.count(outbox.EventLeaseLost), "the Observer hears of the lost lease")
}

// testStatsExpiredLeases: a lease that has run out no longer counts as
// leased.
func testStatsExpiredLeases(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("e1"), msg("e2"))
	claim(t, h.Store, 1, time.Millisecond)
	claim(t, h.Store, 1, time.Hour)
	outboxtest.Eventually(t, "the short lease has expired", func() bool {
		st := statsOf(t, h.Store)
		require.Equal(t, 2, st.Pending)
		return st.Leased == 1
	})
}
