package mysql

import (
	"fmt"
	"strings"
)

// recordColumns are the columns scanRecord reads, in its order.
const recordColumns = "id, event_id, event_key, event_type, payload, headers, occurred_at, created_at, status, retry_count, last_error, next_attempt_at, published_at"

// consumptionColumns are recordColumns of a consumption table: the
// payload, headers and occurred_at are read from the outbox table afterwards
// (channel.content), so that a claim locks only the consumer's own rows.
const consumptionColumns = "msg_id, event_id, event_key, event_type, NULL, NULL, NULL, created_at, status, retry_count, last_error, next_attempt_at, published_at"

// target is where one consumer's delivery state lives: the outbox table
// itself for the default consumer, its rows of the consumption table for
// a named one. Both have the same state columns (status, retry_count,
// last_error, next_attempt_at, published_at, lease_owner, lease_token)
// and the message fields the claims need (event_id, event_key,
// event_type, created_at), so one set of statements serves both.
type target struct {
	table string // quoted
	// scope is a condition prefix, "" or "consumer = '<name>' AND " (the
	// name is validated to letters, digits and "_.-" before it is quoted).
	scope string
	// group is the GROUP BY prefix that keeps a loose index scan on the
	// scope's index prefix: "" or "consumer, ".
	group string
	seq   string // the sequence column: id or msg_id
	cols  string // recordColumns or consumptionColumns
}

func outboxTarget(table string) target {
	return target{table: "`" + table + "`", seq: "id", cols: recordColumns}
}

func consumerTarget(table, consumer string) target {
	return target{
		table: "`" + consumptionTable(table) + "`", scope: "consumer = '" + consumer + "' AND ",
		group: "consumer, ", seq: "msg_id", cols: consumptionColumns,
	}
}

// queries holds the statements of one target. Table and consumer names
// have been validated before they are quoted in here; every value travels
// as a placeholder argument.
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
	// leasePrefix + placeholders + ")" leases claimed rows by sequence.
	leasePrefix string
	// requeueLockPrefix, followed by conditions, locks dead letters to
	// requeue; keyLeasesPrefix + placeholders + ") FOR UPDATE" locks the
	// pending records of their keys and reads their leases;
	// requeuePrefix + placeholders + ")" gives dead letters a fresh start,
	// due at the later of now and the argument (NULL: now).
	requeueLockPrefix, keyLeasesPrefix, requeuePrefix string
	// stats serves operators; its plan is kept in a test.
	stats string
	// dropPrefix + placeholders + ")" deletes rows by sequence: a
	// consumer's records whose message is gone.
	dropPrefix string
	// settle statements, each followed by the fenced IN list of event IDs.
	settlePublished, settleRetry, settleDead, settleRelease string
}

func buildQueries(t target) queries {
	from := " FROM " + t.table + " WHERE " + t.scope
	fenced := " WHERE " + t.scope + "lease_token = ? AND event_id IN ("
	return queries{
		get: "SELECT " + t.cols + from + "event_id = ?",
		claimDue: "SELECT " + t.cols + from + "status = 'pending' AND next_attempt_at <= UTC_TIMESTAMP(6)" +
			" ORDER BY next_attempt_at, " + t.seq + " LIMIT ? FOR UPDATE SKIP LOCKED",
		claimIDsPrefix: "SELECT " + t.cols + from + "event_id IN (",
		claimIDsSuffix: ") AND status = 'pending' AND (lease_token IS NULL OR next_attempt_at <= UTC_TIMESTAMP(6))" +
			" ORDER BY " + t.seq + " LIMIT ? FOR UPDATE SKIP LOCKED",
		keyHeads: "SELECT event_key, MIN(" + t.seq + ")" + from + "status = 'pending' AND event_key > ?" +
			" GROUP BY " + t.group + "status, event_key ORDER BY " + t.group + "status, event_key LIMIT ?",
		claimHeadsPrefix: "SELECT " + t.cols + " FROM " + t.table + " h WHERE " + t.scope + t.seq + " IN (",
		// Still the head once locked: a requeue may have made an older
		// record of the key pending since the heads were read.
		// (The first of the key in index order, LIMIT 1: a NOT EXISTS of an
		// older one would read the whole key.)
		claimHeadsSuffix: ") AND status = 'pending' AND next_attempt_at <= UTC_TIMESTAMP(6)" +
			" AND h." + t.seq + " = (SELECT x." + t.seq + " FROM " + t.table + " x WHERE " + t.scope + "x.status = 'pending'" +
			" AND x.event_key = h.event_key ORDER BY x." + t.seq + " LIMIT 1)" +
			" ORDER BY event_key LIMIT ? FOR UPDATE SKIP LOCKED",
		claimUnkeyed: "SELECT " + t.cols + from + "status = 'pending' AND event_key = '' AND " + t.seq + " > ?" +
			" AND next_attempt_at <= UTC_TIMESTAMP(6) ORDER BY " + t.seq + " LIMIT ? FOR UPDATE SKIP LOCKED",
		oldestPending: "SELECT " + t.seq + from + "status = 'pending' AND event_key = ? ORDER BY " + t.seq + " LIMIT ?",
		leasePrefix: "UPDATE " + t.table + " SET lease_token = ?, lease_owner = ?," +
			" next_attempt_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE " + t.scope + t.seq + " IN (",
		requeueLockPrefix: "SELECT " + t.seq + ", event_key" + from,
		keyLeasesPrefix: "SELECT event_key, next_attempt_at, lease_token IS NOT NULL AND next_attempt_at > UTC_TIMESTAMP(6)" +
			from + "status = 'pending' AND event_key IN (",
		requeuePrefix: "UPDATE " + t.table + " SET status = 'pending', retry_count = 0," +
			" next_attempt_at = COALESCE(GREATEST(UTC_TIMESTAMP(6), CAST(? AS DATETIME(6))), UTC_TIMESTAMP(6))," +
			" lease_token = NULL, lease_owner = NULL" +
			" WHERE " + t.scope + "status = 'dead' AND " + t.seq + " IN (",
		stats: "SELECT status, event_type, COUNT(*), COALESCE(SUM(lease_token IS NOT NULL AND next_attempt_at > UTC_TIMESTAMP(6)), 0)," +
			" COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6)), 0)" + from +
			"status IN ('pending', 'dead') GROUP BY status, event_type",
		dropPrefix: "DELETE FROM " + t.table + " WHERE " + t.scope + t.seq + " IN (",
		settlePublished: "UPDATE " + t.table + " SET status = 'published', published_at = UTC_TIMESTAMP(6), last_error = NULL," +
			" next_attempt_at = UTC_TIMESTAMP(6), lease_token = NULL" + fenced,
		settleRetry: "UPDATE " + t.table + " SET retry_count = retry_count + 1, last_error = ?," +
			" next_attempt_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, lease_token = NULL" + fenced,
		settleDead: "UPDATE " + t.table + " SET status = 'dead', retry_count = retry_count + 1, last_error = ?," +
			" next_attempt_at = UTC_TIMESTAMP(6), lease_token = NULL" + fenced,
		settleRelease: "UPDATE " + t.table + " SET next_attempt_at = UTC_TIMESTAMP(6), lease_token = NULL" + fenced,
	}
}

