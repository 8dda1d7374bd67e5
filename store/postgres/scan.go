package postgres

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// querier is what the store reads and writes through: *sql.DB or *sql.Tx.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// scanned is one record as read, with what could not be decoded.
type scanned struct {
	rec outbox.Record
	err error
}

// record returns the record and its decoding error.
func (r scanned) record() (outbox.Record, error) { return r.rec, r.err }

// queryRecords runs q, whose first columns are recordCols, and scans them.
func queryRecords(ctx context.Context, db querier, q string, args ...any) ([]scanned, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []scanned
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// scanRecord reads the columns of recordCols.
func scanRecord(rows *sql.Rows) (scanned, error) { return scanRecordWith(rows) }

// scanRecordWith reads the columns of recordCols, then into extra.
func scanRecordWith(rows *sql.Rows, extra ...any) (scanned, error) {
	var (
		r                  outbox.Record
		key, typ, payload  []byte
		headers            []byte
		occurred, finished sql.NullTime
		status             string
	)
	dest := []any{&r.Seq, &r.ID, &key, &typ, &payload, &headers, &occurred, &r.EnqueuedAt,
		&status, &r.Attempts, &r.LastError, &r.NextAttemptAt, &finished}
	if err := rows.Scan(append(dest, extra...)...); err != nil {
		return scanned{}, err
	}
	return finishRecord(r, key, typ, payload, headers, nullTime(occurred), nullTime(finished), status), nil
}

// nullTime is t's time, or nil when it is NULL.
func nullTime(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	return &t.Time
}

// finishRecord fills r from the columns of recordCols that are not its
// own fields as read, and decodes its headers.
func finishRecord(r outbox.Record, key, typ, payload, headers []byte, occurred, finished *time.Time, status string) scanned {
	r.Key, r.Type, r.Status = string(key), string(typ), outbox.Status(status)
	r.Payload = payload
	if r.Payload == nil {
		r.Payload = []byte{}
	}
	r.EnqueuedAt = r.EnqueuedAt.UTC()
	r.NextAttemptAt = r.NextAttemptAt.UTC()
	r.CreatedAt = r.EnqueuedAt
	if occurred != nil {
		r.CreatedAt = occurred.UTC()
	}
	if finished != nil && r.Status == outbox.StatusPublished {
		r.PublishedAt = finished.UTC()
	}
	var decodeErr error
	if headers != nil {
		var h map[string]string
		if err := json.Unmarshal(headers, &h); err != nil {
			decodeErr = fmt.Errorf("headers are not a JSON object of strings: %w", err)
		} else if len(h) > 0 {
			r.Headers = h
		}
	}
	return scanned{rec: r, err: decodeErr}
}

// toBatch sorts rows by Seq and splits the valid from the invalid.
func toBatch(token int64, rows []scanned) backend.Batch {
	bySeq := func(a, b scanned) int { return cmp.Compare(a.rec.Seq, b.rec.Seq) }
	if !slices.IsSortedFunc(rows, bySeq) {
		slices.SortFunc(rows, bySeq)
	}
	b := backend.Batch{Token: strconv.FormatInt(token, 10)}
	if len(rows) > 0 {
		b.Records = make([]outbox.Record, 0, len(rows))
	}
	for _, r := range rows {
		if r.err != nil {
			b.Invalid = append(b.Invalid, backend.InvalidRecord{Record: r.rec, Err: r.err})
			continue
		}
		b.Records = append(b.Records, r.rec)
	}
	return b
}

// newToken returns a random positive int64: a claim's fencing token.
func newToken() (int64, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	v := int64(binary.BigEndian.Uint64(b[:]) >> 1)
	if v == 0 {
		v = 1
	}
	return v, nil
}

// parseToken reads a batch token; ok is false for one no claim made.
func parseToken(s string) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil && v != 0
}
