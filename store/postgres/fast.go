package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// fastClaimSQL is the claim of the common case (in a transaction of its
// own, after fastLockSQL on a pgx connection: see runPgx): nothing for
// the consumer but the log (no range to take over, no due state row, no
// held message), unordered. It reads up to {lim} messages past the
// consumer's position below the horizon (the first {take} of them, and
// within $4 bytes, are the batch; the rest says there is more), writes
// one range row ($1 token, $2 owner, $3 lease in microseconds) and moves
// the position. When the case is not the common one (ok false) it
// writes nothing and the caller claims the long way.
//
// It returns one row: ok, more and {settled}. It reads no payload:
// fastReadSQL reads the range's messages, in the same round trip, after
// this statement's transaction has committed. The claims of one
// consumer take turns on its row; they hold it while they choose their
// range, and read their batches side by side.
//
// The limits are written into the statement, not passed as parameters:
// with LIMIT a parameter, the server's plan for a generic LIMIT looked
// costlier than a custom one, so it planned the statement anew on every
// claim (about 1 ms of server CPU a claim, a third of the statement's
// cost; TestFastClaimIsPlannedOnce). A worker's claims have one limit.
const fastClaimSQL = `WITH {settle}relax AS (
	-- the relay's bookkeeping commits without waiting for the WAL flush (relayTx)
	SELECT set_config('synchronous_commit', 'off', true) AS v
), c AS (
	SELECT walked_xid, walked_seq, start_seq, cardinality(held) = 0 AS no_held FROM {consumers}
	WHERE id = {c} AND NOT removing FOR UPDATE
), busy AS (
	SELECT NOT (SELECT no_held FROM c)
		OR EXISTS (SELECT 1 FROM {ranges} r WHERE r.consumer_id = {c} AND r.lease_until < statement_timestamp())
		OR EXISTS (SELECT 1 FROM {state} s WHERE s.consumer_id = {c} AND s.status = 'pending' AND s.next_attempt_at <= statement_timestamp()) AS b
), w AS (
	-- the window over the index scan's own order: no sort, no copy
	SELECT o.xid, o.seq, o.seq <= (SELECT start_seq FROM c) OR ({c} = 0 AND o.writer_token <> 0 AND o.writer_until IS NULL)
			OR EXISTS (SELECT 1 FROM {state} s WHERE s.consumer_id = {c} AND s.seq = o.seq) AS skip,
		{c} = 0 AND o.writer_token <> 0 AND o.writer_until > statement_timestamp() AS held,
		row_number() OVER win AS n,
		coalesce(sum(octet_length(o.payload) + coalesce(octet_length(o.headers::text), 0)) OVER win, 0)
			- octet_length(o.payload) - coalesce(octet_length(o.headers::text), 0) AS before
	FROM {outbox} o
	-- the position as values, not a join: the index scan starts there
	WHERE (o.xid, o.seq) > ((SELECT walked_xid FROM c), (SELECT walked_seq FROM c)) AND o.xid < {horizon}
	WINDOW win AS (ORDER BY o.xid, o.seq)
	ORDER BY o.xid, o.seq LIMIT {lim}
), take AS (
	SELECT * FROM w WHERE n <= {take} AND before < $4
), flags AS (
	SELECT NOT (SELECT b FROM busy) AND NOT EXISTS (SELECT 1 FROM take WHERE held) AND EXISTS (SELECT 1 FROM c)
			AND (SELECT v FROM relax) = 'off' AS ok,
		EXISTS (SELECT 1 FROM w WHERE n > (SELECT count(*) FROM take)) AS more
), last AS (
	SELECT xid, seq FROM take ORDER BY xid DESC, seq DESC LIMIT 1
), ins AS (
	INSERT INTO {ranges} (consumer_id, token, from_xid, from_seq, to_xid, to_seq, n, owner, lease_until)
	SELECT {c}, $1, c.walked_xid, c.walked_seq, last.xid, last.seq, (SELECT count(*) FROM take WHERE NOT skip), $2,
		statement_timestamp() + $3 * interval '1 microsecond'
	FROM c, last, flags WHERE flags.ok AND EXISTS (SELECT 1 FROM take WHERE NOT skip)
), upd AS (
	UPDATE {consumers} u SET walked_xid = last.xid, walked_seq = last.seq FROM last, flags WHERE u.id = {c} AND flags.ok
)
SELECT flags.ok, flags.more, {settled} FROM flags`

