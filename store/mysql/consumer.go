package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Named consumers.
//
// The Store delivers through the status columns of the outbox table: it
// is the table's default consumer (room-service's IM channel), and those
// columns keep meaning "the default consumer has handled it". Further
// consumers (activity, audit …) each keep their own delivery state in
// the consumption table, one row per consumer and message, with its own
// status, retry_count, last_error, schedule and lease: a consumer's
// failures, backlog and dead letters never touch another's rows.
//
// A message is written once, into the outbox table. It is handed over to
// the named consumers (a consumption row for each that is to get it) by
// whichever named consumer claims next, in a short transaction before
// its claim: the messages whose fanout flag is still 0 (idx_fanout finds
// them) get their rows, and the flag is set. That transaction reads the
// outbox rows without locking them, so it never holds up the default
// consumer; it locks the consumer registry in share mode, so that a
// consumer being added or removed at that moment is either in or out,
// never half. Setting the flag does lock the outbox rows, briefly, and
// skips (SKIP LOCKED) any the default consumer holds at that moment: their
// flag is set next time (handing over again is a no-op).
//
// A consumer added "from now" gets the messages written after it was
// added; one added "from the beginning" also gets every message still
// retained, handed over in id order in batches by its own claims
// (backfill), while newer messages wait for the backfill to reach them,
// so that per-key order holds for it too.

// ConsumerNameMaxLength is the longest consumer name.
const ConsumerNameMaxLength = 64

var consumerNameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// Errors of the consumer registry.
var (
	// ErrUnknownConsumer: no consumer of that name is registered.
	ErrUnknownConsumer = errors.New("mysql store: no such consumer")
	// ErrConsumerExists: AddConsumer of a name already registered.
	ErrConsumerExists = errors.New("mysql store: consumer already exists")
)

// StartFrom says where a consumer added to a table with history starts.
type StartFrom int

const (
	// StartNow: only messages written from now on. (Messages whose
	// transaction was still open at that moment may or may not be
	// included.)
	StartNow StartFrom = iota + 1
	// StartBeginning: every message still retained (handed over in
	// batches), and everything new.
	StartBeginning
)

// String returns the word the admin CLI uses.
func (f StartFrom) String() string {
	switch f {
	case StartNow:
		return "now"
	case StartBeginning:
		return "beginning"
	}
	return fmt.Sprintf("StartFrom(%d)", int(f))
}

// ConsumerInfo describes a registered named consumer.
type ConsumerInfo struct {
	Name string
	// StartSeq is the first message (Record.Seq) the consumer gets
	// without backfill.
	StartSeq int64
	// Backfilling reports that older messages are still being handed
	// over; BackfillAt is the last Seq handed over so far.
	Backfilling bool
	BackfillAt  int64
	// CreatedAt is when it was added (UTC, database clock).
	CreatedAt time.Time
	// Removing reports a removal that started and has not finished (run
	// RemoveConsumer again to finish it). Such a consumer gets nothing.
	Removing bool
}

func validConsumerName(name string) error {
	if !consumerNameRE.MatchString(name) {
		return fmt.Errorf("mysql store: consumer name %q: must be 1 to %d letters, digits, '_', '.' or '-', not starting with '.' or '-'", name, ConsumerNameMaxLength)
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
	err = retryTransient(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, claimTxOptions)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		// Exclusive locks on the registry wait for every hand-over in
		// progress (they hold it in share mode) and keep new ones out
		// until this commits, so none hands over a message above start
		// without this consumer.
		if done, err := s.lockRegistry(ctx, tx, name, token); done || err != nil {
			return err
		}
		var last uint64
		if err := tx.QueryRowContext(ctx, s.cq.maxID).Scan(&last); err != nil {
			return err
		}
		start, cursor := last+1, sql.NullInt64{}
		if from == StartBeginning {
			start, cursor = 1, sql.NullInt64{Int64: 0, Valid: true}
		}
		if _, err := tx.ExecContext(ctx, s.cq.register, name, start, cursor, token); err != nil {
			if classify(err) == classDuplicate {
				return fmt.Errorf("mysql store: add consumer %q: %w", name, ErrConsumerExists)
			}
			return err
		}
		return tx.Commit()
	})
	if errors.Is(err, ErrConsumerExists) {
		return err
	}
	if err != nil {
		return s.wrap("add consumer "+name, err)
	}
	return nil
}