// outboxQueries are the statements of the outbox table that only the
// Store (the default consumer's side, which owns the messages) runs.
type outboxQueries struct {
	// insertPrefix + rows inserts messages.
	insertPrefix string
	// purgeWindow, purgeLockPrefix, purgeLockConsumption,
	// purgeFinishedPrefix and the purge deletes make up PurgePublished;
	// countPurgeablePrefix its dry run.
	purgeWindow, purgeLockPrefix, purgeLockConsumption, purgeFinishedPrefix string
	purgeConsumption, purgeMessages, countPurgeablePrefix                   string
}

func buildOutboxQueries(table string) outboxQueries {
	t, c, k := "`"+table+"`", "`"+consumptionTable(table)+"`", "`"+consumersTable(table)+"`"
	return outboxQueries{
		insertPrefix: "INSERT INTO " + t + " (event_id, event_key, event_type, payload, headers, occurred_at, created_at, next_attempt_at) VALUES ",
		// One window of the sweep over finished records of one status, by
		// age, after the cursor (next_attempt_at, id).
		purgeWindow: "SELECT id, next_attempt_at FROM " + t + " WHERE status = ?" +
			" AND next_attempt_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND" +
			" AND (next_attempt_at > ? OR (next_attempt_at = ? AND id > ?))" +
			" ORDER BY next_attempt_at, id LIMIT ?",
		// Locks (waiting, not skipping: only short transactions hold
		// finished records) the window's records that are still finished.
		purgeLockPrefix: "SELECT id FROM " + t + " WHERE status IN (%s) AND id IN (",
		// Locks the named consumers' records of those messages, so that
		// the check below reads state nobody can change before the
		// delete (say, a requeue of a dead letter).
		purgeLockConsumption: "SELECT consumer FROM " + c + " WHERE msg_id IN (",
		// Of the locked records, those every named consumer that should
		// have them finished with longer ago than the retention age too.
		purgeFinishedPrefix: "SELECT o.id FROM " + t + " o WHERE NOT EXISTS (SELECT 1 FROM " + k + " k WHERE k.removing = 0 AND k.start_seq <= o.id" +
			" AND NOT EXISTS (SELECT 1 FROM " + c + " c WHERE c.consumer = k.name AND c.msg_id = o.id AND c.status IN (%s)" +
			" AND c.next_attempt_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND))" +
			" AND o.id IN (",
		purgeConsumption: "DELETE FROM " + c + " WHERE msg_id IN (",
		purgeMessages:    "DELETE FROM " + t + " WHERE id IN (",
		countPurgeablePrefix: "SELECT COUNT(*) FROM " + t + " o WHERE o.status IN (%s)" +
			" AND o.next_attempt_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND" +
			" AND NOT EXISTS (SELECT 1 FROM " + k + " k WHERE k.removing = 0 AND k.start_seq <= o.id" +
			" AND NOT EXISTS (SELECT 1 FROM " + c + " c WHERE c.consumer = k.name AND c.msg_id = o.id AND c.status IN (%s)" +
			" AND c.next_attempt_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND))",
	}
}

// placeholders returns "?, ?, ?" for n values.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// sqlStrings renders validated words as a list of SQL string literals.
func sqlStrings(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = fmt.Sprintf("'%s'", w)
	}
	return strings.Join(quoted, ", ")
}
