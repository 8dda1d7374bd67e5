package outbox_test

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/store/backendtest"
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

// heldBack is a store whose first claim finds nothing it can take yet and
// says when to look again (Batch.RetryAfter), as store/postgres does
// while committed messages wait behind a running transaction.
type heldBack struct {
	*outboxtest.Store
	claims atomic.Int32
}

func (s *heldBack) Claim(ctx context.Context, p backend.ClaimParams) (backend.Batch, error) {
	if s.claims.Add(1) == 1 {
		return backend.Batch{RetryAfter: 20 * time.Millisecond}, nil
	}
	return s.Store.Claim(ctx, p)
}

// A worker whose claim was held back comes back after RetryAfter, not
// after PollInterval (an hour here).
func TestWorkerComesBackAfterRetryAfter(t *testing.T) {
	s := &heldBack{Store: outboxtest.NewStore()}
	ctx := context.Background()
	require.NoError(t, s.Enqueue(ctx, nopExec{}, nil, outbox.Message{ID: "m", Type: "T"}))
	rec := outboxtest.NewRecorder()
	w, err := outbox.NewWorker(s, rec, outbox.WorkerOptions{PollInterval: time.Hour})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	wait, cancel := context.WithTimeout(context.Background(), outboxtest.WaitTimeout)
	defer cancel()
	require.NoError(t, rec.WaitDistinct(wait, 1))
	stop()
	require.NoError(t, <-done)
	require.GreaterOrEqual(t, s.claims.Load(), int32(2))
}

// nopExec stands for the caller's database handle: the memory store
// writes at once through any Execer but its own transactions.
type nopExec struct{}

func (nopExec) ExecContext(context.Context, string, ...any) (sql.Result, error) { return nil, nil }
