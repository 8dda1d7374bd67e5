// Package mysql is the inbox.Inbox for MySQL 8.0+ and MariaDB 10.6+, on
// database/sql with github.com/go-sql-driver/mysql.
//
// Its Inbox and Options are inbox/sqlinbox's, the one implementation for
// every database, which documents their methods and fields; New hands
// it this package's part: MySQL's SQL, schema and error classification.
// What that part means for a user is below and on Options.
//
// # Table
//
// One table (Options.Table, default "inbox"), created by Inbox.Migrate,
// holds one row per processed message: consumer, msg_id (binary, so every
// valid ID is its own: no padding, no case folding) and processed_at (the
// database's UTC clock when the handler's transaction finished: its last
// statement, just before COMMIT, sets it). Several consumers can share the table. The
// primary key (consumer, msg_id) is the duplicate check; the index
// (consumer, processed_at) serves retention.
//
//	-- what a consumer processed in the last hour
//	SELECT COUNT(*) FROM inbox WHERE consumer = 'activity-service'
//	 AND processed_at > UTC_TIMESTAMP() - INTERVAL 1 HOUR;
//	-- was one message processed?
//	SELECT processed_at FROM inbox WHERE consumer = 'activity-service' AND msg_id = 'evt-1';
//
// # How Process works
//
// Process begins a transaction (READ COMMITTED by default), inserts the
// row, runs the handler, stamps the row's processed_at and commits. InnoDB makes a second INSERT of the
// same key wait for the transaction that holds it: the waiting call then
// gets a duplicate key (the message is a Duplicate) if the first
// committed, or the row (and runs the handler) if it rolled back. Three
// calls waiting on one row can deadlock when it is released; like any
// deadlock, lock wait timeout or lost connection, that rolls back one
// transaction, and Process begins it again (Options.MaxAttempts) with
// the handler called again.
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
// its row a full window after it commits. Purge reads the rows it deletes
// without locks, so it neither sees nor waits for the row of a message
// whose handler is still running, and then deletes them by primary key,
// so it locks only those (no gaps: new messages are never held up). A
// deadlock, lock wait timeout or lost connection is retried (a batch is
// idempotent).
//
// # Migrate
//
// Migrate creates the table and <table>_schema_version on a connection
// of its own: MySQL commits each DDL statement as it runs, so there is
// no transaction to roll back. Instances that call it at once take
// turns on a named lock (GET_LOCK, per database and table), which it
// releases at the end. A table of the same name that the inbox did not
// make fails before any DDL. SchemaSQL prints the same statements for a
// migration tool.
package mysql
