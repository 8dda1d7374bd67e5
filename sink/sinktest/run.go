package sinktest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Bounds of the suite's waits: guards against a test that would hang,
// never timing assertions.
const (
	// WaitTimeout bounds every wait for the peer to hold something, or
	// for the worker of the Outage check to finish.
	WaitTimeout = 2 * time.Minute
	// HangTimeout is how long a Publish call may go on past its
	// context's deadline or cancellation before the suite reports that
	// it does not honour its context.
	HangTimeout = 30 * time.Second
)

// The bounds in force; the suite's own tests shorten them to see broken
// sinks fail quickly.
var (
	waitTimeout = WaitTimeout
	hangTimeout = HangTimeout
)

// check is one of the suite's checks. fn reports a broken promise by
// returning an error, so that the suite's own tests can see a check
// fail; Run turns it into a test failure.
type check struct {
	name string
	fn   func(t *testing.T, s *suite) error
	// skip says why the check does not apply to the peer, or "".
	skip func(p Peer) string
}

// parallelChecks run at the same time, each in a test of its own.
var parallelChecks = []check{
	{name: "Delivers", fn: checkDelivers},
	{name: "HostileMessages", fn: checkHostile},
	{name: "Ordered", fn: checkOrdered, skip: func(p Peer) string {
		return skipUnless(p.Ordered, "Peer.Ordered is false: the peer keeps no order")
	}},
	{name: "Unacceptable", fn: checkUnacceptable, skip: func(p Peer) string {
		return skipUnless(len(p.Unacceptable) > 0, "Peer.Unacceptable is empty")
	}},
	{name: "Misconfigured", fn: checkMisconfigured, skip: func(p Peer) string {
		return skipUnless(p.Misconfigured != nil, "Peer.Misconfigured is nil")
	}},
	{name: "Context", fn: checkContext},
	{name: "Secrets", fn: checkSecrets, skip: func(p Peer) string {
		return skipUnless(len(p.Secrets) > 0, "Peer.Secrets is empty")
	}},
}

func skipUnless(ok bool, why string) string {
	if ok {
		return ""
	}
	return why
}

// Run checks the sinks that p makes against the peer, each promise in a
// subtest (see the package documentation). The checks of the subtest
// Parallel run in parallel; Outage and then NoGoroutineLeak run after
// them, alone. Do not run Run in parallel with other tests of its
// package: the leak check counts every goroutine of the process.
func Run(t *testing.T, p Peer) {
	run(t, p, func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	})
}

// suite is one run of the checks against a peer.
type suite struct {
	Peer
	// run tells this run's message IDs apart from any other run's on
	// the same peer.
	run string
}

// run runs every check and hands report the outcome of each (nil for a
// pass), in the check's own test.
func run(t *testing.T, p Peer, report func(*testing.T, error)) {
	t.Helper()
	if err := p.validate(); err != nil {
		t.Fatal(err)
	}
	baseline := goleak.IgnoreCurrent()
	var b [4]byte
	_, _ = rand.Read(b[:])
	s := &suite{Peer: p, run: hex.EncodeToString(b[:])}
	t.Run("Parallel", func(t *testing.T) {
		for _, c := range parallelChecks {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				if c.skip != nil {
					if why := c.skip(p); why != "" {
						t.Skip(why)
					}
				}
				report(t, s.redacted(c.fn(t, s)))
			})
		}
	})
	t.Run("Outage", func(t *testing.T) { report(t, s.redacted(checkOutage(t, s))) })
	t.Run("NoGoroutineLeak", func(t *testing.T) { report(t, checkNoLeak(baseline)) })
}

// id is a message ID of this run: what, then n.
func (s *suite) id(what string, n int) string {
	return fmt.Sprintf("sinktest-%s-%s-%d", s.run, what, n)
}

// newTarget makes a target for t and closes its sink when t ends.
func (s *suite) newTarget(t *testing.T) Target {
	t.Helper()
	tg := s.NewSink(t)
	if tg.Sink == nil || tg.Received == nil {
		t.Fatal("sinktest: Peer.NewSink returned a Target without Sink or Received")
	}
	closeWhenDone(t, tg.Sink)
	return tg
}

// closeWhenDone closes x when t ends, if it has a Close method.
func closeWhenDone(t *testing.T, x any) {
	t.Cleanup(func() {
		switch c := x.(type) {
		case interface{ Close() error }:
			if err := c.Close(); err != nil {
				t.Errorf("sinktest: closing the sink: %v", err)
			}
		case interface{ Close() }:
			c.Close()
		}
	})
}

// checkNoLeak waits until no goroutine is left beyond those of
// baseline, for up to hangTimeout: connections that close and
// goroutines that wind down take a moment on a loaded machine.
func checkNoLeak(baseline goleak.Option) error {
	deadline := time.Now().Add(hangTimeout)
	for {
		err := goleak.Find(baseline)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("goroutines are left once every check is over and its sinks closed (a sink with resources "+
				"should have a Close method, and Publish should start nothing that outlives it): %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