// fastReadSQL reads the messages of the range that fastClaimSQL took
// ($1 its token): the messages of the log in it that the claim handed
// out, less any that a state row or the writer's publish has settled
// since (a range's settle the long way takes care of those).
//
// The range's ends are values (the claim's way: a join did not bound
// the index scan), and ORDER BY and LIMIT ({take}: the claim's limit, as
// many as a range holds) make the server's plan read the (xid, seq)
// index from the start of the range to its end. Without them it was a
// bitmap scan and a sort, or a scan of the primary key from the
// consumer's start (TestFastClaimIsPlannedOnce).
const fastReadSQL = `WITH r AS (
	SELECT from_xid, from_seq, to_xid, to_seq FROM {ranges} WHERE consumer_id = {c} AND token = $1
)
SELECT o.seq, o.event_id, o.event_key, o.event_type, o.payload, o.headers, o.occurred_at, o.created_at,
	'pending', 0, '', o.created_at, NULL::timestamptz
FROM {outbox} o
WHERE (o.xid, o.seq) > ((SELECT from_xid FROM r), (SELECT from_seq FROM r))
	AND (o.xid, o.seq) <= ((SELECT to_xid FROM r), (SELECT to_seq FROM r))
	AND o.seq > (SELECT start_seq FROM {consumers} WHERE id = {c})
	AND NOT ({c} = 0 AND o.writer_token <> 0 AND o.writer_until IS NULL)
	AND NOT EXISTS (SELECT 1 FROM {state} s WHERE s.consumer_id = {c} AND s.seq = o.seq)
ORDER BY o.xid, o.seq LIMIT {take}`

// fastReadStatement is fastReadSQL for a claim of limit records.
func fastReadStatement(limit int) string {
	return strings.ReplaceAll(fastReadSQL, "{take}", strconv.Itoa(limit))
}

// fastSettleSQL is the settle of a batch whose records were all
// published from one range ($5 its token, $6 how many), put before
// fastClaimSQL's claim: the range row goes. Its result is the flag
// {settled}.
const fastSettleSQL = `settled AS (
	DELETE FROM {ranges} WHERE consumer_id = {c} AND token = $5 AND n = $6 RETURNING 1
), `

// fastClaim claims the common case in one statement through q (see
// fastClaimSQL); ok false: it was not the common case, and nothing was
// written.
func fastClaim(ctx context.Context, q querier, t *target, token int64, p backend.ClaimParams, maxBytes int) (rows []scanned, more, ok bool, err error) {
	rows, more, ok, _, err = fastRun(ctx, q, t, fastStatement(p.Limit, false), p.Limit, token, p.Owner, p.LeaseFor.Microseconds(), maxBytes)
	return rows, more, ok, err
}

// fastSettleAndClaim settles a batch whose records were all published
// from one range (settleToken, n of them) and claims the common case, in
// one statement: one round trip per batch while there is a backlog.
// settled false: the settle did not apply (the batch is not such a
// batch, or is stale), and the caller settles the long way; ok false:
// the claim was not the common case (nothing claimed).
func fastSettleAndClaim(ctx context.Context, q querier, t *target, settleToken int64, n int, token int64, p backend.ClaimParams, maxBytes int) (rows []scanned, more, ok, settled bool, err error) {
	return fastRun(ctx, q, t, fastStatement(p.Limit, true), p.Limit, token, p.Owner, p.LeaseFor.Microseconds(), maxBytes, settleToken, n)
}

// fastStatement is fastClaimSQL for a claim of limit records, with
// fastSettleSQL before it when settle is set.
func fastStatement(limit int, settle bool) string {
	pre, flag := "", "false"
	if settle {
		pre, flag = fastSettleSQL, "EXISTS (SELECT 1 FROM settled)"
	}
	return strings.NewReplacer("{settle}", pre, "{settled}", flag,
		"{lim}", strconv.Itoa(limit+1), "{take}", strconv.Itoa(limit)).Replace(fastClaimSQL)
}

// fastRun runs stmt, a fastStatement, and then fastReadSQL for the
// range it took (token, args[0]). On the Store's *sql.DB it runs them
// through pgx's own API on one of the pool's connections: database/sql's
// scanning of the batch's rows (every value converted to a
// driver.Value, then copied again into the destination) was a third of
// a worker's CPU per delivered event. limit is the most records it
// returns.
func fastRun(ctx context.Context, q querier, t *target, stmt string, limit int, args ...any) (rows []scanned, more, ok, settled bool, err error) {
	query, read := t.render(stmt), t.render(fastReadStatement(limit))
	res := fastResult{rows: make([]scanned, 0, limit)}
	err = errNotPgxConn
	if db, isDB := q.(*sql.DB); isDB {
		lock := t.render(fastLockSQL)
		err = onPgxConn(ctx, db, func(c *pgx.Conn) error {
			err := res.runPgx(ctx, c, lock, query, read, args)
			if err != nil {
				rollBackAborted(ctx, c)
			}
			return err
		})
	}
	if errors.Is(err, errNotPgxConn) {
		// In a transaction, or on a driver that wraps pgx's (one that
		// traces or logs the statements): database/sql's way.
		err = res.runSQL(ctx, q, query, read, args)
	}
	if err != nil {
		return nil, false, false, false, err
	}
	if !res.ok {
		return nil, false, false, res.settled, nil
	}
	return res.rows, res.more, true, res.settled, nil
}

