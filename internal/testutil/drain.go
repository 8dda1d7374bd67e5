package testutil

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// UpgradeRows is how many messages the stores' TestUpgradeOfALargeTable
// writes before the upgrade: OUTBOXRELAY_UPGRADE_ROWS, or 20,000 (what
// CI runs; docs/upgrades.md gives the figures of a run with 1,000,000).
func UpgradeRows(t testing.TB) int {
	t.Helper()
	s := os.Getenv("OUTBOXRELAY_UPGRADE_ROWS")
	if s == "" {
		return 20_000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1000 {
		t.Fatalf("testutil: OUTBOXRELAY_UPGRADE_ROWS=%q: a number of at least 1000", s)
	}
	return n
}

// RequireDrainedInOrder claims c's records, ordered, and settles them
// published until every one of want is in (then one claim more), and
// fails the test unless it got exactly want, each once, and every key's
// records in the order they were written: "m-<n>" (written before an
// upgrade) before "w-<n>" (a writer's during it), each by its number.
func RequireDrainedInOrder(t testing.TB, c backend.Store, want []string) {
	t.Helper()
	ctx := context.Background()
	var got []string
	keys := map[string][]string{}
	deadline := time.Now().Add(5 * time.Minute)
	// Until every message is in, then one claim more (a gap a writer
	// left may make a claim wait, or come back empty, for a while).
	for extra := 0; extra < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("testutil: drained %d of %d in 5 minutes", len(got), len(want))
		}
		if len(got) >= len(want) {
			extra++
		}
		b, err := c.Claim(ctx, backend.ClaimParams{Owner: "drain", Limit: 1000, LeaseFor: time.Minute, Ordered: true})
		if err != nil {
			t.Fatalf("testutil: claim: %v", err)
		}
		if b.Len() == 0 {
			continue
		}
		outcomes := make([]backend.Outcome, len(b.Records))
		for i, r := range b.Records {
			got = append(got, r.ID)
			if r.Key != "" {
				keys[r.Key] = append(keys[r.Key], r.ID)
			}
			outcomes[i] = backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomePublished}
		}
		if _, err := c.Settle(ctx, b.Token, outcomes); err != nil {
			t.Fatalf("testutil: settle: %v", err)
		}
	}
	if g, w := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want)); !slices.Equal(g, w) {
		t.Fatalf("testutil: drained %d records, want %d, each once (missing or extra: %v)", len(got), len(want), symmetricDiff(g, w))
	}
	for key, ids := range keys {
		if !slices.IsSortedFunc(ids, writeOrder) {
			t.Fatalf("testutil: key %s out of order: %v", key, ids)
		}
	}
}

// writeOrder orders "m-<n>" before "w-<n>", each by its number.
func writeOrder(a, b string) int {
	num := func(s string) (int, int) {
		phase := 0
		if strings.HasPrefix(s, "w-") {
			phase = 1
		}
		v, _ := strconv.Atoi(s[2:])
		return phase, v
	}
	pa, va := num(a)
	pb, vb := num(b)
	if pa != pb {
		return pa - pb
	}
	return va - vb
}

// symmetricDiff is what one of two sorted lists has and the other not
// (a duplicate counts), at most 20 of it.
func symmetricDiff(a, b []string) []string {
	var out []string
	i, j := 0, 0
	for (i < len(a) || j < len(b)) && len(out) < 20 {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, "+"+a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, "-"+b[j])
			j++
		default:
			i++
			j++
		}
	}
	return out
}
