package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/store/internal/storecore"
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

// record returns the record and its decoding error.
func (r scannedRecord) record() (outbox.Record, error) { return r.rec, r.decodeErr }

type scanner interface{ Scan(dest ...any) error }

// column runs a query of one column and returns its values.
func column[T any](ctx context.Context, q querier, st statement) ([]T, error) {
	rows, err := st.query(ctx, q)
	if err != nil {
		return nil, err
	}
	return storecore.Column[T](rows)
}

// readRows runs a select of a target's columns and scans the rows.
func readRows(ctx context.Context, q querier, st statement) ([]scannedRecord, error) {
	return readRowsWithin(ctx, q, nil, st)
}

// readRowsWithin is readRows that stops at the first row the budget has
// no room for (a nil budget has room for everything). The rows after it
// are not kept; the driver reads past them.
func readRowsWithin(ctx context.Context, q querier, budget *byteBudget, st statement) ([]scannedRecord, error) {
	return readRowsThen(ctx, q, budget, st, nil, nil)
}

// readRowsThen is readRowsWithin for a statement that selects extra
// columns after the record's: each row's are scanned into extra, and
// then, if not nil, is called for each record kept.
func readRowsThen(ctx context.Context, q querier, budget *byteBudget, st statement, extra []any, then func()) ([]scannedRecord, error) {
	rows, err := st.query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		out []scannedRecord
		sc  scanner = rows
	)
	if len(extra) > 0 {
		sc = withExtra{rows, extra}
	}
	for rows.Next() {
		r, err := scanRecord(sc)
		if err != nil {
			return nil, err
		}
		if !budget.take(recordSize(r.rec)) {
			break
		}
		out = append(out, r)
		if then != nil {
			then()
		}
	}
	return out, rows.Err()
}

// withExtra scans a row of the record columns followed by extra ones.
type withExtra struct {
	sc    scanner
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.sc.Scan(append(dest, w.extra...)...) }

// byteBudget bounds the payload and header bytes one claim holds in
// memory. The first record always fits, so that every claim can make
// progress; after it, a record fits while the total stays within the
// budget. Once one does not fit, nothing more does.
type byteBudget struct {
	left  int
	taken int
	full  bool
}

func newBudget(bytes int) *byteBudget { return &byteBudget{left: bytes} }

// recordSize is what a record's payload and headers weigh in a budget.
func recordSize(r outbox.Record) int {
	size := len(r.Payload)
	for k, v := range r.Headers {
		size += len(k) + len(v)
	}
	return size
}

// take reports whether a record of size bytes fits, and counts it if so.
// An empty record always fits and does not count (a named consumer's
// record weighs nothing until its payload is read).
func (b *byteBudget) take(size int) bool {
	if b == nil || size == 0 {
		return true
	}
	if b.full {
		return false
	}
	if b.taken > 0 && size > b.left {
		b.full = true
		return false
	}
	b.left -= size
	b.taken++
	return true
}

func scanRecord(sc scanner) (scannedRecord, error) {
	var (
		r                  scannedRecord
		headers, lastError sql.NullString
		status             string
		occurred, created  dbTime
		next, published    dbTime
		payload            []byte
		key                sql.NullString
	)
	err := sc.Scan(&r.seq, &r.rec.ID, &key, &r.rec.Type, &payload, &headers,
		&occurred, &created, &status, &r.rec.Attempts, &lastError, &next, &published)
	if err != nil {
		return r, err
	}
	if payload == nil {
		payload = []byte{}
	}
	r.rec.Seq = int64(r.seq)
	r.rec.Key = key.String
	r.rec.Payload = payload
	r.rec.EnqueuedAt = created.t
	r.rec.CreatedAt = created.t
	if !occurred.t.IsZero() {
		r.rec.CreatedAt = occurred.t
	}
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
