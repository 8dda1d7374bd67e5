package txproc

import (
	"database/sql"
	"fmt"
	"log/slog"
	"regexp"
)

// The limits and defaults every inbox shares; each inbox package exports
// them under its own name.
const (
	// MaxConsumerLength is the longest consumer name.
	MaxConsumerLength = 64
	// DefaultMaxAttempts is Options.MaxAttempts' default.
	DefaultMaxAttempts = 16
	// MaxMaxAttempts is the largest Options.MaxAttempts accepted.
	MaxMaxAttempts = 1000
)

var consumerNameRE = regexp.MustCompile(fmt.Sprintf(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,%d}$`, MaxConsumerLength-1))

// Common is what every inbox's Options holds besides its table: the
// fields that mean the same on every database.
type Common struct {
	Consumer    string
	MaxAttempts int
	Isolation   sql.IsolationLevel
	Logger      *slog.Logger
}

// WithDefaults fills in the defaults: DefaultMaxAttempts, READ
// COMMITTED, slog.Default().
func (c Common) WithDefaults() Common {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Isolation == sql.LevelDefault {
		c.Isolation = sql.LevelReadCommitted
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks c, with its defaults filled in, and returns an error
// for each field that is wrong, naming the field and its value; what
// names the inbox ("mysql inbox").
func (c Common) Validate(what string) []error {
	var errs []error
	if !consumerNameRE.MatchString(c.Consumer) {
		errs = append(errs, fmt.Errorf("%s: Consumer %q: required, 1 to %d letters, digits, '_', '.' or '-', not starting with '.' or '-'", what, c.Consumer, MaxConsumerLength))
	}
	if c.MaxAttempts < 0 || c.MaxAttempts > MaxMaxAttempts {
		errs = append(errs, fmt.Errorf("%s: MaxAttempts %d: must be 1 to %d (0 for the default)", what, c.MaxAttempts, MaxMaxAttempts))
	}
	switch c.Isolation {
	case sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable:
	default:
		errs = append(errs, fmt.Errorf("%s: Isolation %v: must be read committed, repeatable read or serializable", what, c.Isolation))
	}
	return errs
}
