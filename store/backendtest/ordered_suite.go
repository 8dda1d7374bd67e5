package backendtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

func keyed(id, key string) outbox.Message {
	return outbox.Message{ID: id, Key: key, Type: "T", Payload: []byte(id)}
}

func orderedClaim(t *testing.T, s backend.Store, limit int, lease time.Duration) backend.Batch {
	t.Helper()
	b, err := s.Claim(context.Background(), backend.ClaimParams{Owner: "ordered", Limit: limit, LeaseFor: lease, Ordered: true})
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, r := range b.Records {
		require.False(t, seen[r.ID], "%s twice in one batch", r.ID)
		seen[r.ID] = true
	}
	return b
}

// An ordered claim takes, of each key, its head (oldest pending record)
// and possibly the records after it, in order (a store that reads its
// table as a log takes what its range holds; one that walks the keys'
// heads takes one); of unkeyed records, any. keyPrefixes checks that b
// holds, of each key of keys, a prefix of its records (non-empty where
// nonEmpty), and every one of unkeyed; it returns how many of each key
// it took.
func keyPrefixes(t *testing.T, b backend.Batch, keys map[string][]string, unkeyed []string, nonEmpty bool) map[string]int {
	t.Helper()
	got := map[string][]string{}
	var free []string
	for _, r := range b.Records {
		if r.Key == "" {
			free = append(free, r.ID)
			continue
		}
		got[r.Key] = append(got[r.Key], r.ID)
	}
	require.ElementsMatch(t, unkeyed, free, "every unkeyed record")
	took := map[string]int{}
	for k, want := range keys {
		g := got[k]
		if nonEmpty {
			require.NotEmpty(t, g, "key %s: its head", k)
		}
		require.LessOrEqual(t, len(g), len(want), "key %s", k)
		require.Equal(t, want[:len(g)], g, "key %s: its oldest records, in order", k)
		took[k] = len(g)
		delete(got, k)
	}
	require.Empty(t, got, "no record of another key")
	return took
}

// settleOrdered settles b: each record published, except that ids in
// fail get outcome kind (and the rest of their key is released, as the
// worker does).
func settleOrdered(t *testing.T, s backend.Store, b backend.Batch, fail map[string]backend.Outcome) {
	t.Helper()
	held := map[string]bool{}
	var os []backend.Outcome
	for _, r := range b.Records {
		switch o, failed := fail[r.ID]; {
		case held[r.Key]:
			os = append(os, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomeRelease})
		case failed:
			o.ID, o.Seq = r.ID, r.Seq
			os = append(os, o)
			held[r.Key] = r.Key != ""
		default:
			os = append(os, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomePublished})
		}
	}
	settle(t, s, b.Token, os...)
}

func testOrderedHeads(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, keyed("a1", "A"), keyed("b1", "B"), keyed("a2", "A"), keyed("u1", ""), keyed("a3", "A"), keyed("b2", "B"), keyed("u2", ""))
	b := orderedClaim(t, h.Store, 10, time.Minute)
	took := keyPrefixes(t, b, map[string][]string{"A": {"a1", "a2", "a3"}, "B": {"b1", "b2"}}, []string{"u1", "u2"}, true)
	require.Zero(t, orderedClaim(t, h.Store, 10, time.Minute).Len(), "nothing more while the keys are in flight")
	if took["A"]+took["B"] < 5 {
		require.NotZero(t, claim(t, h.Store, 10, time.Minute).Len(), "an unordered claim does not wait for the keys in flight")
	}

	h2 := h.OpenStore(t)
	enqueue(t, h, outbox.EnqueueOptions{}, keyed("c1", "C"), keyed("c2", "C"))
	b2 := orderedClaim(t, h2, 10, time.Minute)
	tookC := keyPrefixes(t, b2, map[string][]string{"C": {"c1", "c2"}}, nil, true)
	settleOrdered(t, h2, b2, nil)
	if tookC["C"] == 1 {
		require.Equal(t, []string{"c2"}, ids(orderedClaim(t, h.Store, 10, time.Minute).Records), "the next of the key, once its head is published")
	}
}

