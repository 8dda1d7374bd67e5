package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/outboxrelay/outboxrelay/internal/mysqlerr"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/internal/storecore"
)

// MaxConsumerNameLength is the longest consumer name.
const MaxConsumerNameLength = storecore.MaxConsumerNameLength

// Errors of the consumer registry (backend's).
var (
	// ErrUnknownConsumer: no consumer of that name is registered.
	ErrUnknownConsumer = backend.ErrUnknownConsumer
	// ErrConsumerExists: AddConsumer of a name already registered.
	ErrConsumerExists = backend.ErrConsumerExists
)

// StartFrom says where a consumer added to a table with history starts
// (see backend.StartFrom).
type StartFrom = backend.StartFrom

// Where a consumer starts.
const (
	StartNow       = backend.StartNow
	StartBeginning = backend.StartBeginning
)

// ConsumerInfo describes a registered named consumer (see
// backend.ConsumerInfo).
type ConsumerInfo = backend.ConsumerInfo

// validConsumerName refuses a name that is not 1 to
// MaxConsumerNameLength letters, digits, '_', '.' or '-', not starting
// with '.' or '-'.
func validConsumerName(name string) error { return storecore.CheckConsumerName(dialect.What, name) }

// AddConsumer registers a named consumer of the table, starting from
// now or from the beginning (see StartFrom). It returns an error wrapping
// ErrConsumerExists if the name is taken, also by a consumer whose
// removal has not finished (run RemoveConsumer again to finish it). It is
// safe to retry: a call whose commit reply was lost recognises its own
// registration. Run Migrate first.
func (s *Store) AddConsumer(ctx context.Context, name string, from StartFrom) error {
	if err := validConsumerName(name); err != nil {
		return err
	}
	if from != StartNow && from != StartBeginning {
		return fmt.Errorf("mysql store: add consumer %q: start %v: want StartNow or StartBeginning", name, from)
	}
	token, err := newToken()
	if err != nil {
		return fmt.Errorf("mysql store: add consumer %q: %w", name, err)
	}
	err = retryTransient(ctx, func() error { return s.register(ctx, name, from, token) })
	if errors.Is(err, ErrConsumerExists) {
		return err
	}
	if err != nil {
		return s.wrap("add consumer "+name, err)
	}
	return nil
}

// register is AddConsumer's transaction; token names the call. The
// registry is locked whole (it holds few rows): the new consumer's id is
// the next free one, and its position the last message written (from
// now) or 0 (from the beginning), read under the lock. A message whose
// transaction is still open at that moment, below the position, is not
// the new consumer's (StartNow says so).
func (s *Store) register(ctx context.Context, name string, from StartFrom, token string) error {
	return inTx(ctx, s.db, func(tx *sql.Tx) error {
		if done, err := s.lockRegistry(ctx, tx, name, token); done || err != nil {
			return err
		}
		var last uint64
		if err := tx.QueryRowContext(ctx, s.t.sql("SELECT COALESCE(MAX(id), 0) FROM {outbox}")).Scan(&last); err != nil {
			return err
		}
		if from == StartBeginning {
			last = 0
		}
		_, err := tx.ExecContext(ctx, s.t.sql(`INSERT INTO {consumers} (id, name, walked, start_seq, created_at, add_token)
SELECT COALESCE(MAX(id), 0) + 1, ?, ?, ?, UTC_TIMESTAMP(6), ? FROM {consumers}`), name, last, last, token)
		if mysqlerr.Classify(err) == mysqlerr.Duplicate {
			return fmt.Errorf("mysql store: add consumer %q: %w", name, ErrConsumerExists)
		}
		return err
	})
}

