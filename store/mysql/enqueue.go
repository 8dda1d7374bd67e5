package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/outboxrelay/outboxrelay/internal/mysqlerr"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/internal/storecore"
)

// One INSERT statement carries at most this many rows and (roughly) bytes,
// well under the protocol's 65,535 placeholders and MariaDB's default
// max_allowed_packet of 16 MiB.
const (
	maxInsertRows  = 1000
	maxInsertBytes = 4 << 20
)

// Enqueue stores msgs as pending through tx, normally the caller's
// *sql.Tx, so that they commit or roll back with the state change they
// announce. *sql.DB and *sql.Conn are accepted too. The messages are due
// at once, or, with opts.HeadStart, that long after the insert by the
// database clock, leaving the writer time to publish them itself with
// Worker.PublishNow right after commit. nil opts means the defaults.
//
// Every message is validated first (backend.Message.Validate, and the
// size limits of Options); an invalid message, or an ID given twice or
// already stored, fails the call with an error wrapping
// outbox.ErrInvalidMessage or outbox.ErrDuplicateID, and nothing of the
// call is written. (A call of more than 1,000 messages through a
// *sql.Conn outside a transaction is written in several statements and is
// not all-or-nothing.)
func (s *Store) Enqueue(ctx context.Context, tx backend.Execer, opts *backend.EnqueueOptions, msgs ...backend.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if tx == nil {
		return errors.New("mysql store: enqueue: tx is nil")
	}
	headStart, err := storecore.HeadStart(dialect.What, opts)
	if err != nil {
		return err
	}
	rows, err := s.encodeRows(msgs)
	if err != nil {
		return err
	}
	chunks := chunkRows(rows)
	if db, ok := tx.(*sql.DB); ok && len(chunks) > 1 {
		return s.enqueueInTx(ctx, db, headStart, chunks)
	}
	for _, c := range chunks {
		if err := s.insert(ctx, tx, headStart, c); err != nil {
			return err
		}
	}
	return nil
}

// enqueueInTx writes several statements' worth of rows through a *sql.DB
// in one transaction of its own, so that the call stays all-or-nothing.
func (s *Store) enqueueInTx(ctx context.Context, db *sql.DB, headStart time.Duration, chunks [][]insertRow) error {
	return storecore.InTx(ctx, db, nil, s.wrapper("enqueue"), func(tx *sql.Tx) error {
		for _, c := range chunks {
			if err := s.insert(ctx, tx, headStart, c); err != nil {
				return err
			}
		}
		return nil
	})
}

// insert writes rows in one statement, due headStart after now.
func (s *Store) insert(ctx context.Context, tx backend.Execer, headStart time.Duration, rows []insertRow) error {
	if _, err := insertSQL(s.t, headStart, rows).exec(ctx, tx); err != nil {
		if mysqlerr.Classify(err) == mysqlerr.Duplicate {
			return fmt.Errorf("mysql store: enqueue: message ID %s already exists: %w", duplicateEntry(err), outbox.ErrDuplicateID)
		}
		return s.wrap("enqueue", err)
	}
	return nil
}

// insertSQL writes rows to the log. It names only the columns some row
// sets: headers and occurred_at when a row has them, the writer's token
// and the end of its hold with a head start (headStart after now by the
// database clock); a column left out takes its default. A message
// without headers, creation time or head start is then written with five
// columns, not nine, which the bench measured as 2 to 3 points less time
// on the writer's transaction (BENCHMARKS.md, enqueue).
func insertSQL(t *target, headStart time.Duration, rows []insertRow) statement {
	var withHeaders, withOccurred bool
	for _, r := range rows {
		withHeaders = withHeaders || r.headers != nil
		withOccurred = withOccurred || r.occurredAt != nil
	}
	cols := "event_id, event_key, event_type, payload, created_at"
	vals := "?, ?, ?, ?, UTC_TIMESTAMP(6)"
	if headStart > 0 {
		cols += ", writer_token, writer_until"
		vals += ", ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND"
	}
	if withHeaders {
		cols += ", headers"
		vals += ", ?"
	}
	if withOccurred {
		cols += ", occurred_at"
		vals += ", ?"
	}
	args := make([]any, 0, 8*len(rows))
	for _, r := range rows {
		args = append(args, r.id, r.key, r.typ, r.payload)
		if headStart > 0 {
			args = append(args, headStartID, headStart.Microseconds())
		}
		if withHeaders {
			args = append(args, r.headers)
		}
		if withOccurred {
			args = append(args, r.occurredAt)
		}
	}
	return t.renderRows("INSERT INTO {outbox} ("+cols+") VALUES ("+vals+")", len(rows), args...)
}

