// Package optcheck holds what the constructors of the outbox, its
// dashboard and the sinks share in filling in and checking their
// options: the default of a field whose zero and negative values both
// mean "the default", and the list of what is wrong with a set of
// options, whose every message names the field.
//
// A field whose zero value alone means the default takes it with the
// standard library's cmp.Or.
package optcheck

import (
	"errors"
	"fmt"
)

// Number is a field type that Positive defaults.
type Number interface {
	~int | ~int32 | ~int64 | ~float64
}

// Positive returns v, or def when v is zero or negative.
func Positive[T Number](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Problems collects what is wrong with a set of options. The zero value
// has no prefix; New sets one.
type Problems struct {
	prefix string
	errs   []error
}

// New returns an empty list whose messages start with prefix and ": "
// ("kafka" gives "kafka: Topic: required").
func New(prefix string) *Problems {
	return &Problems{prefix: prefix + ": "}
}

// Addf adds a problem. The format starts with the field's name and, but
// for a secret, its value ("BatchSize %d: must be 1 to %d").
func (p *Problems) Addf(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(p.prefix+format, args...))
}

// Add adds err as it is, when not nil: a problem a helper found and
// described itself.
func (p *Problems) Add(err error) {
	if err != nil {
		p.errs = append(p.errs, err)
	}
}

// Err joins the problems (errors.Join), or returns nil when there is none.
func (p *Problems) Err() error {
	return errors.Join(p.errs...)
}
