package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/internal/storecore"
)

// Enqueue stores msgs as pending through tx, normally the caller's
// transaction, so that they commit or roll back with the state change
// they announce: a *sql.Tx of database/sql on pgx's stdlib driver, or a
// pgx.Tx wrapped by PgxTx. (*sql.DB, *sql.Conn and a pgx connection or
// pool wrapped by PgxTx are accepted too; the call is then a transaction
// of its own, except through a *sql.Conn or pgx connection outside a
// transaction, where a call that races another writer of one of its IDs
// may keep its other messages.) The messages are due at once, or, with
// opts.HeadStart, that long after the insert by the database clock,
// leased for that time to this Store's own after-commit publish
// (HeadStartBatch). nil opts means the defaults.
//
// The whole call is one INSERT statement, whatever the number of
// messages, and, unless Options.DisableNotify, a pg_notify on the
// table's channel that PostgreSQL delivers at commit.
//
// Every message is validated first (backend.Message.Validate, the size
// limits of Options, and PostgreSQL's own rule that text holds no NUL
// character: IDs and header names and values may not contain one; keys
// and types may). An invalid message, or an ID given twice or already
// stored, fails the call with an error wrapping outbox.ErrInvalidMessage
// or outbox.ErrDuplicateID, and nothing of the call is written. A
// rejected call does not abort the caller's transaction: the statement
// inserts nothing rather than failing, so the transaction may go on and
// commit its other work.
func (s *Store) Enqueue(ctx context.Context, tx backend.Execer, opts *backend.EnqueueOptions, msgs ...backend.Message) error {
	if tx == nil {
		return errors.New("postgres store: enqueue: tx is nil")
	}
	headStart, err := storecore.HeadStart(dialect.What, opts)
	if err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	cols, err := s.encode(msgs)
	if err != nil {
		return err
	}
	if db, ok := tx.(*sql.DB); ok {
		return s.enqueueInTx(ctx, db, headStart, cols)
	}
	return s.insert(ctx, tx, headStart, cols)
}

// enqueueInTx writes through a *sql.DB in a transaction of its own, so
// that a rejected call rolls back whole.
func (s *Store) enqueueInTx(ctx context.Context, db *sql.DB, headStart time.Duration, cols columns) error {
	return storecore.InTx(ctx, db, nil, s.wrapper("enqueue"), func(tx *sql.Tx) error {
		return s.insert(ctx, tx, headStart, cols)
	})
}

// insert writes the messages in one statement that inserts all of them
// or (when one of the IDs is stored already) none.
func (s *Store) insert(ctx context.Context, tx backend.Execer, headStart time.Duration, cols columns) error {
	var lease int64
	if headStart > 0 {
		lease = s.headStart
	}
	channel := ""
	if s.notifies(time.Now()) {
		channel = s.opts.Table
	}
	n, err := execCount(ctx, tx, s.t.render(insertLogSQL), cols.ids, cols.keys, cols.types, cols.payloads, cols.headers, cols.occurred,
		headStart.Microseconds(), lease, channel)
	if err != nil {
		if classify(err) == ClassDuplicate {
			return fmt.Errorf("postgres store: enqueue: a message ID already exists: %w", outbox.ErrDuplicateID)
		}
		return s.wrap("enqueue", err)
	}
	if int(n) == len(cols.ids) {
		return nil
	}
	// One of the IDs is stored already (the statement inserted nothing),
	// or a concurrent writer of one committed while this statement ran
	// (it inserted the others): take those back, in this transaction.
	if n > 0 {
		if _, err := tx.ExecContext(ctx, s.t.render("DELETE FROM {outbox} WHERE event_id = ANY($1::text[]) AND xid = pg_current_xact_id()"), cols.ids); err != nil {
			return s.wrap("enqueue: take back a rejected call", err)
		}
	}
	return fmt.Errorf("postgres store: enqueue: message ID %s already exists: %w", s.duplicateOf(ctx, tx, cols.ids), outbox.ErrDuplicateID)
}