func testOrderedFailingHead(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, keyed("a1", "A"), keyed("a2", "A"), keyed("b1", "B"), keyed("b2", "B"))
	b := orderedClaim(t, h.Store, 10, time.Minute)
	took := keyPrefixes(t, b, map[string][]string{"A": {"a1", "a2"}, "B": {"b1", "b2"}}, nil, true)
	settleOrdered(t, h.Store, b, map[string]backend.Outcome{"a1": {Kind: backend.OutcomeRetry, Error: "fails", RetryIn: time.Hour}})
	b = orderedClaim(t, h.Store, 10, time.Minute)
	want := []string{}
	if took["B"] == 1 {
		want = []string{"b2"}
	}
	require.Equal(t, want, append([]string{}, ids(b.Records)...), "A waits for its failing head; B flows")
}

func testOrderedDeadHead(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, keyed("a1", "A"), keyed("a2", "A"))
	b := orderedClaim(t, h.Store, 10, time.Minute)
	keyPrefixes(t, b, map[string][]string{"A": {"a1", "a2"}}, nil, true)
	settleOrdered(t, h.Store, b, map[string]backend.Outcome{"a1": {Kind: backend.OutcomeDead, Error: "poison"}})
	require.Equal(t, []string{"a2"}, ids(orderedClaim(t, h.Store, 10, time.Minute).Records), "a dead letter no longer holds its key")
}

func testOrderedIDs(t *testing.T, h Harness) {
	ctx := context.Background()
	// One command's messages, head-started for the writer: claimable by
	// IDs, in order, as they are the key's oldest pending records.
	enqueue(t, h, outbox.EnqueueOptions{HeadStart: time.Hour}, keyed("a1", "A"), keyed("a2", "A"), keyed("x1", ""))
	b, err := h.Store.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 3, LeaseFor: time.Minute, IDs: []string{"a2", "a1", "x1"}, Ordered: true})
	require.NoError(t, err)
	require.Equal(t, []string{"a1", "a2", "x1"}, ids(b.Records))

	// An older message of the key still waits: the writer must not
	// publish ahead of it.
	enqueue(t, h, outbox.EnqueueOptions{HeadStart: time.Hour}, keyed("c1", "C"))
	enqueue(t, h, outbox.EnqueueOptions{HeadStart: time.Hour}, keyed("c2", "C"), keyed("c3", "C"), keyed("d1", "D"))
	b, err = h.Store.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 3, LeaseFor: time.Minute, IDs: []string{"c2", "c3", "d1"}, Ordered: true})
	require.NoError(t, err)
	require.Equal(t, []string{"d1"}, ids(b.Records), "C's c1 is older and pending")
	b, err = h.Store.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 1, LeaseFor: time.Minute, IDs: []string{"c3"}, Ordered: true})
	require.NoError(t, err)
	require.Zero(t, b.Len(), "not the second without the first")
}

func testOrderedFairness(t *testing.T, h Harness) {
	const keys, perKey, limit = 300, 3, 50
	var ms []outbox.Message
	for k := range keys {
		for n := range perKey {
			ms = append(ms, keyed(fmt.Sprintf("m-%d-%d", k, n), fmt.Sprintf("key-%03d", k)))
		}
	}
	enqueue(t, h, outbox.EnqueueOptions{}, ms...)
	// Publish every claim at once, so that the next messages of the keys
	// served first are due again and compete with keys not served yet:
	// every key is served within as many full claims as it takes to
	// deliver everything (a store walking the keys' heads serves each
	// key once before any twice; one reading a log, in order).
	served := map[string]bool{}
	for range keys * perKey / limit {
		if len(served) == keys {
			break
		}
		b := orderedClaim(t, h.Store, limit, time.Minute)
		require.Len(t, b.Records, limit)
		var outcomes []backend.Outcome
		for _, r := range b.Records {
			served[r.Key] = true
			outcomes = append(outcomes, backend.Outcome{ID: r.ID, Kind: backend.OutcomePublished})
		}
		settle(t, h.Store, b.Token, outcomes...)
	}
	require.Len(t, served, keys, "every key got its turn")
}

