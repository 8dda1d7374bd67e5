package mysql

import (
	"context"
	"database/sql"
	"strings"
	"sync"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Every SQL statement of the store is written whole, once, in a function
// named after it (claimDueSQL, settle statements in settle.go, …) that
// returns the statement with its arguments. testdata/statements.sql has
// every one of them as it runs, names filled in, for the default consumer
// and a named one, under the function's name (TestStatementsReadWhole
// keeps it current): read the SQL there. The text names the tables and
// columns that depend on the consumer in braces, and a target fills them
// in:
//
//	{table}       the table that holds the consumer's delivery state: the
//	              outbox table for the default consumer, <table>_consumption
//	              for a named one
//	{scope}       "" or "consumer = '<name>' AND ": the named consumer's rows
//	{scopecols}   "" or "consumer, ": the index prefix that {scope} fixes,
//	              kept in a GROUP BY so that it stays a loose index scan
//	{seq}         the message's sequence column there: id or msg_id
//	{cols}        the columns scanRecord reads, from {table}
//	{outbox}      the outbox table, and its companions {consumers} (the
//	              registry) and {consumption} (the named consumers' state)
//	{finished}    the statuses retention deletes: 'published', and 'dead'
//	              with Options.PurgeDead
//
// so that the default consumer and every named one run the same
// statements. Table and consumer names are validated before they get here
// (letters, digits and a few punctuation marks, never a quote); every
// value is a placeholder argument. Three things are filled in per call: a
// list of values, written {list}, becomes one placeholder per value; the
// conditions of a filter (DeadFilter, ListFilter), written {filter}, come
// from a fixed set of column conditions with placeholders; and an INSERT
// of n rows repeats its VALUES row n times. The statements of the schema
// (CREATE and ALTER TABLE) are written the same way in schema.go.

// recordColumns are the columns scanRecord reads, in its order.
const recordColumns = "id, event_id, event_key, event_type, payload, headers, occurred_at, created_at, status, retry_count, last_error, " + nextAttemptAt + ", " + publishedAt

// nextAttemptAt is when a record is next due for a worker: for a
// pending record a claim holds, when that lease ends. A claim writes it
// into next_attempt_at and lease_until both (builds before issue 30
// wrote lease_until only, hence the IF).
const nextAttemptAt = "IF(status = 'pending' AND lease_id > 0 AND lease_until > next_attempt_at, lease_until, next_attempt_at)"

// publishedAt is when a record was published: next_attempt_at, which
// the published outcome sets, so that it rewrites fixed-width columns
// only (a published_at column going from NULL to a time would grow the
// row).
const publishedAt = "IF(status = 'published', next_attempt_at, NULL)"

// consumptionColumns are recordColumns of a consumption table: the
// payload, headers and occurred_at are read from the outbox table afterwards
// (contentSQL), so that a claim locks only the consumer's own rows.
const consumptionColumns = "msg_id, event_id, event_key, event_type, NULL, NULL, NULL, created_at, status, retry_count, last_error, " + nextAttemptAt + ", " + publishedAt

// target is where one consumer's delivery state lives: the outbox table
// itself for the default consumer, its rows of the consumption table for
// a named one. Both have the same state columns (status, retry_count,
// last_error, next_attempt_at, lease)
// and the message fields the claims need (event_id, event_key,
// event_type, created_at), so one set of statements serves both.
type target struct {
	// consumer is the named consumer, "" for the default one.
	consumer string
	names    *strings.Replacer

	// rendered keeps each statement once its names are filled in, so that
	// running one costs no more than running a constant.
	mu       sync.RWMutex
	rendered map[string]string
}

// newTarget returns the target of consumer ("" for the default consumer)
// of the outbox table. Both names must have been validated.
func newTarget(table, consumer string, purgeDead bool) *target {
	finished := "'published'"
	if purgeDead {
		finished = "'published', 'dead'"
	}
	outbox, consumption := "`"+table+"`", "`"+consumptionTable(table)+"`"
	common := []string{
		"{outbox}", outbox,
		"{consumers}", "`" + consumersTable(table) + "`",
		"{consumption}", consumption,
		"{finished}", finished,
	}
	own := []string{"{table}", outbox, "{scope}", "", "{scopecols}", "", "{seq}", "id", "{cols}", recordColumns}
	if consumer != "" {
		own = []string{
			"{table}", consumption, "{scope}", "consumer = '" + consumer + "' AND ", "{scopecols}", "consumer, ",
			"{seq}", "msg_id", "{cols}", consumptionColumns,
		}
	}
	return &target{
		consumer: consumer,
		names:    strings.NewReplacer(append(own, common...)...),
		rendered: map[string]string{},
	}
}

// sql returns the statement text with the target's names filled in.
func (t *target) sql(text string) string {
	t.mu.RLock()
	q, ok := t.rendered[text]
	t.mu.RUnlock()
	if ok {
		return q
	}
	q = t.names.Replace(text)
	t.mu.Lock()
	t.rendered[text] = q
	t.mu.Unlock()
	return q
}

// statement is one SQL statement ready to run: its text with every name
// filled in, and its arguments in the order of its placeholders.
type statement struct {
	text string
	args []any
}

// render returns the statement text for t, with args.
func (t *target) render(text string, args ...any) statement {
	return statement{text: t.sql(text), args: args}
}

// renderList is render for a statement with a {list} of n values.
func (t *target) renderList(text string, n int, args ...any) statement {
	return statement{text: expandList(t.sql(text), n), args: args}
}

// renderRows is render for an INSERT of n rows: the row after VALUES,
// which is the end of text, is repeated n times.
func (t *target) renderRows(text string, n int, args ...any) statement {
	q := t.sql(text)
	_, row, _ := strings.Cut(q, " VALUES ")
	var b strings.Builder
	b.Grow(len(q) + (len(row)+2)*(n-1))
	b.WriteString(q)
	for range n - 1 {
		b.WriteString(", ")
		b.WriteString(row)
	}
	return statement{text: b.String(), args: args}
}

// expandList replaces {list} in query with n placeholders.
func expandList(query string, n int) string {
	before, after, _ := strings.Cut(query, "{list}")
	var b strings.Builder
	b.Grow(len(query) + 3*n)
	b.WriteString(before)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('?')
	}
	b.WriteString(after)
	return b.String()
}

// withFilter puts conditions (with placeholders for their values, which
// are in st.args) in place of st's {filter}.
func (st statement) withFilter(conditions string) statement {
	st.text = strings.Replace(st.text, "{filter}", conditions, 1)
	return st
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// query runs a statement that returns rows.
func (st statement) query(ctx context.Context, q querier) (*sql.Rows, error) {
	return q.QueryContext(ctx, st.text, st.args...)
}

// queryRow runs a statement that returns one row.
func (st statement) queryRow(ctx context.Context, q querier) *sql.Row {
	return q.QueryRowContext(ctx, st.text, st.args...)
}

// exec runs a statement that changes rows and returns how many it
// changed.
func (st statement) exec(ctx context.Context, e backend.Execer) (int64, error) {
	res, err := e.ExecContext(ctx, st.text, st.args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// anyArgs passes values as statement arguments.
func anyArgs[T any](vs []T) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}
