// Package outbox is a transactional outbox: a service writes the events of
// a state change in the same database transaction as the change itself,
// and a Worker delivers them to a Sink afterwards, retrying until they get
// through.
//
// # Guarantees
//
//   - An event is stored if and only if its transaction commits
//     (Store.Enqueue runs on the caller's transaction).
//   - Delivery is at-least-once. A failure never loses an event: a failed
//     publish stays pending and is retried by the RetryPolicy (by default
//     forever, at a fixed interval); a crashed worker's leased events are
//     delivered by another worker once the lease expires. The price is
//     that an event can be delivered more than once, so consumers must
//     deduplicate by Message.ID.
//   - One bad record never stalls the others: a failing, panicking or
//     undecodable record fails alone, whatever its error text holds.
//   - Many workers, in one process or many, can share a store. A claim is
//     a lease fenced by a token, so two workers do not deliver the same
//     record at the same time, and a worker whose lease expired cannot
//     overwrite the result of the worker that took over.
//   - Order is per key and opt-in. By default records are claimed roughly
//     in the order they became due, and a failed record is retried later
//     while newer ones go ahead. With WorkerOptions.Ordering, the messages
//     of one Message.Key are delivered in enqueue order, one at a time
//     across all workers, while other keys go on.
//
// # Writing and publishing
//
// A Writer writes a command's messages in the transaction that changes
// state, commits, and publishes them right after the commit (the fast
// path); a running Worker (Run) delivers whatever the fast path could
// not:
//
//	writer, _ := outbox.NewWriter(store, worker)
//	writer.Do(ctx, func(ctx context.Context, tx *sql.Tx) ([]outbox.Message, error) {
//		// … change state through tx …
//		return []outbox.Message{msg}, nil
//	})
//
// or, in a transaction the caller began (a *sql.Tx, or a pgx.Tx on
// store/postgres), writer.Commit(ctx, tx, msg). A failed publish only
// means that the worker will deliver the message.
//
// The level below is what the Writer does: Store.Enqueue with a head
// start (EnqueueOptions.HeadStart, which keeps the running worker away
// from a message its writer is about to publish, so the normal case
// delivers it once), the commit, then Worker.PublishNow.
//
// # Where things are
//
// store/mysql is the store for MySQL and MariaDB, store/postgres the
// store for PostgreSQL; sink/tencentim, sink/natsjs, sink/kafka,
// sink/webhook and sink/watermill are sinks. outbox/outboxtest has an in-memory store and
// test sinks for unit tests. A new store implements the contract in
// outbox/backend and runs the conformance suites of store/backendtest.
package outbox
