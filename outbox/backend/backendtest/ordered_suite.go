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

// orderedStoreTests are the Store contract's promises for ordered claims.
var orderedStoreTests = []struct {
	name string
	fn   func(t *testing.T, h Harness)
}{
	{"OrderedClaimsOnlyKeyHeadsAndUnkeyed", testOrderedHeads},
	{"OrderedFailingHeadHoldsOnlyItsKey", testOrderedFailingHead},
	{"OrderedDeadHeadReleasesItsKey", testOrderedDeadHead},
	{"OrderedClaimByIDsNeedsTheKeyHead", testOrderedIDs},
	{"OrderedClaimsVisitEveryKey", testOrderedFairness},
	{"OrderedClaimNeverReturnsARecordTwice", testOrderedNoRepeats},
}

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

func testOrderedHeads(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, keyed("a1", "A"), keyed("b1", "B"), keyed("a2", "A"), keyed("u1", ""), keyed("a3", "A"), keyed("b2", "B"), keyed("u2", ""))
	b := orderedClaim(t, h.Store, 10, time.Minute)
	require.ElementsMatch(t, []string{"a1", "b1", "u1", "u2"}, ids(b.Records), "each key's head, and every unkeyed record")
	require.Zero(t, orderedClaim(t, h.Store, 10, time.Minute).Len(), "nothing more while the heads are in flight")
	require.NotZero(t, claim(t, h.Store, 10, time.Minute).Len(), "an unordered claim does not wait for heads")

	h2 := h.OpenStore(t)
	enqueue(t, h, outbox.EnqueueOptions{}, keyed("c1", "C"), keyed("c2", "C"))
	b2 := orderedClaim(t, h2, 10, time.Minute)
	require.Equal(t, []string{"c1"}, ids(b2.Records))
	settle(t, h2, b2.Token, backend.Outcome{ID: "c1", Kind: backend.OutcomePublished})
	require.Equal(t, []string{"c2"}, ids(orderedClaim(t, h.Store, 10, time.Minute).Records), "the next of the key, once its head is published")
}

func testOrderedFailingHead(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, keyed("a1", "A"), keyed("a2", "A"), keyed("b1", "B"), keyed("b2", "B"))
	b := orderedClaim(t, h.Store, 10, time.Minute)
	require.ElementsMatch(t, []string{"a1", "b1"}, ids(b.Records))
	settle(t, h.Store, b.Token,
		backend.Outcome{ID: "a1", Kind: backend.OutcomeRetry, Error: "fails", RetryIn: time.Hour},
		backend.Outcome{ID: "b1", Kind: backend.OutcomePublished})
	b = orderedClaim(t, h.Store, 10, time.Minute)
	require.Equal(t, []string{"b2"}, ids(b.Records), "A waits for its failing head; B flows")
}

func testOrderedDeadHead(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, keyed("a1", "A"), keyed("a2", "A"))
	b := orderedClaim(t, h.Store, 10, time.Minute)
	settle(t, h.Store, b.Token, backend.Outcome{ID: "a1", Kind: backend.OutcomeDead, Error: "poison"})
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
	// served first are due again and compete with keys not served yet.
	served := map[string]bool{}
	for range keys / limit {
		b := orderedClaim(t, h.Store, limit, time.Minute)
		require.Len(t, b.Records, limit)
		var outcomes []backend.Outcome
		for _, r := range b.Records {
			served[r.Key] = true
			outcomes = append(outcomes, backend.Outcome{ID: r.ID, Kind: backend.OutcomePublished})
		}
		settle(t, h.Store, b.Token, outcomes...)
	}
	require.Len(t, served, keys, "every key got its turn before any key got a second one")
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
