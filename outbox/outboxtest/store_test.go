package outboxtest_test

import (
	"context"
	"testing"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/store/backendtest"
)

// memHarness is the in-memory store as the conformance suites see it: one
// store, shared by every "process".
func memHarness(*testing.T) backendtest.Harness {
	s := outboxtest.NewStore()
	return backendtest.Harness{
		Store:     s,
		Begin:     func(context.Context) (backendtest.Tx, error) { return s.Begin(), nil },
		OpenStore: func(*testing.T) backend.Store { return s },
	}
}

func TestStoreConformance(t *testing.T) {
	backendtest.RunStoreTests(t, memHarness)
}

func TestStoreAdversarial(t *testing.T) {
	backendtest.RunAdversarialTests(t, memHarness)
}
