package sqlinbox

import (
	"cmp"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/internal/sqldialect"
)

// The defaults and limits of Options, the same for every database.
const (
	// DefaultTable is the table name when Options.Table is empty.
	DefaultTable = "inbox"
	// MaxTableLength is the longest table name accepted. It leaves room
	// for <table>_schema_version under MySQL's 64-character and
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

// Options configures an Inbox; inbox/mysql's and inbox/postgres's
// Options are these. The zero value, with Consumer set, is every
// default. Where a field means something different on one database,
// that database's package says so on its Options.
type Options struct {
	// Table is the name of the inbox table. Defaults to DefaultTable
	// ("inbox"). It must be a plain identifier of at most MaxTableLength
	// characters, in the characters the database's package accepts
	// (inbox/mysql: letters, digits and underscores, not starting with a
	// digit; inbox/postgres: the same in lower case). Several consumers
	// may share a table: their rows are told apart by Consumer.
	Table string
	// Consumer names the consumer whose messages the inbox records, such
	// as "activity-service". Required: 1 to MaxConsumerLength letters,
	// digits, '_', '.' or '-', not starting with '.' or '-'. Every
	// instance of one consumer must use the same name; each consumer of
	// the same messages needs its own.
	Consumer string
	// MaxAttempts bounds the transactions one Process call begins: a
	// transaction rolled back by a conflict (a deadlock, a lock timeout,
	// a lost connection; on PostgreSQL also a serialization failure) is
	// tried again, after a short randomised backoff, until this many
	// have been begun. A batch of Purge is tried as often. Defaults to
	// DefaultMaxAttempts (16); at most MaxMaxAttempts (1000).
	MaxAttempts int
	// Isolation is the isolation level of Process's transactions, which
	// the handler's writes share. Defaults to sql.LevelReadCommitted;
	// sql.LevelRepeatableRead and sql.LevelSerializable are accepted
	// too. What a stricter level costs is the database's: see its
	// package's Options.
	Isolation sql.IsolationLevel
	// Observer, if set, receives an Event for every outcome, conflict
	// and purge, for metrics.
	Observer inbox.Observer
	// Logger receives a line for every handler panic (Error, with the
	// stack) and every retried conflict (Debug). Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// withDefaults fills in the defaults: DefaultTable, DefaultMaxAttempts,
// READ COMMITTED, slog.Default().
func (o Options) withDefaults() Options {
	o.Table = cmp.Or(o.Table, DefaultTable)
	o.MaxAttempts = cmp.Or(o.MaxAttempts, DefaultMaxAttempts)
	o.Isolation = cmp.Or(o.Isolation, sql.LevelReadCommitted) // over sql.LevelDefault
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o
}

// validate checks o, with its defaults filled in, for d; the error names
// every field that is wrong, and its value, after d's Name.
func (o Options) validate(d sqldialect.Dialect) error {
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