// insertRow is one validated message, encoded for the INSERT.
type insertRow struct {
	id, key, typ string
	payload      []byte
	headers      any // string or nil
	occurredAt   any // string (Message.CreatedAt) or nil
	size         int
}

func (s *Store) encodeRows(msgs []outbox.Message) ([]insertRow, error) {
	if err := storecore.CheckMessages(dialect.What, msgs, checkNoTrailingSpace); err != nil {
		return nil, err
	}
	rows := make([]insertRow, len(msgs))
	for i, m := range msgs {
		headers, err := encodeHeaders(m.Headers)
		if err != nil {
			return nil, fmt.Errorf("mysql store: enqueue: message %q: headers: %w", m.ID, err)
		}
		if err := s.checkSizes(m, headers); err != nil {
			return nil, fmt.Errorf("mysql store: enqueue: message %q: %w", m.ID, err)
		}
		r := insertRow{id: m.ID, key: m.Key, typ: m.Type, payload: m.Payload, headers: headers}
		if r.payload == nil {
			r.payload = []byte{}
		}
		if !m.CreatedAt.IsZero() {
			r.occurredAt = formatTime(m.CreatedAt)
		}
		r.size = len(m.ID) + len(m.Key) + len(m.Type) + len(m.Payload) + 64
		if h, ok := headers.(string); ok {
			r.size += len(h)
		}
		rows[i] = r
	}
	return rows, nil
}

// chunkRows splits rows into statements of at most maxInsertRows rows and
// about maxInsertBytes bytes (a single larger row gets a statement alone).
func chunkRows(rows []insertRow) [][]insertRow {
	var chunks [][]insertRow
	start, size := 0, 0
	for i, r := range rows {
		if i > start && (i-start == maxInsertRows || size+r.size > maxInsertBytes) {
			chunks = append(chunks, rows[start:i])
			start, size = i, 0
		}
		size += r.size
	}
	return append(chunks, rows[start:])
}

var duplicateEntryRE = regexp.MustCompile(`Duplicate entry '(.*)' for key`)

// duplicateEntry names the duplicate value of an ER_DUP_ENTRY error, as
// far as the server's message tells.
func duplicateEntry(err error) string {
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) {
		if m := duplicateEntryRE.FindStringSubmatch(me.Message); m != nil {
			return strconv.Quote(m[1])
		}
	}
	return "(one of the batch)"
}

// checkNoTrailingSpace rejects IDs that end in a space: MySQL and MariaDB
// compare utf8mb4_bin with PAD SPACE, so "a" and "a " would be the same
// ID. (Keys are binary and compare byte by byte: any key is fine.)
func checkNoTrailingSpace(m outbox.Message) error {
	if strings.HasSuffix(m.ID, " ") {
		return fmt.Errorf("%w: ID %q ends in a space, which MySQL ignores in comparisons", outbox.ErrInvalidMessage, m.ID)
	}
	return nil
}

// checkSizes holds a message to MaxPayloadBytes and MaxHeaderBytes.
func (s *Store) checkSizes(m outbox.Message, headers any) error {
	if len(m.Payload) > s.maxPayload {
		return fmt.Errorf("%w: Payload of %d bytes exceeds MaxPayloadBytes (%d)", outbox.ErrInvalidMessage, len(m.Payload), s.maxPayload)
	}
	if h, ok := headers.(string); ok && len(h) > s.maxHeaders {
		return fmt.Errorf("%w: Headers of %d bytes (as stored, in JSON) exceed MaxHeaderBytes (%d)", outbox.ErrInvalidMessage, len(h), s.maxHeaders)
	}
	return nil
}
