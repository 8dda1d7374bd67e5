package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

var _ backend.StatsReader = (*Store)(nil)

// Stats reports the default consumer's backlog: pending (and leased)
// records, dead letters, the age of the oldest pending record, and both
// counts by type. It reads only pending and dead records, through an
// index, never the published history, so it is cheap to call every few
// seconds on a table with millions of published rows.
// ConsumerStore.Stats reports a named consumer's.
func (s *Store) Stats(ctx context.Context) (backend.Stats, error) {
	return s.stats(ctx)
}

// stats reads the channel's pending and dead records by status and type.
func (s *channel) stats(ctx context.Context) (backend.Stats, error) {
	rows, err := statsSQL(s.t).query(ctx, s.db)
	if err != nil {
		return backend.Stats{}, s.wrap("stats", err)
	}
	defer rows.Close()
	st := backend.Stats{ByType: map[string]backend.TypeStats{}}
	for rows.Next() {
		var (
			status, typ string
			n, leased   int
			oldestMicro int64
		)
		if err := rows.Scan(&status, &typ, &n, &leased, &oldestMicro); err != nil {
			return backend.Stats{}, s.wrap("stats", err)
		}
		ts := st.ByType[typ]
		if status == string(outbox.StatusPending) {
			st.Pending += n
			st.Leased += leased
			ts.Pending += n
			st.OldestPending = max(st.OldestPending, micros(oldestMicro))
		} else {
			st.Dead += n
			ts.Dead += n
		}
		st.ByType[typ] = ts
	}
	if err := rows.Err(); err != nil {
		return backend.Stats{}, s.wrap("stats", err)
	}
	return st, nil
}

// Stats reports this consumer's backlog as Store.Stats does the default
// consumer's. Messages that are to reach it but have not been handed over
// yet count as pending (up to 100,000 of them are counted).
func (c *ConsumerStore) Stats(ctx context.Context) (backend.Stats, error) {
	st, err := c.stats(ctx)
	if err != nil {
		return st, err
	}
	if err := c.addWaiting(ctx, &st); err != nil {
		return st, err
	}
	return st, nil
}

// addWaiting counts the messages not handed over to the consumer yet as
// pending.
func (c *ConsumerStore) addWaiting(ctx context.Context, st *backend.Stats) error {
	var (
		start  int64
		cursor sql.NullInt64
	)
	switch err := infoSQL(c.t, c.name).queryRow(ctx, c.db).Scan(&start, &cursor); {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s: stats: %w", c.what, ErrUnknownConsumer)
	case err != nil:
		return c.wrap("stats", err)
	}
	waiting := waitingSQL(c.t, start, maxWaitingCounted)
	if cursor.Valid {
		waiting = waitingBackfillSQL(c.t, cursor.Int64, maxWaitingCounted)
	}
	rows, err := waiting.query(ctx, c.db)
	if err != nil {
		return c.wrap("stats", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			typ         string
			n           int
			oldestMicro int64
		)
		if err := rows.Scan(&typ, &n, &oldestMicro); err != nil {
			return c.wrap("stats", err)
		}
		ts := st.ByType[typ]
		ts.Pending += n
		st.ByType[typ] = ts
		st.Pending += n
		st.OldestPending = max(st.OldestPending, micros(oldestMicro))
	}
	if err := rows.Err(); err != nil {
		return c.wrap("stats", err)
	}
	return nil
}

// maxWaitingCounted bounds how many not yet handed over messages
// ConsumerStore.Stats reads.
const maxWaitingCounted = 100_000

func micros(n int64) time.Duration { return time.Duration(n) * time.Microsecond }

// statsSQL counts the pending and dead records by status and type, with
// the leased ones and the age of the oldest. TestStatsAndRetentionOnAMillionPublishedRows
// keeps its plan: a range of an index over pending and dead records
// only.
func statsSQL(t *target) statement {
	return t.render("SELECT status, event_type, COUNT(*), COALESCE(SUM(status = 'pending' AND " + workerLeased + " AND lease_until > UTC_TIMESTAMP(6)), 0), COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6)), 0) FROM {table} WHERE {scope}status IN ('pending', 'dead') GROUP BY status, event_type")
}

// infoSQL reads where consumer name starts and how far its backfill has
// come (NULL: done).
func infoSQL(t *target, name string) statement {
	return t.render("SELECT start_seq, backfill_cursor FROM {consumers} WHERE name = ? AND removing = 0", name)
}

// waitingSQL counts, by type, up to limit messages not handed over yet
// from start on, with the age of the oldest.
func waitingSQL(t *target, start int64, limit int) statement {
	return t.render("SELECT event_type, COUNT(*), COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6)), 0) FROM (SELECT event_type, created_at FROM {outbox} WHERE fanout = 0 AND id >= ? ORDER BY id LIMIT ?) w GROUP BY event_type", start, limit)
}

// waitingBackfillSQL is waitingSQL for a consumer that is backfilling:
// everything after its cursor waits.
func waitingBackfillSQL(t *target, cursor int64, limit int) statement {
	return t.render("SELECT event_type, COUNT(*), COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6)), 0) FROM (SELECT event_type, created_at FROM {outbox} WHERE id > ? ORDER BY id LIMIT ?) w GROUP BY event_type", cursor, limit)
}
