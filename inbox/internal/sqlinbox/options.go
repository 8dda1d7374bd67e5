package sqlinbox

import (
	"cmp"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"

	"github.com/outboxrelay/outboxrelay/inbox"
)

// The limits and defaults every inbox shares; each inbox package exports
// them under its own name.
const (
	// DefaultTable is Options.Table's default.
	DefaultTable = "inbox"
	// MaxTableLength is the longest table name: it leaves room for
	// <table>_schema_version under MySQL's 64-character and
	// PostgreSQL's 63-byte identifier limits.
	MaxTableLength = 48
	// MaxConsumerLength is the longest consumer name.
	MaxConsumerLength = 64
	// DefaultMaxAttempts is Options.MaxAttempts' default.
	DefaultMaxAttempts = 16
	// MaxMaxAttempts is the largest Options.MaxAttempts accepted.
	MaxMaxAttempts = 1000
)

var consumerNameRE = regexp.MustCompile(fmt.Sprintf(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,%d}$`, MaxConsumerLength-1))

// Options configure an Inbox. They are the Options of every database's
// package, which documents them: each converts its own to these, so
// their fields must stay the same, in the same order.
type Options struct {
	Table       string
	Consumer    string
	MaxAttempts int
	Isolation   sql.IsolationLevel
	Observer    inbox.Observer
	Logger      *slog.Logger
}

// WithDefaults fills in the defaults: DefaultTable, DefaultMaxAttempts,
// READ COMMITTED, slog.Default().
func (o Options) WithDefaults() Options {
	o.Table = cmp.Or(o.Table, DefaultTable)
	o.MaxAttempts = cmp.Or(o.MaxAttempts, DefaultMaxAttempts)
	o.Isolation = cmp.Or(o.Isolation, sql.LevelReadCommitted) // over sql.LevelDefault
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o
}

// Validate checks o, with its defaults filled in, for d; the error names
// every field that is wrong, and its value, after d's Name.
func (o Options) Validate(d Dialect) error {
	what := d.Name()
	var errs []error
	if re, rule := d.TableName(); len(o.Table) > MaxTableLength || !re.MatchString(o.Table) {
		errs = append(errs, fmt.Errorf("%s: Table %q: must be %s, at most %d characters", what, o.Table, rule, MaxTableLength))
	}
	if !consumerNameRE.MatchString(o.Consumer) {
		errs = append(errs, fmt.Errorf("%s: Consumer %q: required, 1 to %d letters, digits, '_', '.' or '-', not starting with '.' or '-'", what, o.Consumer, MaxConsumerLength))
	}
	if o.MaxAttempts < 0 || o.MaxAttempts > MaxMaxAttempts {
		errs = append(errs, fmt.Errorf("%s: MaxAttempts %d: must be 1 to %d (0 for the default)", what, o.MaxAttempts, MaxMaxAttempts))
	}
	switch o.Isolation {
	case sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable:
	default:
		errs = append(errs, fmt.Errorf("%s: Isolation %v: must be read committed, repeatable read or serializable", what, o.Isolation))
	}
	return errors.Join(errs...)
}
