package mysql

import (
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