// fastResult is what a fast claim returned: the flags of fastClaimSQL's
// row, and the records of the range it took.
type fastResult struct {
	ok, more, settled bool
	rows              []scanned
}

// runSQL runs the claim, then the read, through database/sql: in a
// transaction, the read sees the range the claim wrote; on a *sql.DB
// each is a transaction of its own, and the claim waits for the
// consumer's row inside its statement.
func (f *fastResult) runSQL(ctx context.Context, q querier, query, read string, args []any) error {
	if err := q.QueryRowContext(ctx, query, args...).Scan(&f.ok, &f.more, &f.settled); err != nil || !f.ok {
		return err
	}
	rows, err := queryRecords(ctx, q, read, args[0])
	f.rows = append(f.rows, rows...)
	return err
}

// fastLockSQL takes the consumer's row before a fast statement, in the
// same transaction (see runPgx).
const fastLockSQL = `SELECT 1 FROM {consumers} WHERE id = {c} FOR UPDATE`

// runPgx sends, on c and in one pipeline (one round trip): a
// transaction of lock and query, then read of the range query took; and
// scans read's columns of recordCols as scanRecord does.
//
// Claims of a consumer take turns on its row: a statement that waited
// for the row inside the fast statement found it updated by the claim
// before and ran PostgreSQL's recheck of an updated row (EvalPlanQual),
// which sets up every subplan of the statement again (a profile at 8
// workers: a sixth of the server's CPU). Waiting in the small statement
// instead, the fast statement starts with the row its own and a snapshot
// that sees its latest version. The read, after the commit, does not
// hold the row: at 4 and 8 workers, reading the records in the
// transaction held it twice as long. A statement that fails leaves the
// transaction aborted, which rollBackAborted ends.
func (f *fastResult) runPgx(ctx context.Context, c *pgx.Conn, lock, query, read string, args []any) error {
	var b pgx.Batch
	b.Queue("BEGIN")
	b.Queue(lock)
	b.Queue(query, args...)
	b.Queue("COMMIT")
	b.Queue(read, args[0])
	br := c.SendBatch(ctx, &b)
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	if err := br.QueryRow().Scan(&f.ok, &f.more, &f.settled); err != nil {
		return err
	}
	if _, err := br.Exec(); err != nil {
		return err
	}
	rs, err := br.Query()
	if err != nil {
		return err
	}
	defer rs.Close()
	// One set of destinations for every row (pgx gives each row's bytes
	// and times new memory, and r is copied out).
	var (
		r                       outbox.Record
		key, typ, payload, hdrs []byte
		occurred, finished      *time.Time
		status                  string
	)
	dest := []any{&r.Seq, &r.ID, &key, &typ, &payload, &hdrs, &occurred, &r.EnqueuedAt,
		&status, &r.Attempts, &r.LastError, &r.NextAttemptAt, &finished}
	for rs.Next() {
		if err := rs.Scan(dest...); err != nil {
			return err
		}
		f.rows = append(f.rows, finishRecord(r, key, typ, payload, hdrs, occurred, finished, status))
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return err
	}
	return br.Close()
}

// rollBackAborted ends the transaction that a failed runPgx left open
// on c (aborted, or not yet committed), so that the pool reuses the
// connection; a connection that does not answer is closed, and the
// pool drops it (as pgx's driver drops one in a transaction).
func rollBackAborted(ctx context.Context, c *pgx.Conn) {
	if c.IsClosed() || c.PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		_ = c.Close(ctx)
	}
}

// errNotPgxConn says that a connection of the Store's pool is not pgx's
// stdlib one: a driver that wraps it, for one.
var errNotPgxConn = errors.New("postgres store: the pool's connection is not pgx's stdlib one")

// onPgxConn runs fn on the pgx connection under one of db's
// connections. A connection pgx has closed is database/sql's bad
// connection (the pool then drops it). On a connection of another
// driver (one that wraps pgx's, as tracing drivers do) it returns
// errNotPgxConn and does not run fn.
func onPgxConn(ctx context.Context, db *sql.DB, fn func(*pgx.Conn) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return errNotPgxConn
		}
		if sc.Conn().IsClosed() {
			return driver.ErrBadConn
		}
		return fn(sc.Conn())
	})
}
