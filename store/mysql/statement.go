package mysql

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Every SQL statement of the store is written whole, once, where it
// runs, or in a constant named after it. testdata/statements.sql has
// every one of them as it runs, names filled in, for the default
// consumer and a named one, under the function that runs it
// (TestStatementsReadWhole keeps it current): read the SQL there. The
// text names the tables in braces, and a target fills them in:
//
//	{outbox}      the outbox table (the log)
//	{consumers}   the registry of consumers, with their positions
//	{ranges}      the batches handed out and not yet settled
//	{state}       the state rows (a message that needs one, per consumer)
//	{gaps}        the ids missing from the log
//	{c}           the consumer's id: 0 for the default consumer
//	{finished}    the statuses retention deletes: 'published', and 'dead'
//	              with Options.PurgeDead
//
// so that the default consumer and every named one run the same
// statements. Table names are validated before they get here (letters,
// digits and underscores, never a quote); every value is a placeholder
// argument. Two things are filled in per call: a list of values, written
// {list}, becomes one placeholder per value; and an INSERT of n rows
// repeats its VALUES row n times. The statements of the schema (CREATE
// and ALTER TABLE) are written the same way in schema/*.sql.

// target is one consumer's view of the tables: the names its statements
// use, filled in.
type target struct {
	// consumerID is the consumer: 0 for the default one.
	consumerID uint32
	names      *strings.Replacer

	// rendered keeps each statement once its names are filled in, so that
	// running one costs no more than running a constant.
	mu       sync.RWMutex
	rendered map[string]string
}

// newTarget returns the target of consumer id (0 for the default
// consumer) of the outbox table, whose name must have been validated.
func newTarget(table string, id uint32, purgeDead bool) *target {
	finished := "'published'"
	if purgeDead {
		finished = "'published', 'dead'"
	}
	q := func(name string) string { return "`" + name + "`" }
	return &target{
		consumerID: id,
		names: strings.NewReplacer(
			"{outbox}", q(table),
			"{consumers}", q(consumersTable(table)),
			"{ranges}", q(rangesTable(table)),
			"{state}", q(stateTable(table)),
			"{gaps}", q(gapsTable(table)),
			"{c}", strconv.FormatUint(uint64(id), 10),
			"{finished}", finished,
			// The primary key's name in an index hint, quoted: MySQL and
			// MariaDB take it either way, go-mysql-server (the
			// room-service demo's embedded engine) only quoted.
			"{primary}", q("PRIMARY"),
		),
		rendered: map[string]string{},
	}
}

// sql returns the statement text with the target's names filled in.
func (t *target) sql(text string) string {
	t.mu.RLock()
	q, ok := t.rendered[text]
	t.mu.RUnlock()
	if !ok {
		q = t.names.Replace(text)
		t.mu.Lock()
		t.rendered[text] = q
		t.mu.Unlock()
	}
	if log := statementLog.Load(); log != nil {
		(*log)(q)
	}
	return q
}

// statementLog, when set (by TestStatementsReadWhole only), is told every
// statement sql fills in.
var statementLog atomic.Pointer[func(stmt string)]

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
	i := strings.LastIndex(q, "VALUES ")
	row := q[i+len("VALUES "):]
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

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// query runs a statement that returns rows.
func (st statement) query(ctx context.Context, q querier) (*sql.Rows, error) {
	return q.QueryContext(ctx, st.text, st.args...)
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
