package mysql

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// ListFilter selects records for List (see backend.ListFilter).
type ListFilter = backend.ListFilter

// List returns a page of records in Seq (insert) order; pass the last
// one's Seq as the next AfterSeq. It pages by Seq, never by OFFSET, so a
// page costs the same deep in a big table. Undecodable records are listed
// with the fields that could be read. A filter on ErrorContains reads
// every record of the other conditions up to the page's end: combine it
// with a Status. ConsumerStore.List lists a named consumer's records.
func (s *channel) List(ctx context.Context, f ListFilter) ([]outbox.Record, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("%s: list: %w", s.what, err)
	}
	rows, err := readRows(ctx, s.db, listSQL(s.t, f))
	if err == nil {
		rows, _, err = s.fill(ctx, s.db, nil, rows)
	}
	if err != nil {
		return nil, s.wrap("list", err)
	}
	out := make([]outbox.Record, len(rows))
	for i, r := range rows {
		out[i] = r.rec
	}
	return out, nil
}

// listWhere returns the filter's SQL conditions and their arguments,
// each condition starting with " AND ".
func listWhere(f ListFilter) (string, []any) {
	var conds matchConds
	if f.Status != "" {
		conds.add("status = ?", string(f.Status))
	}
	conds.match(f.Type, f.Key, f.ErrorContains, f.OlderThan)
	if f.MinAttempts > 0 {
		conds.add("retry_count >= ?", f.MinAttempts)
	}
	if len(conds.conds) == 0 {
		return "", nil
	}
	return " AND " + strings.Join(conds.conds, " AND "), conds.args
}

// matchConds collects the conditions of a filter (ListFilter,
// DeadFilter) on columns that the outbox table and the consumption table
// share.
type matchConds struct {
	conds []string
	args  []any
}

func (m *matchConds) add(cond string, arg any) {
	m.conds, m.args = append(m.conds, cond), append(m.args, arg)
}

// match adds the conditions the filters have in common; empty values
// match everything.
func (m *matchConds) match(typ, key, errorContains string, olderThan time.Duration) {
	if typ != "" {
		// As binary: event_type compares with PAD SPACE, where "T" = "T ".
		m.add("CAST(event_type AS BINARY) = ?", typ)
	}
	if key != "" {
		// Every status, so that idx_status_key (idx_key) serves it.
		m.add("status IN ('pending', 'published', 'dead') AND event_key = ?", key)
	}
	if olderThan > 0 {
		m.add("created_at <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND", olderThan.Microseconds())
	}
	if errorContains != "" {
		m.add("last_error LIKE ? ESCAPE '!'", "%"+escapeLike(errorContains)+"%")
	}
}

// listSQL reads a page of the records of the channel's target that match
// f, in Seq order.
//
// With a Status, the order is written "{seq} + 0" so that no index can
// deliver it: otherwise, for a small LIMIT (the oldest pending record),
// the optimizer walks the primary key from AfterSeq, through the whole
// published history, to the first record of that status. Without the
// primary key it reads the status's range of an index and sorts it: the
// backlog, as Stats does (TestListPlanOnAPublishedHistory). An index hint
// would say the same, but the demo's embedded engine does not parse
// "IGNORE INDEX FOR ORDER BY".
func listSQL(t *target, f ListFilter) statement {
	where, args := listWhere(f)
	args = append([]any{f.AfterSeq}, args...)
	text := "SELECT {cols} FROM {table} WHERE {scope}{seq} > ?{filter} ORDER BY {seq} LIMIT ?"
	if f.Status != "" {
		text = "SELECT {cols} FROM {table} WHERE {scope}{seq} > ?{filter} ORDER BY {seq} + 0 LIMIT ?"
	}
	return t.render(text, append(args, f.Limit)...).withFilter(t.sql(where))
}

// LastSeq returns the Seq of the last message written to the table (0 for
// none): the count of messages written grows by its difference, which
// tools turn into a rate of writes. Writes that rolled back leave gaps,
// so the difference can be more than what was written. It reads the end
// of the primary key, so it is cheap on any table.
func (s *Store) LastSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := lastSeqSQL(s.t).queryRow(ctx, s.db).Scan(&seq); err != nil {
		return 0, s.wrap("last seq", err)
	}
	return seq, nil
}

// lastSeqSQL reads the largest message id.
func lastSeqSQL(t *target) statement {
	return t.render("SELECT COALESCE(MAX(id), 0) FROM {outbox}")
}
