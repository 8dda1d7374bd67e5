// Package postgres is the inbox.Inbox for PostgreSQL 13+, on
// database/sql: pgx's stdlib driver (sql.Open("pgx", dsn), or
// stdlib.OpenDBFromPool for a service on pgxpool), or any driver whose
// errors report their SQLSTATE through a SQLState method (lib/pq's do).
// The package imports no driver.
//
// Its Inbox and Options are inbox/sqlinbox's, the one implementation for
// every database, which documents their methods and fields; New hands
// it this package's part: PostgreSQL's SQL, schema and error
// classification. What that part means for a user is below and on
// Options.
//
// # Table
//
// One table (Options.Table, default "inbox"), created by Inbox.Migrate,
// holds one row per processed message: consumer, msg_id (bytea, the ID's
// UTF-8 bytes, so that every valid ID is its own: no collation folds case,
// accents or trailing spaces, and an ID may hold a NUL, which text cannot)
// and processed_at (timestamptz, the database clock when the handler's
// transaction finished: its last statement, just before COMMIT, sets it).
// Several consumers can share the table. The primary key (consumer,
// msg_id) is the duplicate check; the index <table>_processed_idx
// (consumer, processed_at) serves retention.
//
//	-- what a consumer processed in the last hour
//	SELECT count(*) FROM inbox WHERE consumer = 'activity-service'
//	 AND processed_at > now() - interval '1 hour';
//	-- was one message processed?
//	SELECT processed_at FROM inbox WHERE consumer = 'activity-service'
//	 AND msg_id = convert_to('evt-1', 'UTF8');
//
// # How Process works
//
// Process begins a transaction (READ COMMITTED by default), inserts the
// row with INSERT … ON CONFLICT DO NOTHING, runs the handler, stamps the
// row's processed_at and commits. PostgreSQL makes a second INSERT of the
// same key wait for the transaction that holds it: the waiting call then
// inserts nothing (the message is a Duplicate) if the first committed,
// or inserts the row (and runs the handler) if it rolled back. Waiting
// redeliveries neither deadlock each other nor raise unique violations.
// A deadlock between handlers, a serialization failure (REPEATABLE READ,
// SERIALIZABLE), a lock timeout or a lost connection rolls back one
// transaction, and Process begins it again (Options.MaxAttempts) with the
// handler called again. PostgreSQL finds a deadlock only after
// deadlock_timeout (1s by default), so handlers that lock shared rows in
// different orders cost that long per deadlock: lock in a fixed order.
//
// # Retention
//
// Purge deletes one consumer's rows older than a window, in small
// batches. Run it periodically (say, hourly) with the window the
// consumer can afford: sqlinbox.DefaultRetention is 7 days. A message redelivered
// after its row was purged is processed again.
//
// The window counts from the commit of the handler's transaction, not
// from its start: a handler that runs for longer than the window keeps
// its row a full window after it commits. A row is invisible to Purge
// until its transaction commits, so a purge neither deletes nor waits for
// a message whose handler is still running; a batch locks the rows it
// deletes with SKIP LOCKED, so purges on several instances share the work
// instead of queueing, and a row another transaction holds is left for
// the next purge. A batch is one DELETE; a deadlock, serialization
// failure, lock timeout or lost connection is retried (a batch is
// idempotent).
//
// # Migrate
//
// Migrate creates the table, its index and <table>_schema_version in one
// transaction, DDL and all, so a failure leaves nothing half made.
// Instances that call it at once take turns on a transaction-scoped
// advisory lock (pg_advisory_xact_lock, keyed by the table's name),
// which the commit releases and which also keeps two CREATE TABLE IF NOT
// EXISTS from racing. A table of the same name that the inbox did not
// make fails before any DDL. SchemaSQL prints the same statements for a
// migration tool.
//
// # Errors
//
// Every error starts with "postgres inbox:". Failures are classified by
// SQLSTATE, once: deadlock_detected, serialization_failure and
// lock_not_available are retried, as are lost connections (class 08,
// admin_shutdown from pg_terminate_backend, network errors); a
// unique_violation from a handler is the handler's error; undefined_table
// says to run Migrate. The inbox's own errors carry the message ID but no
// DSN: a driver's connection errors are passed on, and pgx's name the
// user, host and database but never the password.
package postgres
