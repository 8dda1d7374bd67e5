package storecore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Store is what every SQL store is: the backend.Store with all of its
// extensions, so that a worker, a dashboard or a tool finds the same on
// each database. Each store asserts it at compile time.
type Store interface {
	backend.Store
	backend.SettleClaimer
	backend.HeadStartLeaser
	backend.OrderedHeadStartLeaser
	backend.HeadStartEnder
	backend.Outbox
	backend.StatsReader
	backend.Purger
}

// Stats runs a store's stats query with args on db and reads its rows
// into backend.Stats; its error passes through wrap. Each row is a
// status ('pending' or 'dead'), an event type, how many records, how
// many of them leased, and the age of the oldest in microseconds.
func Stats(ctx context.Context, db *sql.DB, wrap func(error) error, query string, args ...any) (backend.Stats, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return backend.Stats{}, wrap(err)
	}
	st, err := readStats(rows)
	if err != nil {
		return backend.Stats{}, wrap(err)
	}
	return st, nil
}

// readStats reads the rows of Stats' query, and closes them.
func readStats(rows *sql.Rows) (backend.Stats, error) {
	defer rows.Close()
	st := backend.Stats{ByType: map[string]backend.TypeStats{}}
	for rows.Next() {
		var (
			status      string
			typ         []byte
			n, leased   int
			oldestMicro int64
		)
		if err := rows.Scan(&status, &typ, &n, &leased, &oldestMicro); err != nil {
			return backend.Stats{}, err
		}
		ts := st.ByType[string(typ)]
		if status == string(outbox.StatusPending) {
			st.Pending += n
			st.Leased += leased
			ts.Pending += n
			st.OldestPending = max(st.OldestPending, time.Duration(oldestMicro)*time.Microsecond)
		} else {
			st.Dead += n
			ts.Dead += n
		}
		st.ByType[string(typ)] = ts
	}
	if err := rows.Err(); err != nil {
		return backend.Stats{}, err
	}
	return st, nil
}

// Consumers runs a store's listing of its named consumers (query) on db
// and reads its rows into backend.ConsumerInfo; its error passes through
// wrap. Each row is a name, the seq the consumer starts after, the seq
// its walk is at, when it was added (a T, which created turns into a
// time in UTC), whether it is being removed, and whether it is
// backfilling.
func Consumers[T any](ctx context.Context, db *sql.DB, wrap func(error) error, query string, created func(T) time.Time) ([]backend.ConsumerInfo, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, wrap(err)
	}
	out, err := readConsumers(rows, created)
	if err != nil {
		return nil, wrap(err)
	}
	return out, nil
}

// readConsumers reads the rows of Consumers' query, and closes them.
func readConsumers[T any](rows *sql.Rows, created func(T) time.Time) ([]backend.ConsumerInfo, error) {
	defer rows.Close()
	var out []backend.ConsumerInfo
	for rows.Next() {
		var (
			c               backend.ConsumerInfo
			startSeq, atSeq int64
			at              T
		)
		if err := rows.Scan(&c.Name, &startSeq, &atSeq, &at, &c.Removing, &c.Backfilling); err != nil {
			return nil, err
		}
		c.StartSeq, c.CreatedAt = startSeq+1, created(at)
		if c.Backfilling {
			c.BackfillAt = atSeq
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// NotRequeued is the error of a Requeue of message id that changed
// nothing, from the consumer's record of it as the store's get returned
// it (rec, err): an error wrapping outbox.ErrNotFound if there is no
// such record, get's error if it read nothing else, and otherwise one
// wrapping backend.ErrNotDead with the record's status. what prefixes
// the errors.
func NotRequeued(what, id string, rec outbox.Record, err error) error {
	if errors.Is(err, outbox.ErrNotFound) {
		return fmt.Errorf("%s: requeue %q: %w", what, id, outbox.ErrNotFound)
	}
	if rec.ID == "" && err != nil {
		return err
	}
	return fmt.Errorf("%s: requeue %q: status %s: %w", what, id, rec.Status, backend.ErrNotDead)
}

// RequeueInSteps runs the steps of a RequeueDead with opts (defaults
// filled in): step requeues at most n dead letters and returns how many
// it did. The steps go on, each of at most opts.BatchSize and within
// opts.Limit in all, until one requeues fewer than it was allowed or
// fails. It returns how many they requeued in all, and the error that
// stopped them.
func RequeueInSteps(opts backend.RequeueOptions, step func(n int) (int, error)) (int, error) {
	total := 0
	for opts.Limit == 0 || total < opts.Limit {
		n := opts.BatchSize
		if opts.Limit > 0 {
			n = min(n, opts.Limit-total)
		}
		done, err := step(n)
		total += done
		if err != nil || done < n {
			return total, err
		}
	}
	return total, nil
}
