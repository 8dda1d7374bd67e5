// Package mysql is the backend.Store for MySQL 8.0+ and MariaDB 10.6+, on
// database/sql with github.com/go-sql-driver/mysql.
//
// # Table
//
// One table per outbox (Options.Table, default "outbox"), created by
// Store.Migrate. Its columns include event_id, event_key, event_type,
// status ('pending', 'published', 'dead'), retry_count and last_error.
// Useful operator queries:
//
//	-- backlog and the oldest waiting event
//	SELECT COUNT(*), MIN(created_at) FROM outbox WHERE status = 'pending';
//	-- what keeps failing
//	SELECT event_id, event_type, retry_count, last_error FROM outbox
//	 WHERE status = 'pending' AND retry_count > 0 ORDER BY retry_count DESC LIMIT 20;
//
// # How a claim works
//
// A claim is one short READ COMMITTED transaction: it selects due pending
// rows in due order with FOR UPDATE SKIP LOCKED (concurrent claimers skip
// each other's rows instead of waiting), stamps them with a random lease
// (lease_id) and the lease's end (lease_until, and next_attempt_at: a
// leased record is next due when its lease ends), and commits before
// anything is published. The index (status, next_attempt_at, id) makes
// this a range scan that stops after the batch, whatever the size of the
// backlog or of the published history; as the lease moves its records
// past the due range, a claim does not read the records other instances
// hold either. Settles are fenced by the lease.
//
// # Limits and clocks
//
//   - Keys (event_key) are stored binary and compared byte by byte, so
//     every key Message.Validate accepts is its own key and is ordered:
//     control characters, leading and trailing spaces and tabs included.
//     IDs compare with PAD SPACE, so Enqueue refuses an ID that ends in a
//     space ("a" and "a " would be one ID).
//   - Enqueue refuses a payload over Options.MaxPayloadBytes (1 MiB by
//     default) and headers over Options.MaxHeaderBytes (16 KiB as JSON),
//     with outbox.ErrInvalidMessage. A claim holds at most
//     Options.MaxClaimBytes (16 MiB) of payloads and headers, plus one
//     message.
//   - last_error holds at most backend.MaxLastErrorBytes of valid UTF-8,
//     whatever text a sink returned.
//   - Every time that decides something (due times, leases, retention
//     ages, the oldest pending age, age filters) is the database's UTC
//     clock: created_at is when the row was written. Message.CreatedAt,
//     the writer's clock, is kept in occurred_at and handed back, never
//     used to decide.
//
// # Several consumers
//
// The Store is the table's default consumer: the status columns above are
// its delivery state. Further consumers are registered by name
// (Store.AddConsumer, starting from now or from the beginning) and each
// gets a ConsumerStore (Store.Consumer) to build its own outbox.Worker
// on. Their state lives in the companion table <table>_consumption, one
// row per consumer and message with the same state columns, so one
// consumer's failures, backlog and dead letters never touch another's,
// and <table>_consumers is the registry.
//
// A message is written once, into the outbox table. Each claim of a named
// consumer first hands the messages not handed over yet to every named
// consumer (a row each in <table>_consumption), oldest first, in a short
// transaction of its own that never waits for the default consumer's
// claims. Retention (Store.PurgePublished) deletes a message only when
// every consumer has finished with it.
//
//	-- a named consumer's backlog
//	SELECT COUNT(*), MIN(created_at) FROM outbox_consumption
//	 WHERE consumer = 'activity' AND status = 'pending';
//
// The *sql.DB may use any DSN options; interpolateParams=true saves a
// round trip per statement.
package mysql