// duplicateOf names a stored ID of ids, where tx can tell.
func (s *Store) duplicateOf(ctx context.Context, tx backend.Execer, ids []string) string {
	q := s.t.render("SELECT event_id FROM {outbox} WHERE event_id = ANY($1::text[]) ORDER BY seq LIMIT 1")
	var id string
	var err error
	switch tx := tx.(type) {
	case interface {
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}:
		err = tx.QueryRowContext(ctx, q, ids).Scan(&id)
	case *pgxExecer:
		err = tx.q.QueryRow(ctx, q, ids).Scan(&id)
	default:
		return "(one of the call's)"
	}
	if err != nil {
		return "(one of the call's)"
	}
	return strconv.Quote(id)
}

// columns are the messages of a call, column by column.
type columns struct {
	ids      []string
	keys     [][]byte
	types    [][]byte
	payloads [][]byte
	headers  []*string
	occurred []*time.Time
}

func (s *Store) encode(msgs []outbox.Message) (columns, error) {
	c := columns{
		ids: make([]string, len(msgs)), keys: make([][]byte, len(msgs)), types: make([][]byte, len(msgs)),
		payloads: make([][]byte, len(msgs)), headers: make([]*string, len(msgs)), occurred: make([]*time.Time, len(msgs)),
	}
	if err := storecore.CheckMessages(dialect.What, msgs, checkNoNUL); err != nil {
		return columns{}, err
	}
	for i, m := range msgs {
		if len(m.Payload) > s.opts.MaxPayloadBytes {
			return columns{}, fmt.Errorf("postgres store: enqueue: message %q: %w: Payload of %d bytes exceeds MaxPayloadBytes (%d)", m.ID, outbox.ErrInvalidMessage, len(m.Payload), s.opts.MaxPayloadBytes)
		}
		if len(m.Headers) > 0 {
			for name, value := range m.Headers {
				if strings.ContainsRune(name, 0) || strings.ContainsRune(value, 0) {
					return columns{}, fmt.Errorf("postgres store: enqueue: message %q: %w: header %q contains a NUL character, which PostgreSQL jsonb cannot hold", m.ID, outbox.ErrInvalidMessage, backend.Truncate(name, 64))
				}
			}
			b, err := json.Marshal(m.Headers)
			if err != nil {
				return columns{}, fmt.Errorf("postgres store: enqueue: message %q: headers: %w", m.ID, err)
			}
			if len(b) > s.opts.MaxHeaderBytes {
				return columns{}, fmt.Errorf("postgres store: enqueue: message %q: %w: Headers of %d bytes (as JSON) exceed MaxHeaderBytes (%d)", m.ID, outbox.ErrInvalidMessage, len(b), s.opts.MaxHeaderBytes)
			}
			h := string(b)
			c.headers[i] = &h
		}
		c.ids[i] = m.ID
		c.keys[i] = append([]byte{}, m.Key...) // never nil: nil is NULL
		c.types[i] = []byte(m.Type)
		c.payloads[i] = m.Payload
		if c.payloads[i] == nil {
			c.payloads[i] = []byte{}
		}
		if !m.CreatedAt.IsZero() {
			t := m.CreatedAt
			c.occurred[i] = &t
		}
	}
	return c, nil
}

// checkNoNUL rejects IDs that contain a NUL character, which PostgreSQL
// text cannot hold. (Keys and types are bytea: any is fine.)
func checkNoNUL(m outbox.Message) error {
	if strings.ContainsRune(m.ID, 0) {
		return fmt.Errorf("%w: ID %q contains a NUL character, which PostgreSQL text cannot hold", outbox.ErrInvalidMessage, m.ID)
	}
	return nil
}

// notifies says whether an Enqueue at now notifies: always, unless
// DisableNotify, or NotifyInterval and another Enqueue of this Store
// notified less than that long ago (on the monotonic clock, from the
// Store's creation: a step of the wall clock changes nothing).
func (s *Store) notifies(now time.Time) bool {
	if s.opts.DisableNotify {
		return false
	}
	if s.opts.NotifyInterval <= 0 {
		return true
	}
	at := int64(now.Sub(s.created)) + 1 // 0: never notified
	last := s.notified.Load()
	if last != 0 && at-last < int64(s.opts.NotifyInterval) {
		return false
	}
	return s.notified.CompareAndSwap(last, at)
}
