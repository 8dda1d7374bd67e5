package testutil

import (
	"testing"
	"time"
)

// Eventually polls cond every 10ms until it holds, and fails t if it does
// not within a minute. Tests wait with it instead of sleeping for a
// guessed time; the minute is a deadlock guard, not a timing assertion.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