// testOrderedNoRepeats: a claim whose walk over the keys wraps around to
// the first key, with few due heads, must not take its own rows again.
func testOrderedNoRepeats(t *testing.T, h Harness) {
	var ms []outbox.Message
	for k := range 100 {
		ms = append(ms, keyed(fmt.Sprintf("n-%03d", k), fmt.Sprintf("key-%03d", k)))
	}
	enqueue(t, h, outbox.EnqueueOptions{}, ms...)
	require.Len(t, orderedClaim(t, h.Store, 30, time.Minute).Records, 30) // keys 000-029, in flight
	require.Len(t, orderedClaim(t, h.Store, 50, time.Minute).Records, 50) // keys 030-079
	// 20 due heads remain, after the cursor; the walk wraps to keys whose
	// heads are all in flight, and past them to its own rows.
	require.Len(t, orderedClaim(t, h.Store, 50, time.Minute).Records, 20)
}

// testOrderedRequeueWaits: a dead letter requeued while a later record
// of its key is in flight is its key's oldest pending record again, and
// an ordered claim still must not put it in flight beside the later one:
// not while that one is in flight from the log, nor after it failed once
// and is in flight again (a store that keeps failed records apart, and
// only looks there for older ones, misses the second).
func testOrderedRequeueWaits(t *testing.T, h Harness) {
	rq, ok := h.Store.(backend.Requeuer)
	if !ok {
		t.Skip("the store has no Requeue")
	}
	ctx := context.Background()
	enqueue(t, h, outbox.EnqueueOptions{}, keyed("k1", "K"), keyed("k2", "K"))
	b := orderedClaim(t, h.Store, 1, time.Hour)
	require.Equal(t, []string{"k1"}, ids(b.Records))
	settle(t, h.Store, b.Token, backend.Outcome{ID: "k1", Seq: b.Records[0].Seq, Kind: backend.OutcomeDead, Error: "x"})
	b = orderedClaim(t, h.Store, 10, time.Hour)
	require.Equal(t, []string{"k2"}, ids(b.Records))
	require.NoError(t, rq.Requeue(ctx, "k1"))
	require.Zero(t, orderedClaim(t, h.Store, 10, time.Hour).Len(), "k2 is in flight from the log: k1 must wait")
	settle(t, h.Store, b.Token, backend.Outcome{ID: "k2", Seq: b.Records[0].Seq, Kind: backend.OutcomeRetry, Error: "once"})

	// k1 is K's head again; dead again, then k2 retried, in flight, and
	// k1 requeued behind it.
	b = orderedClaim(t, h.Store, 1, time.Hour)
	require.Equal(t, []string{"k1"}, ids(b.Records))
	settle(t, h.Store, b.Token, backend.Outcome{ID: "k1", Seq: b.Records[0].Seq, Kind: backend.OutcomeDead, Error: "x"})
	inFlight := orderedClaim(t, h.Store, 10, time.Hour)
	require.Equal(t, []string{"k2"}, ids(inFlight.Records), "k2 again, after its failure")
	require.NoError(t, rq.Requeue(ctx, "k1"))
	require.Zero(t, orderedClaim(t, h.Store, 10, time.Hour).Len(), "k2 is in flight after a failure: k1 must wait")
	settle(t, h.Store, inFlight.Token, backend.Outcome{ID: "k2", Seq: inFlight.Records[0].Seq, Kind: backend.OutcomePublished})
	require.Equal(t, []string{"k1"}, ids(orderedClaim(t, h.Store, 10, time.Hour).Records), "k2 delivered: k1 is claimed at once")
}

