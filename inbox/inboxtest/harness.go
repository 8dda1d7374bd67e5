// Package inboxtest is the conformance suite every inbox.Inbox
// implementation runs against a real database of its kind: the promises
// of the Inbox contract, checked from outside.
//
//	func TestConformance(t *testing.T) {
//		inboxtest.Run(t, newHarness)
//	}
//
// Run checks: a message is processed once and its redeliveries are
// skipped without running the handler; a handler error or panic rolls
// back the record and the handler's writes, and a retry then processes
// the message; hostile IDs are refused or kept apart exactly; concurrent
// redeliveries of one message to three instances (each on its own
// connection pool) have their effect once and return no error; many
// messages redelivered to three instances, with handlers that lock
// shared rows in opposite orders (deadlocks), each have their effect
// once and none fails; consumers are independent of each other; and
// retention deletes only records older than its window, counted from
// the commit of the message's transaction however long its handler ran
// and whatever purges ran meanwhile (for an inbox that purges).
//
// The suite's own statements (its effect tables) are plain SQL with ?
// placeholders.
package inboxtest

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/internal/conformance"
)

// Harness connects the suite to one implementation, on a fresh database.
type Harness struct {
	// DB is the database the inbox keeps its records in and the handlers
	// write to.
	DB *sql.DB
	// Param is how the database writes a statement's one parameter: "?"
	// (MySQL, MariaDB; the default when empty) or "$1" (PostgreSQL). The
	// suite's own statements (the tables its handlers write) use it.
	Param string
	// New returns an inbox of consumer on DB's data, through a connection
	// pool of its own (as another process would have), reporting to obs
	// (nil: none). Every inbox New returns must implement Inspector.
	New func(t *testing.T, consumer string, obs inbox.Observer) inbox.Inbox
	// LockWaiters, if set, counts the transactions on DB's data that wait
	// for a lock. The concurrent redelivery tests then hold the first
	// handler of each message until the other instances wait for it, so
	// that every round exercises the wait (without it they only race).
	LockWaiters func(t *testing.T) int
	// Backdate makes the record of message id of consumer look age old to
	// retention. Nil for an inbox without retention (Purger): the
	// retention tests are then skipped.
	Backdate func(t *testing.T, consumer, id string, age time.Duration)
	// Now reads the database clock that retention compares with. Nil
	// for an inbox without retention: the tests that need it are then
	// skipped.
	Now func(t *testing.T) time.Time
}

// Factory returns a Harness on a fresh database for t, cleaned up when t
// ends.
type Factory func(t *testing.T) Harness

// Inspector reports whether a consumer has processed a message (and
// retention has not deleted the record yet).
type Inspector interface {
	Contains(ctx context.Context, id string) (bool, error)
}

// Purger is an inbox with retention: Purge deletes the records of
// messages processed longer ago than olderThan, at most batch per
// transaction, and returns how many. A record's age counts from the
// commit of the transaction that wrote it; Purge neither deletes nor
// waits for the record of a message whose handler is still running.
type Purger interface {
	Purge(ctx context.Context, olderThan time.Duration, batch int) (int, error)
}

// Run runs every test of the suite, each on a fresh harness.
func Run(t *testing.T, newHarness Factory) {
	conformance.Run(t, newHarness, inboxTests)
}

// inboxTests are the tests of Run.
var inboxTests = []conformance.Test[Harness]{
	{Name: "ProcessOnce", Fn: testProcessOnce},
	{Name: "DuplicateSkipsHandler", Fn: testDuplicateSkipsHandler},
	{Name: "HandlerErrorRollsBack", Fn: testHandlerErrorRollsBack},
	{Name: "PanicRollsBack", Fn: testPanicRollsBack},
	{Name: "CanceledContext", Fn: testCanceledContext},
	{Name: "InvalidIDs", Fn: testInvalidIDs},
	{Name: "HostileIDsAreDistinct", Fn: testHostileIDsAreDistinct},
	{Name: "ConcurrentRedeliveryThreeInstances", Fn: testConcurrentRedelivery},
	{Name: "RedeliveryTakesOverAfterFailure", Fn: testRedeliveryTakesOver},
	{Name: "ManyIDsThreeInstancesWithDeadlocks", Fn: testManyIDsWithDeadlocks},
	{Name: "ConsumersAreIndependent", Fn: testConsumersAreIndependent},
	{Name: "RetentionPurgesOnlyOlder", Fn: testRetention},
	{Name: "RetentionInBatches", Fn: testRetentionInBatches},
	{Name: "RetentionOfHostileIDs", Fn: testRetentionOfHostileIDs},
	{Name: "RetentionCountsFromCommit", Fn: testRetentionCountsFromCommit},
}

// counter counts events by kind, as an inbox.Observer.
type counter struct {
	mu     sync.Mutex
	counts map[inbox.EventKind]int
}

func newCounter() *counter { return &counter{counts: map[inbox.EventKind]int{}} }

func (c *counter) Observe(_ context.Context, e inbox.Event) {
	c.mu.Lock()
	c.counts[e.Kind]++
	c.mu.Unlock()
}

func (c *counter) get(k inbox.EventKind) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[k]
}
