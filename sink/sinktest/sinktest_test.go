package sinktest

import (
	"errors"
	"fmt"
	"path"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runRecorded runs the suite against p and returns each check's
// outcome by name (nil for a pass; skipped checks are left out), without
// failing t for a broken promise.
func runRecorded(t *testing.T, p Peer) map[string]error {
	var mu sync.Mutex
	out := map[string]error{}
	run(t, p, func(t *testing.T, err error) {
		mu.Lock()
		defer mu.Unlock()
		out[path.Base(t.Name())] = err
	})
	return out
}

// TestSuitePassesAFaithfulPeer: a sink that keeps every promise passes
// every check, with a peer that dedupes and one that does not.
func TestSuitePassesAFaithfulPeer(t *testing.T) {
	for _, dedupe := range []bool{false, true} {
		t.Run(map[bool]string{false: "KeepsRepeats", true: "DedupesByID"}[dedupe], func(t *testing.T) {
			got := runRecorded(t, newMemPeer(dedupe, flawNone).peer())
			for _, name := range []string{"Delivers", "HostileMessages", "Ordered", "Unacceptable", "Misconfigured", "Context", "Secrets", "Outage", "NoGoroutineLeak"} {
				require.Contains(t, got, name)
				require.NoError(t, got[name], name)
			}
		})
	}
}

// TestSuiteCatchesBrokenSinks: for each broken promise, the check that
// guards it fails, and says why.
func TestSuiteCatchesBrokenSinks(t *testing.T) {
	// A broken sink fails a wait rather than passing it: shorter bounds
	// only make it fail sooner.
	defer func(w, h, o time.Duration) { waitTimeout, hangTimeout, outageDeadline = w, h, o }(waitTimeout, hangTimeout, outageDeadline)
	waitTimeout, hangTimeout, outageDeadline = 10*time.Second, 3*time.Second, 300*time.Millisecond

	cases := []struct {
		name   string
		flaw   flaw
		dedupe bool
		check  string
		want   string
	}{
		{"DropsHeaders", flawDropsHeaders, false, "Delivers", "arrived changed: Headers"},
		{"DuplicatesDespiteDedupe", flawDuplicates, true, "Delivers", "times; Peer.DedupesByID"},
		{"ManglesPayload", flawManglesPayload, false, "HostileMessages", "arrived changed: Payload"},
		{"PlainErrorForAMessageItRefuses", flawPlainErrorForBig, false, "HostileMessages", "a plain (retryable) error"},
		{"KeepsHeaderInjection", flawKeepsHeaderInjection, false, "HostileMessages", "arrived changed: Headers"},
		{"Reorders", flawReorders, false, "Ordered", "published in the order"},
		{"RetriesUnacceptable", flawRetryableUnacceptable, false, "Unacceptable", "must fail as Permanent"},
		{"PermanentWhenMisconfigured", flawPermanentMisconfigured, false, "Misconfigured", "must fail as Unavailable"},
		{"PermanentOnCancel", flawPermanentContext, false, "Context", "= Permanent"},
		{"PrintsSecret", flawPrintsSecret, false, "Secrets", "shows 16 bytes of Peer.Secrets[0]"},
		{"WrapsSecret", flawWrapsSecret, false, "Misconfigured", "in a wrapped error"},
		{"PermanentOutage", flawPermanentOutage, false, "Outage", "while the peer is away"},
		{"IgnoresContext", flawIgnoresContext, false, "Outage", "had not returned"},
		{"LosesDuringOutage", flawLosesDuringOutage, false, "Outage", "of those published"},
		{"LeaksGoroutine", flawLeaksGoroutine, false, "NoGoroutineLeak", "goroutines are left"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newMemPeer(tc.dedupe, tc.flaw)
			defer close(p.forever)
			got := runRecorded(t, p.peer())
			require.Error(t, got[tc.check], "check %s passed a sink that breaks it", tc.check)
			require.ErrorContains(t, got[tc.check], tc.want)
			t.Logf("%s: %v", tc.check, got[tc.check])
		})
	}
}

// TestPeerValidated: a peer without what the suite needs is refused.
func TestPeerValidated(t *testing.T) {
	require.ErrorContains(t, Peer{}.validate(), "Peer.NewSink: required")
	require.ErrorContains(t, Peer{}.validate(), "Peer.Stop and Peer.Start: required")
	p := newMemPeer(false, flawNone).peer()
	p.Unacceptable[0].ID = ""
	require.ErrorContains(t, p.validate(), "Peer.Unacceptable[0]: a store would not accept it either")
}

// TestSameHeaders: names may differ in case (HTTP folds them), values
// may not, and neither may the number of headers.
func TestSameHeaders(t *testing.T) {
	cases := []struct {
		want, got map[string]string
		same      bool
	}{
		{nil, map[string]string{}, true},
		{map[string]string{"traceparent": "x"}, map[string]string{"Traceparent": "x"}, true},
		{map[string]string{"a": "x"}, map[string]string{"a": "y"}, false},
		{map[string]string{"a": "x"}, map[string]string{"a": "x", "b": ""}, false},
		{map[string]string{"X-A": "1", "x-a": "2"}, map[string]string{"X-A": "1", "x-a": "2"}, true},
		{map[string]string{"X-A": "1", "x-a": "2"}, map[string]string{"x-a": "1", "X-A": "2"}, false},
	}
	for _, tc := range cases {
		require.Equal(t, tc.same, sameHeaders(tc.want, tc.got), "%v vs %v", tc.want, tc.got)
	}
}

// TestFailuresDoNotQuoteSecrets: a failure that quotes what a sink
// delivered or returned names a secret instead of showing it.
func TestFailuresDoNotQuoteSecrets(t *testing.T) {
	s := &suite{Peer: Peer{Secrets: []string{"", "tok-1c9e5b7f3a2d4e6f8091"}}}
	err := s.redacted(errors.New(`Headers {"Authorization":"Bearer tok-1c9e5b7f3a2d4e6f8091"}`))
	require.EqualError(t, err, `Headers {"Authorization":"Bearer [Peer.Secrets[1]]"}`)
	plain := errors.New("no secret here")
	require.Same(t, plain, s.redacted(plain))
	require.NoError(t, s.redacted(nil))
}

func TestChain(t *testing.T) {
	a, b, c := errors.New("a"), errors.New("b"), errors.New("c")
	joined := errors.Join(a, fmt.Errorf("wrapping: %w", b), nil)
	top := fmt.Errorf("top: %w", joined)
	require.Equal(t, []error{top, joined, a}, Chain(top)[:3], "breadth first")
	require.Len(t, Chain(top), 5)
	require.Contains(t, Chain(top), b)
	require.NotContains(t, Chain(top), c)
	require.Empty(t, Chain(nil))
	var deep error = c
	for range 2000 {
		deep = fmt.Errorf("w: %w", deep)
	}
	require.Len(t, Chain(deep), maxChain+1)
}