// testOrderedTakeOverInParts: a batch whose lease ran out, taken over by
// a claim of a smaller limit, is taken in parts. While the first part is
// out, no other claim may take the rest: a key's messages are in both.
func testOrderedTakeOverInParts(t *testing.T, h Harness) {
	ctx := context.Background()
	enqueue(t, h, outbox.EnqueueOptions{}, keyed("k1", "K"), keyed("k2", "K"), keyed("k3", "K"))
	b := orderedClaim(t, h.Store, 3, time.Millisecond)
	if b.Len() < 3 {
		t.Skipf("the store's ordered claim took %d of a key's 3 messages: nothing to take over in parts", b.Len())
	}
	var first backend.Batch
	require.Eventually(t, func() bool {
		var err error
		first, err = h.Store.Claim(ctx, backend.ClaimParams{Owner: "a", Limit: 2, LeaseFor: time.Minute, Ordered: true})
		require.NoError(t, err)
		return first.Len() > 0
	}, 30*time.Second, 5*time.Millisecond, "the first claim's lease runs out")
	require.NotEmpty(t, first.Records)
	require.Zero(t, orderedClaim(t, h.Store, 10, time.Minute).Len(), "K's messages are out (%v): the rest must wait", ids(first.Records))
}

// testOrderedTakeOverOfTheRestWaits: a batch whose lease ran out is
// taken over in parts by a claim of a smaller limit, and the first
// part's message of a key fails. The rest, taken over once its own lease
// runs out, must hold that key's next message back until the failed one
// is delivered (before the fix, both SQL stores handed it out beside the
// retry).
func testOrderedTakeOverOfTheRestWaits(t *testing.T, h Harness) {
	ctx := context.Background()
	enqueue(t, h, outbox.EnqueueOptions{}, keyed("k1", "K"), keyed("x1", "X"), keyed("y1", "Y"), keyed("k2", "K"))
	short := 200 * time.Millisecond
	if b := orderedClaim(t, h.Store, 10, short); b.Len() < 4 {
		t.Skipf("the store's ordered claim took %d of the 4 messages: nothing to take over in parts", b.Len())
	}
	var first backend.Batch
	require.Eventually(t, func() bool {
		var err error
		first, err = h.Store.Claim(ctx, backend.ClaimParams{Owner: "a", Limit: 2, LeaseFor: short, Ordered: true})
		require.NoError(t, err)
		return first.Len() > 0
	}, 30*time.Second, 5*time.Millisecond, "the first claim's lease runs out")
	require.Equal(t, []string{"k1", "x1"}, ids(first.Records))
	settle(t, h.Store, first.Token,
		backend.Outcome{ID: "k1", Seq: first.Records[0].Seq, Kind: backend.OutcomeRetry, Error: "down", RetryIn: 300 * time.Millisecond},
		backend.Outcome{ID: "x1", Seq: first.Records[1].Seq, Kind: backend.OutcomePublished})

	// Drain: k2 must not be handed out before k1 is delivered.
	k1Done := false
	for deadline := time.Now().Add(30 * time.Second); get(t, h.Store, "k2").Status != outbox.StatusPublished; {
		require.False(t, time.Now().After(deadline), "not every message delivered within 30s")
		b, err := h.Store.Claim(ctx, backend.ClaimParams{Owner: "b", Limit: 10, LeaseFor: time.Minute, Ordered: true})
		require.NoError(t, err)
		var os []backend.Outcome
		for _, r := range b.Records {
			require.False(t, r.ID == "k2" && !k1Done, "k2 handed out (%v) while k1 waits for its retry", ids(b.Records))
			os = append(os, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomePublished})
		}
		if len(os) > 0 {
			settle(t, h.Store, b.Token, os...)
		} else {
			time.Sleep(5 * time.Millisecond) // polling: the retry and the rest's lease are due soon
		}
		k1Done = get(t, h.Store, "k1").Status == outbox.StatusPublished
	}
}

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

// testClaimMore: Batch.More says the claim left due records it could
// have taken but for its limit or, ordered, because their key's head is
// in the batch; it is false when the claim took everything that was due.
func testClaimMore(t *testing.T, h Harness) {
	ordered := func(limit int) backend.Batch { return orderedClaim(t, h.Store, limit, time.Minute) }
	publishAll := func(b backend.Batch) { settle(t, h.Store, b.Token, published(b)...) }
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
