// Package backendtest holds the conformance suites every backend.Store
// implementation runs against a real database of its kind: the contract
// between the outbox worker and a store, checked from outside.
//
//	func TestConformance(t *testing.T) {
//		t.Parallel()
//		backendtest.RunStoreTests(t, newHarness)
//		backendtest.RunWorkerTests(t, newHarness)
//		backendtest.RunAdversarialTests(t, newHarness)
//	}
//
//	// Not parallel: the goroutine check must run alone.
//	func TestWorkerLeavesNoGoroutine(t *testing.T) {
//		backendtest.RunLeakTest(t, newHarness)
//	}
//
// RunStoreTests checks every promise of backend.Store: enqueue and
// rollback visibility, duplicate IDs, claim limits, leases and their
// expiry, fencing, settling, due times, ordered claims, and
// backend.SettleClaimer where the store has it. RunWorkerTests runs a
// real outbox.Worker on the store: delivery, retries, dead letters,
// ordering, the after-commit path, concurrency, crashes, stats and
// retention (for stores that report and purge). RunLeakTest checks that
// a stopped worker leaves no goroutine behind. RunAdversarialTests feeds
// both hostile but legal input. A store that serves several consumers of
// one outbox runs them against each kind of consumer store, and
// RunConsumerTests for what holds between consumers.
//
// outbox/outboxtest.NewStore passes all of them in memory;
// store/mysql passes them on MySQL and MariaDB, store/postgres on
// PostgreSQL.
package backendtest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Tx is a transaction the store under test can enqueue into. *sql.Tx
// satisfies it.
type Tx interface {
	outbox.Execer
	Commit() error
	Rollback() error
}

// Harness connects the suites to one store implementation.
type Harness struct {
	// Store is a store on a fresh, empty database.
	Store backend.Store
	// Begin starts a transaction on Store's database.
	Begin func(ctx context.Context) (Tx, error)
	// OpenStore returns another store on the same data through its own
	// connection pool, as another process would have.
	OpenStore func(t *testing.T) backend.Store
}

// Factory returns a Harness on a fresh database for t, cleaned up when t
// ends.
type Factory func(t *testing.T) Harness

// storeAs returns s as a C, the interface of an optional capability, or
// skips t for a store that lacks it; does says what a C does ("report
// stats"), for the skip's message.
func storeAs[C any](t *testing.T, s backend.Store, does string) C {
	t.Helper()
	c, ok := s.(C)
	if !ok {
		t.Skipf("%T does not %s", s, does)
	}
	return c
}

// slogJSON returns a debug-level JSON logger writing to w.
func slogJSON(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// findLogLine returns the first JSON log line in out whose message is msg.
func findLogLine(t *testing.T, out, msg string) map[string]any {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	t.Fatalf("no log line %q in:\n%s", msg, out)
	return nil
}
