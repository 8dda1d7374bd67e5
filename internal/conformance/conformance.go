// Package conformance runs the tests of the conformance suites
// (store/backendtest, inbox/inboxtest): each a named function of a
// harness, run as a parallel subtest on a fresh harness of its own.
package conformance

import "testing"

// Test is one test of a suite: the name of its subtest (which CI's -run
// patterns name, so it must not change) and its body, which gets a fresh
// harness.
type Test[H any] struct {
	Name string
	Fn   func(t *testing.T, h H)
}

// Run runs every test of tests, in order, as a parallel subtest of t,
// each on the harness newHarness makes for that subtest.
func Run[H any](t *testing.T, newHarness func(t *testing.T) H, tests []Test[H]) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			tc.Fn(t, newHarness(t))
		})
	}
}
