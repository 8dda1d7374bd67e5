package storecore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Filter collects the conditions of an operator's filter (a
// backend.ListFilter or backend.DeadFilter) on message o and state row
// s, with their arguments, in order.
type Filter struct {
	// Args are the conditions' arguments, in the order of their
	// placeholders.
	Args     []any
	conds    []string
	numbered bool
}

// Add adds the condition cond, whose argument is arg. In a filter of
// numbered placeholders (FilterDialect.Numbered) "$?" in cond stands for
// arg's, which Add numbers; otherwise cond has its "?" as it is.
func (f *Filter) Add(cond string, arg any) {
	f.Args = append(f.Args, arg)
	if f.numbered {
		cond = strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(f.Args)))
	}
	f.conds = append(f.conds, cond)
}

// Where is the conditions, each after " AND " ("" for none), to follow a
// WHERE.
func (f *Filter) Where() string {
	if len(f.conds) == 0 {
		return ""
	}
	return " AND " + strings.Join(f.conds, " AND ")
}

// FilterDialect is how a database writes the conditions of the fields of
// the operators' filters; the fields that are set, and in which order
// their conditions come, are the same on every database. Each condition
// is on message o and state row s, with one placeholder for its
// argument.
type FilterDialect struct {
	// Numbered says the conditions' placeholders are numbered ("$?" in
	// them, see Filter.Add).
	Numbered bool
	// Type and Key match the event type and key exactly, byte for byte;
	// Exact turns the filter's value into their argument.
	Type, Key string
	Exact     func(string) any
	// OlderThan matches messages written at least its argument, in
	// microseconds, ago.
	OlderThan string
	// ErrorContains matches state rows whose last error contains the
	// value, which Contains turns into its argument.
	ErrorContains string
	Contains      func(string) any
	// Status matches the record's status, for a database that filters it
	// among the conditions ("" for one that does not: its List sees to
	// ListFilter.Status itself).
	Status string
	// MinAttempts matches records with at least its argument of failed
	// attempts.
	MinAttempts string
}

// Dead is the filter of f's conditions.
func (d FilterDialect) Dead(f backend.DeadFilter) *Filter {
	fl := &Filter{numbered: d.Numbered}
	if f.Type != "" {
		fl.Add(d.Type, d.Exact(f.Type))
	}
	if f.Key != "" {
		fl.Add(d.Key, d.Exact(f.Key))
	}
	if f.OlderThan > 0 {
		fl.Add(d.OlderThan, f.OlderThan.Microseconds())
	}
	if f.ErrorContains != "" {
		fl.Add(d.ErrorContains, d.Contains(f.ErrorContains))
	}
	return fl
}

// List checks f (backend.ListFilter.Validate) and returns the filter of
// its conditions: those of its DeadFilter fields, its status (if the
// dialect has that condition) and MinAttempts. what prefixes the error.
func (d FilterDialect) List(what string, f backend.ListFilter) (*Filter, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("%s: list: %w", what, err)
	}
	fl := d.Dead(backend.DeadFilter{Type: f.Type, Key: f.Key, OlderThan: f.OlderThan, ErrorContains: f.ErrorContains})
	if d.Status != "" && f.Status != "" {
		fl.Add(d.Status, string(f.Status))
	}
	if f.MinAttempts > 0 {
		fl.Add(d.MinAttempts, f.MinAttempts)
	}
	return fl, nil
}

// StateRowsOnly says that what f lists all have state rows, so that a
// list need read only those: dead letters, and records that failed.
func StateRowsOnly(f backend.ListFilter) bool {
	return f.Status == outbox.StatusDead || f.MinAttempts > 0 || f.ErrorContains != ""
}

// Records is the records of rows a list read (rec takes a row's), those
// that could not all be decoded with the fields that could.
func Records[R any](rows []R, rec func(R) outbox.Record) []outbox.Record {
	out := make([]outbox.Record, len(rows))
	for i, r := range rows {
		out[i] = rec(r)
	}
	return out
}

// Requeued is Requeue's answer for message id once its statement
// requeued n records: nil for one; otherwise NotRequeued of the
// consumer's record of it, as get reads it. what prefixes the errors.
func Requeued(ctx context.Context, what, id string, n int64, get func(context.Context, string) (outbox.Record, error)) error {
	if n == 1 {
		return nil
	}
	rec, err := get(ctx, id)
	return NotRequeued(what, id, rec, err)
}
