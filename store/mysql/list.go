package mysql

import (
	"context"
	"fmt"
	"strings"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// ListFilter selects records for List. Empty fields match everything.
type ListFilter struct {
	Status outbox.Status
	Type   string
	Key    string
	// AfterSeq pages: only records with a larger Seq.
	AfterSeq int64
	// Limit is the page size; 1 to outbox.MaxBatchSize.
	Limit int
}

// List returns a page of records in Seq (insert) order; pass the last
// one's Seq as the next AfterSeq. Undecodable records are listed with the
// fields that could be read.
func (s *Store) List(ctx context.Context, f ListFilter) ([]outbox.Record, error) {
	if f.Limit < 1 || f.Limit > outbox.MaxBatchSize {
		return nil, fmt.Errorf("mysql store: list: Limit %d: must be 1 to %d", f.Limit, outbox.MaxBatchSize)
	}
	rows, err := listSQL(s.t, f).query(ctx, s.db)
	if err != nil {
		return nil, s.wrap("list", err)
	}
	defer rows.Close()
	var out []outbox.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, s.wrap("list", err)
		}
		out = append(out, r.rec)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("list", err)
	}
	return out, nil
}

// where returns the filter's SQL conditions and their arguments.
func (f ListFilter) where() (string, []any) {
	conds, args := []string{"id > ?"}, []any{f.AfterSeq}
	for _, c := range []struct{ col, val string }{{"status", string(f.Status)}, {"event_type", f.Type}, {"event_key", f.Key}} {
		if c.val != "" {
			conds, args = append(conds, c.col+" = ?"), append(args, c.val)
		}
	}
	return strings.Join(conds, " AND "), args
}

// listSQL reads a page of the records that match f, in Seq order. (The
// Store's target is the outbox table.)
func listSQL(t *target, f ListFilter) statement {
	where, args := f.where()
	return t.render("SELECT {cols} FROM {table} WHERE {filter} ORDER BY id LIMIT ?", append(args, f.Limit)...).withFilter(where)
}
