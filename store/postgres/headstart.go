package postgres

import (
	"context"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/internal/storecore"
)

// HeadStartBatch returns, without writing anything, those of ids that
// this Store enqueued with a head start and that it still holds with at
// least minLeft of it to run, in insert order; the batch's token (the
// Store's negative head start token) settles them, and left is the least
// head start they have left, on the database clock at the read. A
// message a claim has taken from the writer since is left out.
func (s *Store) HeadStartBatch(ctx context.Context, ids []string, minLeft time.Duration) (backend.Batch, time.Duration, error) {
	return s.headStartBatch(ctx, ids, minLeft, headStartBatchSQL)
}

// OrderedHeadStartBatch is HeadStartBatch that keeps per-key order: it
// leaves out every message of a key while an older message of that key,
// not among ids, is still to be delivered to the default consumer (the
// order gate of the workers' claims, keyGate), or while an older one
// among ids is left out. It reads what has committed, and locks nothing:
// a message the gate passes is delivered already, and one it holds back
// counts as pending until whatever is taking it commits.
func (s *Store) OrderedHeadStartBatch(ctx context.Context, ids []string, minLeft time.Duration) (backend.Batch, time.Duration, error) {
	return s.headStartBatch(ctx, ids, minLeft, orderedHeadStartBatchSQL)
}

// headStartBatchSQL reads the messages of ids ($2) the Store's head start
// ($3) holds with at least $4 µs left; $1 is the default consumer's ID
// (0), as keyGate wants it.
const headStartBatchSQL = `SELECT {logcols}, (extract(epoch FROM o.writer_until - statement_timestamp()) * 1000000)::bigint
FROM {outbox} o WHERE o.event_id = ANY($2::text[]) AND o.writer_token = $3
	AND o.writer_until > statement_timestamp() + $4 * interval '1 microsecond'
	AND NOT EXISTS (SELECT 1 FROM {state} s WHERE s.consumer_id = $1 AND s.seq = o.seq AND s.lease_token <> $3)
ORDER BY o.seq`

// orderedHeadStartBatchSQL is headStartBatchSQL with the order gate.
var orderedHeadStartBatchSQL = `WITH mine AS (
	SELECT o.seq, o.event_key, o.writer_token = $3 AND o.writer_until > statement_timestamp() + $4 * interval '1 microsecond'
		AND NOT EXISTS (SELECT 1 FROM {state} s WHERE s.consumer_id = $1 AND s.seq = o.seq AND s.lease_token <> $3) AS held
	FROM {outbox} o WHERE o.event_id = ANY($2::text[])
), c AS (
	SELECT walked_xid, walked_seq FROM {consumers} WHERE id = $1
)
SELECT {logcols}, (extract(epoch FROM o.writer_until - statement_timestamp()) * 1000000)::bigint
FROM mine m JOIN {outbox} o ON o.seq = m.seq
WHERE m.held AND (m.event_key = '\x' OR NOT (
	EXISTS (SELECT 1 FROM mine e WHERE e.event_key = m.event_key AND e.seq < m.seq AND NOT e.held)
	OR ` + keyGate("m.event_key", "m.seq", "((SELECT walked_xid FROM c), (SELECT walked_seq FROM c))", " AND {x} NOT IN (SELECT seq FROM mine)") + `))
ORDER BY o.seq`

func (s *Store) headStartBatch(ctx context.Context, ids []string, minLeft time.Duration, stmt string) (backend.Batch, time.Duration, error) {
	if len(ids) == 0 {
		return backend.Batch{}, 0, nil
	}
	if err := storecore.CheckHeadStartBatch(dialect.What, ids, minLeft); err != nil {
		return backend.Batch{}, 0, err
	}
	rows, err := s.db.QueryContext(ctx, s.t.render(stmt), int64(0), ids, s.headStart, minLeft.Microseconds())
	if err != nil {
		return backend.Batch{}, 0, s.wrap("head start batch", err)
	}
	defer rows.Close()
	var (
		out   []scanned
		least int64 = -1
		b           = budget{left: s.opts.MaxClaimBytes}
	)
	for rows.Next() {
		var left int64
		r, err := scanRecordWith(rows, &left)
		if err != nil {
			return backend.Batch{}, 0, s.wrap("head start batch", err)
		}
		if b.spent() || (b.taken && b.left-recordBytes(r.rec) < 0) {
			break
		}
		b = b.after([]scanned{r})
		out = append(out, r)
		if least < 0 || left < least {
			least = left
		}
	}
	if err := rows.Err(); err != nil {
		return backend.Batch{}, 0, s.wrap("head start batch", err)
	}
	if len(out) == 0 {
		return backend.Batch{}, 0, nil
	}
	return toBatch(s.headStart, out), time.Duration(least) * time.Microsecond, nil
}

// EndHeadStart ends the head start of those of ids that this Store
// enqueued with one and still holds: the default consumer's readers take
// them at once (a state row a walk left for one is due at once). It
// returns how many it changed.
func (s *Store) EndHeadStart(ctx context.Context, ids []string) (int, error) {
	return s.endHeadStart(ctx, ids, `WITH o AS (
	UPDATE {outbox} o SET writer_until = statement_timestamp()
	WHERE o.event_id = ANY($1::text[]) AND o.writer_token = $2 AND o.writer_until > statement_timestamp()
	RETURNING o.seq
), s AS (
	UPDATE {state} s SET next_attempt_at = statement_timestamp(), lease_token = 0
	FROM o WHERE s.consumer_id = 0 AND s.seq = o.seq AND s.status = 'pending' AND s.lease_token = $2
)
SELECT count(*) FROM o`, s.headStart)
}

// endHeadStart runs stmt, which takes ids ($1, and args after it) and
// returns how many records it made due.
func (c *channel) endHeadStart(ctx context.Context, ids []string, stmt string, args ...any) (int, error) {
	if ok, err := storecore.CheckEndHeadStart(c.what, ids); !ok {
		return 0, err
	}
	t, err := c.resolve(ctx)
	if err != nil {
		return 0, err
	}
	n, err := retrying(ctx, func() (int, error) {
		var n int
		err := c.db.QueryRowContext(ctx, t.render(stmt), append([]any{ids}, args...)...).Scan(&n)
		return n, err
	})
	if err != nil {
		return 0, c.wrap("end head start", err)
	}
	return n, nil
}
