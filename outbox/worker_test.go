package outbox_test

import (
	"context"
	"testing"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/backend/backendtest"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// TestWorker runs the worker's conformance suite on the in-memory store:
// every promise of the worker, tested without a database.
func TestWorker(t *testing.T) {
	backendtest.RunWorkerTests(t, newMemoryHarness)
}

// TestWorkerLeavesNoGoroutine is not parallel: its goroutine check must
// not see another test's.
func TestWorkerLeavesNoGoroutine(t *testing.T) {
	backendtest.RunLeakTest(t, newMemoryHarness)
}

func newMemoryHarness(*testing.T) backendtest.Harness {
	s := outboxtest.NewStore()
	return backendtest.Harness{
		Store:     s,
		Begin:     func(context.Context) (backendtest.Tx, error) { return s.Begin(), nil },
		OpenStore: func(*testing.T) backend.Store { return s },
	}
}

// TestOperatorContract runs the operator contract's suite on the
// in-memory store, so that the tools' own tests can run without a
// database.
func TestOperatorContract(t *testing.T) {
	backendtest.RunOperatorTests(t, newMemoryHarness)
}
