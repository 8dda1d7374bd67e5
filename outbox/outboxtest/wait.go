package outboxtest

import (
	"testing"
	"time"
)

// WaitTimeout bounds the waits of Eventually. It is a guard against a
// test that would hang, not a timing assertion.
const WaitTimeout = time.Minute

// Eventually polls cond every few milliseconds until it holds, and fails t
// if it does not within WaitTimeout. Tests wait with it, or on channels,
// never by sleeping for a guessed time.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, WaitTimeout, what, cond)
}

// EventuallyWithin is Eventually with a bound of its own, for waits that
// are long by design (a chaos run delivering tens of thousands of events).
func EventuallyWithin(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
