package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// dbTimeLayout is how DATETIME(6) values are written and read. They are
// UTC wall-clock times.
const dbTimeLayout = "2006-01-02 15:04:05.000000"

// scannedRecord is one row of recordColumns.
type scannedRecord struct {
	seq uint64
	rec outbox.Record
	// decodeErr is set when the row was read but a field could not be
	// decoded; rec then holds what could be.
	decodeErr error
}

type scanner interface{ Scan(dest ...any) error }

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// column runs a query of one column and returns its values.
func column[T any](ctx context.Context, q querier, query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// readRows runs a select of a target's columns and scans the rows.
func readRows(ctx context.Context, q querier, query string, args ...any) ([]scannedRecord, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []scannedRecord
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// fill reads payload and headers from the outbox table for records read
// from a consumption table (a plain read: the outbox rows are not
// locked), and returns the records whose message is gone (purged between
// a consumer's hand-over and now) apart. For the outbox table itself it
// returns rows as they are.
func (s *channel) fill(ctx context.Context, q querier, rows []scannedRecord) (filled []scannedRecord, orphans []uint64, err error) {
	if s.content == "" || len(rows) == 0 {
		return rows, nil, nil
	}
	args := make([]any, len(rows))
	for i, r := range rows {
		args[i] = r.seq
	}
	res, err := q.QueryContext(ctx, s.content+placeholders(len(args))+")", args...)
	if err != nil {
		return nil, nil, err
	}
	defer res.Close()
	type body struct {
		payload []byte
		headers sql.NullString
	}
	bodies := make(map[uint64]body, len(rows))
	for res.Next() {
		var (
			seq uint64
			b   body
		)
		if err := res.Scan(&seq, &b.payload, &b.headers); err != nil {
			return nil, nil, err
		}
		bodies[seq] = b
	}
	if err := res.Err(); err != nil {
		return nil, nil, err
	}
	filled = rows[:0:0]
	for _, r := range rows {
		b, ok := bodies[r.seq]
		if !ok {
			orphans = append(orphans, r.seq)
			continue
		}
		r.rec.Payload = b.payload
		if r.rec.Payload == nil {
			r.rec.Payload = []byte{}
		}
		r.rec.Headers, r.decodeErr = decodeHeaders(b.headers)
		filled = append(filled, r)
	}
	return filled, orphans, nil
}

func scanRecord(sc scanner) (scannedRecord, error) {
	var (
		r                        scannedRecord
		headers, lastError       sql.NullString
		status                   string
		created, next, published dbTime
		payload                  []byte
		key                      sql.NullString
	)
	err := sc.Scan(&r.seq, &r.rec.ID, &key, &r.rec.Type, &payload, &headers,
		&created, &status, &r.rec.Attempts, &lastError, &next, &published)
	if err != nil {
		return r, err
	}
	if payload == nil {
		payload = []byte{}
	}
	r.rec.Seq = int64(r.seq)
	r.rec.Key = key.String
	r.rec.Payload = payload
	r.rec.CreatedAt = created.t
	r.rec.Status = outbox.Status(status)
	r.rec.LastError = lastError.String
	r.rec.NextAttemptAt = next.t
	r.rec.PublishedAt = published.t
	r.rec.Headers, r.decodeErr = decodeHeaders(headers)
	return r, nil
}

// encodeHeaders stores headers as a JSON object; none are stored as NULL.
func encodeHeaders(h map[string]string) (any, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

func decodeHeaders(s sql.NullString) (map[string]string, error) {
	if !s.Valid || s.String == "" {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(s.String), &h); err != nil {
		return nil, fmt.Errorf("headers are not a JSON object of strings: %w", err)
	}
	return h, nil
}

// dbTime scans a DATETIME column as a UTC time, whatever the DSN's
// parseTime and loc settings: with parseTime the driver returns a
// time.Time in loc whose wall clock is the stored value, without it the
// raw text.
type dbTime struct{ t time.Time }

func (d *dbTime) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		d.t = time.Time{}
	case time.Time:
		d.t = time.Date(x.Year(), x.Month(), x.Day(), x.Hour(), x.Minute(), x.Second(), x.Nanosecond(), time.UTC)
	case []byte:
		return d.parse(string(x))
	case string:
		return d.parse(x)
	default:
		return fmt.Errorf("mysql store: cannot scan %T into a time", v)
	}
	return nil
}

func (d *dbTime) parse(s string) error {
	if s == "" || strings.HasPrefix(s, "0000-00-00") {
		d.t = time.Time{}
		return nil
	}
	// time.Parse accepts a fractional second after the seconds field even
	// when the layout has none.
	t, err := time.ParseInLocation("2006-01-02 15:04:05", s, time.UTC)
	if err != nil {
		return fmt.Errorf("mysql store: bad DATETIME %q: %w", s, err)
	}
	d.t = t
	return nil
}

// formatTime renders t for a DATETIME(6) column, in UTC.
func formatTime(t time.Time) string {
	return t.UTC().Format(dbTimeLayout)
}
