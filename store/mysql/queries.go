package mysql

import (
	"fmt"
	"strings"
)

// recordColumns are the columns scanRecord reads, in its order.
const recordColumns = "id, event_id, event_key, event_type, payload, headers, created_at, status, retry_count, last_error, next_attempt_at, published_at"

// queries holds the statements of one table. The table name has been
// validated as a plain identifier before it is quoted in here; every value
// travels as a placeholder argument.
type queries struct {
	get string
	// claimDue selects due pending records in due order; its plan is kept
	// in TestClaimPlan.
	claimDue string
	// claimIDsPrefix + placeholders + claimIDsSuffix selects named pending
	// records that nobody holds.
	claimIDsPrefix, claimIDsSuffix string
	// Ordered claims: keyHeads finds key heads (loose index scan of
	// idx_key), claimHeadsPrefix + placeholders + claimHeadsSuffix locks
	// the due ones, claimUnkeyed locks due records without a key, and
	// oldestPending lists a key's oldest pending records.
	keyHeads, claimHeadsPrefix, claimHeadsSuffix, claimUnkeyed, oldestPending string
	// leasePrefix + placeholders + ")" leases claimed rows by id.
	leasePrefix string
	// insertPrefix + rows inserts messages.
	insertPrefix string
	// requeuePrefix, followed by a WHERE clause, gives dead letters a
	// fresh start.
	requeuePrefix string
	// stats, purge and countPurgeable serve operators; their plans are
	// kept in tests.
	stats, purge, countPurgeable string
	// settle statements, each followed by the fenced IN list of event IDs.
	settlePublished, settleRetry, settleDead, settleRelease string
}

func buildQueries(table string) queries {
	t := "`" + table + "`"
	fenced := " WHERE lease_token = ? AND event_id IN ("
	return queries{
		get: fmt.Sprintf("SELECT %s FROM %s WHERE event_id = ?", recordColumns, t),
		claimDue: fmt.Sprintf("SELECT %s FROM %s WHERE status = 'pending' AND next_attempt_at <= UTC_TIMESTAMP(6)"+
			" ORDER BY next_attempt_at, id LIMIT ? FOR UPDATE SKIP LOCKED", recordColumns, t),
		claimIDsPrefix: fmt.Sprintf("SELECT %s FROM %s WHERE event_id IN (", recordColumns, t),
		claimIDsSuffix: ") AND status = 'pending' AND (lease_token IS NULL OR next_attempt_at <= UTC_TIMESTAMP(6))" +
			" ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED",
		keyHeads: "SELECT event_key, MIN(id) FROM " + t + " WHERE status = 'pending' AND event_key > ?" +
			" GROUP BY status, event_key ORDER BY status, event_key LIMIT ?",
		claimHeadsPrefix: fmt.Sprintf("SELECT %s FROM %s WHERE id IN (", recordColumns, t),
		claimHeadsSuffix: ") AND status = 'pending' AND next_attempt_at <= UTC_TIMESTAMP(6)" +
			" ORDER BY event_key LIMIT ? FOR UPDATE SKIP LOCKED",
		claimUnkeyed: fmt.Sprintf("SELECT %s FROM %s WHERE status = 'pending' AND event_key = '' AND id > ?"+
			" AND next_attempt_at <= UTC_TIMESTAMP(6) ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED", recordColumns, t),
		oldestPending: "SELECT id FROM " + t + " WHERE status = 'pending' AND event_key = ? ORDER BY id LIMIT ?",
		leasePrefix: "UPDATE " + t + " SET lease_token = ?, lease_owner = ?," +
			" next_attempt_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE id IN (",
		requeuePrefix: "UPDATE " + t + " SET status = 'pending', retry_count = 0, next_attempt_at = UTC_TIMESTAMP(6)," +
			" lease_token = NULL, lease_owner = NULL",
		stats: "SELECT status, event_type, COUNT(*), COALESCE(SUM(lease_token IS NOT NULL), 0)," +
			" COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6)), 0) FROM " + t +
			" WHERE status IN ('pending', 'dead') GROUP BY status, event_type",
		purge: "DELETE FROM " + t + " WHERE status = 'published' AND next_attempt_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND" +
			" ORDER BY next_attempt_at LIMIT ?",
		countPurgeable: "SELECT COUNT(*) FROM " + t + " WHERE status = 'published' AND next_attempt_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND",
		insertPrefix:   "INSERT INTO " + t + " (event_id, event_key, event_type, payload, headers, created_at, next_attempt_at) VALUES ",
		settlePublished: "UPDATE " + t + " SET status = 'published', published_at = UTC_TIMESTAMP(6), last_error = NULL," +
			" next_attempt_at = UTC_TIMESTAMP(6), lease_token = NULL" + fenced,
		settleRetry: "UPDATE " + t + " SET retry_count = retry_count + 1, last_error = ?," +
			" next_attempt_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, lease_token = NULL" + fenced,
		settleDead: "UPDATE " + t + " SET status = 'dead', retry_count = retry_count + 1, last_error = ?," +
			" next_attempt_at = UTC_TIMESTAMP(6), lease_token = NULL" + fenced,
		settleRelease: "UPDATE " + t + " SET next_attempt_at = UTC_TIMESTAMP(6), lease_token = NULL" + fenced,
	}
}

// placeholders returns "?, ?, ?" for n values.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}