// lockRegistry locks the registry for AddConsumer and looks name up in
// it: done when this call (token) registered it already, on an earlier
// try whose commit reply was lost; ErrConsumerExists when anyone else did.
func (s *Store) lockRegistry(ctx context.Context, tx *sql.Tx, name, token string) (done bool, err error) {
	rows, err := tx.QueryContext(ctx, s.cq.lockAll)
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
	if err := retryTransient(ctx, func() error {
		_, err := s.db.ExecContext(ctx, s.cq.unregister, name)
		return err
	}); err != nil {
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
		if _, err := s.db.ExecContext(ctx, s.cq.markRemoving, name); err != nil {
			return err
		}
		var removing bool
		switch err := s.db.QueryRowContext(ctx, s.cq.removingOf, name).Scan(&removing); {
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
		var n int64
		err := retryTransient(ctx, func() error {
			res, err := s.db.ExecContext(ctx, s.cq.dropState, name, removeBatch)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
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
	rows, err := s.db.QueryContext(ctx, s.cq.list)
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

// Consumer returns the store of the named consumer, for outbox.NewWorker:
// a worker built on it delivers that consumer's records only. It does
// not touch the database; the consumer must have been added
// (AddConsumer) before its first claim.
func (s *Store) Consumer(name string) (*ConsumerStore, error) {
	if err := validConsumerName(name); err != nil {
		return nil, err
	}
	t := consumerTarget(s.table, name)
	return &ConsumerStore{
		channel: channel{
			db: s.db, table: s.table, what: fmt.Sprintf("mysql store: consumer %q", name), t: t, q: buildQueries(t),
			content:       "SELECT id, payload, headers, occurred_at FROM `" + s.table + "` WHERE id IN (",
			maxClaimBytes: s.maxClaimBytes,
		},
		parent: s,
		name:   name,
	}, nil
}

// ConsumerStore is the backend.Store of one named consumer of a table. It
// shares the messages with every other consumer and keeps its own
// delivery state: Claim, Settle, Requeue, RequeueDead, CountDead and
// Stats see only this consumer's records. Enqueue writes messages for
// every consumer, as Store.Enqueue does. Retention belongs to the Store
// (PurgePublished), which waits for every consumer.
type ConsumerStore struct {
	channel
	parent *Store
	name   string
}

var (
	_ backend.Store         = (*ConsumerStore)(nil)
	_ backend.SettleClaimer = (*ConsumerStore)(nil)
	_ backend.StatsReader   = (*ConsumerStore)(nil)
)

// Name returns the consumer's name.
func (c *ConsumerStore) Name() string { return c.name }

// Enqueue is Store.Enqueue: the messages are for every consumer. A named
// consumer inherits a message's head start if the message is handed over
// to it before the default consumer has tried it.
func (c *ConsumerStore) Enqueue(ctx context.Context, tx backend.Execer, opts *backend.EnqueueOptions, msgs ...backend.Message) error {
	return c.parent.Enqueue(ctx, tx, opts, msgs...)
}

// Get returns the message with ID id as this consumer sees it: its own
// status, attempts and last error. A message that is to reach the
// consumer but has not been handed over yet is pending with no attempts.
// A message the consumer is not to get is ErrNotFound.
func (c *ConsumerStore) Get(ctx context.Context, id string) (outbox.Record, error) {
	rec, err := c.get(ctx, id)
	if !errors.Is(err, outbox.ErrNotFound) {
		return rec, err
	}
	msg, err := c.parent.get(ctx, id)
	if err != nil {
		if errors.Is(err, outbox.ErrNotFound) {
			return outbox.Record{}, fmt.Errorf("%s: get %q: %w", c.what, id, outbox.ErrNotFound)
		}
		return msg, err
	}
	var start int64
	switch err := c.db.QueryRowContext(ctx, c.parent.cq.startOf, c.name).Scan(&start); {
	case errors.Is(err, sql.ErrNoRows):
		return outbox.Record{}, fmt.Errorf("%s: get %q: %w", c.what, id, ErrUnknownConsumer)
	case err != nil:
		return outbox.Record{}, c.wrap("get", err)
	case msg.Seq < start:
		return outbox.Record{}, fmt.Errorf("%s: get %q: written before the consumer started: %w", c.what, id, outbox.ErrNotFound)
	}
	msg.Status, msg.Attempts, msg.LastError = outbox.StatusPending, 0, ""
	msg.NextAttemptAt, msg.PublishedAt = time.Time{}, time.Time{}
	return msg, nil
}

// Claim is Store.Claim for this consumer. It first hands the oldest
// messages not yet handed over to the named consumers (handOverBatch of
// them), and, while this consumer is backfilling, the next p.Limit
// retained messages; each in a short transaction of its own. It fails
// with ErrUnknownConsumer if the consumer is not registered.
func (c *ConsumerStore) Claim(ctx context.Context, p backend.ClaimParams) (backend.Batch, error) {
	if err := c.prepareClaim(ctx, p); err != nil {
		return backend.Batch{}, err
	}
	return c.channel.Claim(ctx, p)
}

// SettleAndClaim is Store.SettleAndClaim for this consumer, with the
// hand-over of Claim before it.
func (c *ConsumerStore) SettleAndClaim(ctx context.Context, st backend.Settlement, p backend.ClaimParams) (backend.SettleResult, backend.Batch, error) {
	if err := c.prepareClaim(ctx, p); err != nil {
		return backend.SettleResult{}, backend.Batch{}, err
	}
	return c.channel.SettleAndClaim(ctx, st, p)
}

// prepareClaim hands messages over to the named consumers, and the next
// ones of a backfill to this one, before a claim.
func (c *ConsumerStore) prepareClaim(ctx context.Context, p backend.ClaimParams) error {
	if err := validateClaim(p); err != nil {
		return err
	}
	backfilling, err := c.parent.handOver(ctx, c.name, max(p.Limit, handOverBatch))
	if err != nil {
		if errors.Is(err, ErrUnknownConsumer) {
			return fmt.Errorf("%s: claim: %w", c.what, err)
		}
		return c.wrap("claim: hand over", err)
	}
	if backfilling && len(p.IDs) == 0 {
		if err := c.parent.backfill(ctx, c.name, p.Limit); err != nil {
			return c.wrap("claim: backfill", err)
		}
	}
	return nil
}

// Stats reports this consumer's backlog as Store.Stats does the default
// consumer's. Messages that are to reach it but have not been handed over
// yet count as pending (up to maxWaitingCounted of them are counted).
func (c *ConsumerStore) Stats(ctx context.Context) (backend.Stats, error) {
	st, err := c.stats(ctx)
	if err != nil {
		return st, err
	}
	var (
		start  int64
		cursor sql.NullInt64
	)
	switch err := c.db.QueryRowContext(ctx, c.parent.cq.infoOf, c.name).Scan(&start, &cursor); {
	case errors.Is(err, sql.ErrNoRows):
		return st, fmt.Errorf("%s: stats: %w", c.what, ErrUnknownConsumer)
	case err != nil:
		return st, c.wrap("stats", err)
	}
	query, arg := c.parent.cq.waitingFanout, start
	if cursor.Valid {
		query, arg = c.parent.cq.waitingBackfill, cursor.Int64
	}
	rows, err := c.db.QueryContext(ctx, query, arg, maxWaitingCounted)
	if err != nil {
		return st, c.wrap("stats", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			typ         string
			n           int
			oldestMicro int64
		)
		if err := rows.Scan(&typ, &n, &oldestMicro); err != nil {
			return st, c.wrap("stats", err)
		}
		ts := st.ByType[typ]
		ts.Pending += n
		st.ByType[typ] = ts
		st.Pending += n
		st.OldestPending = max(st.OldestPending, time.Duration(oldestMicro)*time.Microsecond)
	}
	if err := rows.Err(); err != nil {
		return st, c.wrap("stats", err)
	}
	return st, nil
}

// handOverBatch is the fewest messages one claim hands over: more than a
// claim takes, so that the hand-over stays ahead of the claims, and an
// after-commit claim finds its messages handed over unless a backlog of
// that size waits before them.
const handOverBatch = 500

// maxWaitingCounted bounds how many not yet handed over messages
// ConsumerStore.Stats reads.
const maxWaitingCounted = 100_000
