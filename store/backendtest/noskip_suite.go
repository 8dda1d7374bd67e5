package backendtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// noSkipWait bounds how long the suite waits for a message to be
// claimable once its transaction has ended.
const noSkipWait = 30 * time.Second

// drainUntil claims (and settles published) until want holds every ID
// it names, or noSkipWait passes; it returns every ID claimed, in
// order, duplicates included.
func drainUntil(t *testing.T, s backend.Store, want map[string]bool) []string {
	t.Helper()
	var got []string
	seen := map[string]bool{}
	deadline := time.Now().Add(noSkipWait)
	for {
		missing := 0
		for id := range want {
			if !seen[id] {
				missing++
			}
		}
		if missing == 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d committed message(s) never claimed within %v (claimed %v)", missing, noSkipWait, got)
		}
		b := claim(t, s, 100, time.Minute)
		for _, r := range b.Records {
			got = append(got, r.ID)
			seen[r.ID] = true
		}
		if b.Len() > 0 {
			settle(t, s, b.Token, published(b)...)
			continue
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// published is the published outcome of every record of b.
func published(b backend.Batch) []backend.Outcome {
	out := make([]backend.Outcome, 0, b.Len())
	for _, r := range b.Records {
		out = append(out, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomePublished})
	}
	return out
}

// A transaction that enqueued first and commits last: the message
// committed meanwhile may be claimed first (or held back until the open
// transaction ends: a store that reads its outbox as a log may), the open
// one's is not claimed before it commits, and both are claimed after.
func testLateCommitNotSkipped(t *testing.T, h Harness) {
	ctx := context.Background()
	early, err := h.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = early.Rollback() }()
	require.NoError(t, h.Store.Enqueue(ctx, early, nil, msg("enqueued-first")))
	enqueue(t, h, outbox.EnqueueOptions{}, msg("committed-first"))

	var got []string
	for range 5 {
		b := claim(t, h.Store, 10, time.Minute)
		got = append(got, ids(b.Records)...)
		if b.Len() > 0 {
			settle(t, h.Store, b.Token, published(b)...)
		}
	}
	require.NotContains(t, got, "enqueued-first", "a message of an open transaction was claimed")
	require.NoError(t, early.Commit())
	want := map[string]bool{"enqueued-first": true}
	if len(got) == 0 {
		want["committed-first"] = true
	}
	got = append(got, drainUntil(t, h.Store, want)...)
	require.ElementsMatch(t, []string{"enqueued-first", "committed-first"}, got, "each claimed once")
}

// Messages of a transaction that rolled back, and of an Enqueue that
// failed (a duplicate ID), leave nothing for good in the way of those
// committed after them.
func testRolledBackDoesNotStall(t *testing.T, h Harness) {
	ctx := context.Background()
	enqueue(t, h, outbox.EnqueueOptions{}, msg("first"))
	rolled, err := h.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, h.Store.Enqueue(ctx, rolled, nil, msgs("rolled-back", 5)...))
	failed, err := h.Begin(ctx)
	require.NoError(t, err)
	dups := append(msgs("fails", 50), msg("first"))
	require.ErrorIs(t, h.Store.Enqueue(ctx, failed, nil, dups...), outbox.ErrDuplicateID)
	require.NoError(t, h.Store.Enqueue(ctx, failed, nil, msg("after-the-failure")))
	require.NoError(t, failed.Commit())
	require.NoError(t, rolled.Rollback())
	enqueue(t, h, outbox.EnqueueOptions{}, msg("last"))

	got := drainUntil(t, h.Store, map[string]bool{"first": true, "after-the-failure": true, "last": true})
	for _, id := range got {
		require.NotRegexp(t, `^(rolled-back|fails)-`, id, "a message that was never committed was claimed")
	}
}

// Writers commit in an order of their own (transactions of one to three
// messages, held open for a while, one in ten rolled back) while two
// claimers drain: every committed message is claimed, no other.
func testNoSkipConcurrentWriters(t *testing.T, h Harness) {
	ctx := context.Background()
	const writers, txPerWriter = 4, 25
	var (
		mu        sync.Mutex
		committed = map[string]bool{}
		claimed   = map[string]bool{}
		wg        sync.WaitGroup
		done      = make(chan struct{})
		errs      = make(chan error, writers+2)
	)
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 38))
			for i := range txPerWriter {
				tx, err := h.Begin(ctx)
				if err != nil {
					errs <- err
					return
				}
				var ids []string
				for j := range 1 + rng.IntN(3) {
					id := fmt.Sprintf("w%d-%d-%d", w, i, j)
					if err := h.Store.Enqueue(ctx, tx, nil, msg(id)); err != nil {
						_ = tx.Rollback()
						errs <- err
						return
					}
					ids = append(ids, id)
				}
				time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
				if rng.IntN(10) == 0 {
					if err := tx.Rollback(); err != nil {
						errs <- err
						return
					}
					continue
				}
				if err := tx.Commit(); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, id := range ids {
					committed[id] = true
				}
				mu.Unlock()
			}
		})
	}
	var claimers sync.WaitGroup
	for range 2 {
		claimers.Go(func() {
			for {
				b, err := h.Store.Claim(ctx, backend.ClaimParams{Owner: "test-node", Limit: 7, LeaseFor: time.Minute})
				if err != nil {
					errs <- err
					return
				}
				if b.Len() > 0 {
					mu.Lock()
					for _, r := range b.Records {
						claimed[r.ID] = true
					}
					mu.Unlock()
					if _, err := h.Store.Settle(ctx, b.Token, published(b)); err != nil {
						errs <- err
						return
					}
					continue
				}
				select {
				case <-done:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
	close(done)
	claimers.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// What the claimers left (committed just before they stopped, or
	// held back a moment longer) is claimed now; nothing else.
	rest := map[string]bool{}
	for id := range committed {
		if !claimed[id] {
			rest[id] = true
		}
	}
	for _, id := range drainUntil(t, h.Store, rest) {
		claimed[id] = true
	}
	for id := range claimed {
		require.True(t, committed[id], "%s was claimed, and its transaction rolled back", id)
	}
	require.Len(t, claimed, len(committed), "every committed message is claimed")
	require.Greater(t, len(committed), writers*txPerWriter/2)
}
