// Package outboxtest holds the conformance suite every outbox.Store
// implementation must pass, and sinks for tests of code that uses the
// outbox.
//
// A store implementation runs both suites against a real database:
//
//	func TestConformance(t *testing.T) {
//		outboxtest.RunStoreTests(t, newHarness)
//		outboxtest.RunWorkerTests(t, newHarness)
//	}
//
// A store that serves several consumers of one outbox runs both suites
// against each kind of consumer store, and RunConsumerTests for what
// holds between them.
//
// The suites check every promise of the outbox.Store contract (enqueue
// and rollback visibility, duplicate IDs, claim limits, leases and their
// expiry, fencing, settling, due times) and the seed's acceptance rows
// through a real outbox.Worker.
package outboxtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
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
	Store outbox.Store
	// Begin starts a transaction on Store's database.
	Begin func(ctx context.Context) (Tx, error)
	// OpenStore returns another store on the same data through its own
	// connection pool, as another process would have.
	OpenStore func(t *testing.T) outbox.Store
}

// Factory returns a Harness on a fresh database for t, cleaned up when t
// ends.
type Factory func(t *testing.T) Harness

// Logger returns a logger that writes to t.Log at debug level, so that a
// failing test shows what the worker logged.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(&testWriter{t: t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	t  testing.TB
	mu sync.Mutex
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// LogBuffer collects log output for a test to inspect. Unlike a
// bytes.Buffer it is safe for concurrent writes.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitTimeout bounds every wait in the suites. Waits poll or block on
// channels; they never assert how long something took.
const waitTimeout = 60 * time.Second

// eventually polls cond until it holds or waitTimeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", waitTimeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
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
