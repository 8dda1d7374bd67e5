package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// MaxConsumerNameLength is the longest consumer name.
const MaxConsumerNameLength = 64

var consumerNameRE = regexp.MustCompile(fmt.Sprintf(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,%d}$`, MaxConsumerNameLength-1))

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

func validConsumerName(name string) error {
	if !consumerNameRE.MatchString(name) {
		return fmt.Errorf("mysql store: consumer name %q: must be 1 to %d letters, digits, '_', '.' or '-', not starting with '.' or '-'", name, MaxConsumerNameLength)
	}
	return nil
}

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

// register is AddConsumer's transaction; token names the call.
func (s *Store) register(ctx context.Context, name string, from StartFrom, token string) error {
	tx, err := s.db.BeginTx(ctx, readCommitted)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	// Exclusive locks on the registry wait for every hand-over in
	// progress (they hold it in share mode) and keep new ones out until
	// this commits, so none hands over a message above start without this
	// consumer.
	if done, err := s.lockRegistry(ctx, tx, name, token); done || err != nil {
		return err
	}
	var last uint64
	if err := lastIDSQL(s.t).queryRow(ctx, tx).Scan(&last); err != nil {
		return err
	}
	start, cursor := last+1, sql.NullInt64{}
	if from == StartBeginning {
		start, cursor = 1, sql.NullInt64{Int64: 0, Valid: true}
	}
	if _, err := registerSQL(s.t, name, start, cursor, token).exec(ctx, tx); err != nil {
		if classify(err) == classDuplicate {
			return fmt.Errorf("mysql store: add consumer %q: %w", name, ErrConsumerExists)
		}
		return err
	}
	return tx.Commit()
}

// lockRegistry locks the registry for AddConsumer and looks name up in
// it: done when this call (token) registered it already, on an earlier
// try whose commit reply was lost; ErrConsumerExists when anyone else did.
func (s *Store) lockRegistry(ctx context.Context, tx *sql.Tx, name, token string) (done bool, err error) {
	rows, err := lockRegistrySQL(s.t).query(ctx, tx)
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
// state, in batches, returning how many records it deleted. From its
// first step the consumer is out: a worker still running for it fails
// its next claim with ErrUnknownConsumer, no message is handed over to
// it, retention no longer waits for it, and AddConsumer of the name is
// refused until the removal has finished. If it fails half way, running
// it again finishes the clean-up. It is safe to retry. It returns an
// error wrapping ErrUnknownConsumer if there was neither such a consumer
// nor any state of one.
func (s *Store) RemoveConsumer(ctx context.Context, name string) (int, error) {
	if err := validConsumerName(name); err != nil {
		return 0, err
	}
	registered, err := s.markRemoving(ctx, name)
	if err != nil {
		return 0, s.wrap("remove consumer "+name, err)
	}
	deleted, err := s.dropState(ctx, name)
	if err != nil {
		return deleted, s.wrap("remove consumer "+name, err)
	}
	if _, err := execRetrying(ctx, s.db, unregisterSQL(s.t, name)); err != nil {
		return deleted, s.wrap("remove consumer "+name, err)
	}
	if !registered && deleted == 0 {
		return 0, fmt.Errorf("mysql store: remove consumer %q: %w", name, ErrUnknownConsumer)
	}
	return deleted, nil
}

// markRemoving marks consumer name as being removed and reports whether
// it is registered (marked now, or by an earlier call or try).
func (s *Store) markRemoving(ctx context.Context, name string) (registered bool, err error) {
	err = retryTransient(ctx, func() error {
		if _, err := markRemovingSQL(s.t, name).exec(ctx, s.db); err != nil {
			return err
		}
		var removing bool
		switch err := removingSQL(s.t, name).queryRow(ctx, s.db).Scan(&removing); {
		case errors.Is(err, sql.ErrNoRows):
			registered = false
		case err != nil:
			return err
		default:
			registered = true
		}
		return nil
	})
	return registered, err
}

// dropState deletes consumer name's delivery state in batches and returns
// how many rows it deleted.
func (s *Store) dropState(ctx context.Context, name string) (int, error) {
	deleted := 0
	for {
		n, err := execRetrying(ctx, s.db, dropStateSQL(s.t, name, removeBatch))
		if err != nil {
			return deleted, err
		}
		deleted += int(n)
		if n < removeBatch {
			return deleted, nil
		}
	}
}

// removeBatch is how many state rows one statement of RemoveConsumer
// deletes.
const removeBatch = 1000

// Consumers lists the registered named consumers by name.
func (s *Store) Consumers(ctx context.Context) ([]ConsumerInfo, error) {
	rows, err := consumersSQL(s.t).query(ctx, s.db)
	if err != nil {
		return nil, s.wrap("consumers", err)
	}
	defer rows.Close()
	var out []ConsumerInfo
	for rows.Next() {
		var (
			c       ConsumerInfo
			cursor  sql.NullInt64
			created dbTime
		)
		if err := rows.Scan(&c.Name, &c.StartSeq, &cursor, &created, &c.Removing); err != nil {
			return nil, s.wrap("consumers", err)
		}
		c.Backfilling, c.BackfillAt, c.CreatedAt = cursor.Valid, cursor.Int64, created.t
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("consumers", err)
	}
	return out, nil
}

// lockRegistrySQL locks the whole registry, waiting for the hand-overs
// that hold it in share mode.
func lockRegistrySQL(t *target) statement {
	return t.render("SELECT name, removing, COALESCE(add_token, '') FROM {consumers} ORDER BY name FOR UPDATE")
}

// lastIDSQL reads the last message written (0: none).
func lastIDSQL(t *target) statement {
	return t.render("SELECT COALESCE(MAX(id), 0) FROM {outbox}")
}

// registerSQL registers consumer name, added by the call token: it gets
// the messages from start on, and, with a cursor, is handed the older
// ones over by backfill.
func registerSQL(t *target, name string, start uint64, cursor sql.NullInt64, token string) statement {
	return t.render("INSERT INTO {consumers} (name, start_seq, backfill_cursor, created_at, add_token) VALUES (?, ?, ?, UTC_TIMESTAMP(6), ?)", name, start, cursor, token)
}

// A removal marks the consumer, deletes its state in batches, then
// unregisters it. A consumer marked removing is out of every hand-over,
// claim and retention decision from the moment the mark commits.

// markRemovingSQL marks consumer name as being removed.
func markRemovingSQL(t *target, name string) statement {
	return t.render("UPDATE {consumers} SET removing = 1 WHERE name = ?", name)
}

// removingSQL reads whether consumer name is being removed (no row: not
// registered).
func removingSQL(t *target, name string) statement {
	return t.render("SELECT removing FROM {consumers} WHERE name = ?", name)
}

// dropStateSQL deletes up to limit rows of consumer name's state.
func dropStateSQL(t *target, name string, limit int) statement {
	return t.render("DELETE FROM {consumption} WHERE consumer = ? LIMIT ?", name, limit)
}

// unregisterSQL removes consumer name, once marked, from the registry.
func unregisterSQL(t *target, name string) statement {
	return t.render("DELETE FROM {consumers} WHERE name = ? AND removing = 1", name)
}

// consumersSQL lists the registry.
func consumersSQL(t *target) statement {
	return t.render("SELECT name, start_seq, backfill_cursor, created_at, removing FROM {consumers} ORDER BY name")
}