// lockRegistry locks the registry for AddConsumer and looks name up in
// it: done when this call (token) registered it already, on an earlier
// try whose commit reply was lost; ErrConsumerExists when anyone else did.
func (s *Store) lockRegistry(ctx context.Context, tx *sql.Tx, name, token string) (done bool, err error) {
	rows, err := tx.QueryContext(ctx, s.t.sql("SELECT name, removing, COALESCE(add_token, '') FROM {consumers} ORDER BY id FOR UPDATE"))
	if err != nil {
		return false, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			n, addedBy string
			removing   bool
		)
		if err := rows.Scan(&n, &removing, &addedBy); err != nil {
			return false, err
		}
		switch {
		case n != name:
		case addedBy == token:
			return true, nil
		case removing:
			return false, fmt.Errorf("mysql store: add consumer %q: it is being removed (run RemoveConsumer again to finish): %w", name, ErrConsumerExists)
		default:
			return false, fmt.Errorf("mysql store: add consumer %q: %w", name, ErrConsumerExists)
		}
	}
	return false, rows.Err()
}

// RemoveConsumer unregisters a named consumer and deletes its delivery
// state, in batches, returning how many state rows it deleted. From its
// first step the consumer is out: a worker still running for it fails
// its next claim with ErrUnknownConsumer, retention no longer waits for
// it, and AddConsumer of the name is refused until the removal has
// finished. If it fails half way, running it again finishes the
// clean-up. It is safe to retry. It returns an error wrapping
// ErrUnknownConsumer if there is no such consumer.
func (s *Store) RemoveConsumer(ctx context.Context, name string) (int, error) {
	if err := validConsumerName(name); err != nil {
		return 0, err
	}
	var id uint32
	err := retryTransient(ctx, func() error {
		if _, err := s.db.ExecContext(ctx, s.t.sql("UPDATE {consumers} SET removing = 1 WHERE name = ?"), name); err != nil {
			return err
		}
		return s.db.QueryRowContext(ctx, s.t.sql("SELECT id FROM {consumers} WHERE name = ?"), name).Scan(&id)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("mysql store: remove consumer %q: %w", name, ErrUnknownConsumer)
	}
	if err != nil {
		return 0, s.wrap("remove consumer "+name, err)
	}
	deleted := 0
	for _, table := range []string{"{state}", "{ranges}", "{gaps}"} {
		for {
			n, err := execRetrying(ctx, s.db, s.t.render("DELETE FROM "+table+" WHERE consumer_id = ? LIMIT "+strconv.Itoa(removeBatch), id))
			if err != nil {
				return deleted, s.wrap("remove consumer "+name, err)
			}
			if table == "{state}" {
				deleted += int(n)
			}
			if n < removeBatch {
				break
			}
		}
	}
	if _, err := execRetrying(ctx, s.db, s.t.render("DELETE FROM {consumers} WHERE id = ? AND removing = 1", id)); err != nil {
		return deleted, s.wrap("remove consumer "+name, err)
	}
	return deleted, nil
}

// removeBatch is how many rows one statement of RemoveConsumer deletes.
const removeBatch = 1000

// Consumers lists the registered named consumers by name. A consumer
// started from the beginning is backfilling while its walk has not yet
// passed the messages written before it was added.
func (s *Store) Consumers(ctx context.Context) ([]ConsumerInfo, error) {
	return storecore.Consumers(ctx, s.db, s.wrapper("consumers"), s.t.sql(`SELECT c.name, c.start_seq, c.walked, c.created_at, c.removing,
	c.start_seq = 0 AND EXISTS (SELECT 1 FROM {outbox} o WHERE o.id > c.walked AND o.created_at <= c.created_at)
FROM {consumers} c WHERE c.id <> 0 ORDER BY c.name`), func(t dbTime) time.Time { return t.t })
}

// resolve returns the channel's target: for a named consumer, with its
// id from the registry (ErrUnknownConsumer if it has none).
func (s *channel) resolve(ctx context.Context) (*target, error) {
	if s.consumer == "" {
		return s.t, nil
	}
	var (
		id       uint32
		removing bool
	)
	err := retryTransient(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.t.sql("SELECT id, removing FROM {consumers} WHERE name = ?"), s.consumer).Scan(&id, &removing)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows) || (err == nil && removing):
		return nil, fmt.Errorf("%s: %w", s.what, ErrUnknownConsumer)
	case err != nil:
		return nil, s.wrap("read the consumer registry", err)
	}
	s.targetsMu.Lock()
	defer s.targetsMu.Unlock()
	if s.named == nil || s.named.consumerID != id {
		s.named = newTarget(s.table, id, s.purgeDead)
	}
	return s.named, nil
}
