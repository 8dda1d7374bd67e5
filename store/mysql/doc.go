// Package mysql is the outbox.Store for MySQL 8.0+ and MariaDB 10.6+, on
// database/sql with github.com/go-sql-driver/mysql.
//
// # Table
//
// One table per outbox (Options.Table, default "outbox"), created by
// Store.Migrate. It keeps the seed's column names: event_id, event_type,
// status ('pending', 'published', 'dead'), retry_count, last_error; the
// key column is event_key. Useful operator queries:
//
//	-- backlog and the oldest waiting event
//	SELECT COUNT(*), MIN(created_at) FROM room_outbox WHERE status = 'pending';
//	-- what keeps failing
//	SELECT event_id, event_type, retry_count, last_error FROM room_outbox
//	 WHERE status = 'pending' AND retry_count > 0 ORDER BY retry_count DESC LIMIT 20;
//
// # How a claim works
//
// A claim is one short READ COMMITTED transaction: it selects due pending
// rows in due order with FOR UPDATE SKIP LOCKED (concurrent claimers skip
// each other's rows instead of waiting), stamps them with a random lease
// token and moves next_attempt_at to the end of the lease, and commits
// before anything is published. The index (status, next_attempt_at, id)
// makes this a range scan that stops after the batch, whatever the size of
// the backlog or of the published history. Settles are fenced by the lease
// token. Every time that decides delivery is the database's UTC clock.
//
// The *sql.DB may use any DSN options; interpolateParams=true saves a
// round trip per statement.
package mysql
