// Package storecore holds what the outbox stores (store/mysql,
// store/postgres) share beyond the backend contract: what a store is
// (Store), the options both have and their checks, the rule of consumer
// names, the checks of the arguments of Enqueue and the head start, a
// named consumer's Enqueue, the operators' filters (with each
// database's conditions in a FilterDialect), and the running and
// reading of the operator queries that both shape alike. Each store
// keeps its SQL and its exported names; this package holds only what is
// the same logic on both databases, so that it is written once.
package storecore

import (
	"cmp"
	"fmt"
	"regexp"
)

// The defaults and limits both stores share; each store exports them
// under its own name.
const (
	// DefaultTable is Options.Table's default.
	DefaultTable = "outbox"
	// DefaultMaxPayloadBytes is Options.MaxPayloadBytes' default.
	DefaultMaxPayloadBytes = 1 << 20
	// DefaultMaxHeaderBytes is Options.MaxHeaderBytes' default.
	DefaultMaxHeaderBytes = 16 << 10
	// DefaultMaxClaimBytes is Options.MaxClaimBytes' default.
	DefaultMaxClaimBytes = 16 << 20
	// MaxConsumerNameLength is the longest consumer name.
	MaxConsumerNameLength = 64

	// payloadBytesCeiling is the largest MaxPayloadBytes accepted.
	payloadBytesCeiling = 64 << 20
)

// Common is what every store's Options holds besides the options of its
// own database: the fields that mean the same on every database.
type Common struct {
	Table           string
	MaxPayloadBytes int
	MaxHeaderBytes  int
	MaxClaimBytes   int
}

// WithDefaults fills in the defaults of the zero fields.
func (c Common) WithDefaults() Common {
	c.Table = cmp.Or(c.Table, DefaultTable)
	c.MaxPayloadBytes = cmp.Or(c.MaxPayloadBytes, DefaultMaxPayloadBytes)
	c.MaxHeaderBytes = cmp.Or(c.MaxHeaderBytes, DefaultMaxHeaderBytes)
	c.MaxClaimBytes = cmp.Or(c.MaxClaimBytes, DefaultMaxClaimBytes)
	return c
}

// Dialect is what a store's database allows of the common options.
type Dialect struct {
	// What prefixes the errors: "mysql store".
	What string
	// MaxTableLength is the longest table name, which leaves room under
	// the database's identifier limit for the companion tables.
	MaxTableLength int
	// LowerCaseTable allows only lower-case letters in table names (for
	// PostgreSQL, which folds unquoted names to lower case).
	LowerCaseTable bool
	// MaxHeaderBytes is the largest MaxHeaderBytes accepted (what the
	// headers column holds).
	MaxHeaderBytes int
}

var (
	tableNameRE      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	lowerTableNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
)

// Validate checks c, with its defaults filled in, and returns an error
// for each field that is wrong, naming the field and its value.
func (c Common) Validate(d Dialect) []error {
	var errs []error
	re, letters := tableNameRE, "letters"
	if d.LowerCaseTable {
		re, letters = lowerTableNameRE, "lower-case letters"
	}
	if len(c.Table) > d.MaxTableLength || !re.MatchString(c.Table) {
		errs = append(errs, fmt.Errorf("%s: Table %q: must be %s, digits and underscores, not starting with a digit, at most %d characters", d.What, c.Table, letters, d.MaxTableLength))
	}
	if c.MaxPayloadBytes < 0 || c.MaxPayloadBytes > payloadBytesCeiling {
		errs = append(errs, fmt.Errorf("%s: MaxPayloadBytes %d: must be 1 to %d (0 for the default)", d.What, c.MaxPayloadBytes, payloadBytesCeiling))
	}
	if c.MaxHeaderBytes < 0 || c.MaxHeaderBytes > d.MaxHeaderBytes {
		errs = append(errs, fmt.Errorf("%s: MaxHeaderBytes %d: must be 1 to %d (0 for the default)", d.What, c.MaxHeaderBytes, d.MaxHeaderBytes))
	}
	if c.MaxClaimBytes < 0 {
		errs = append(errs, fmt.Errorf("%s: MaxClaimBytes %d: must not be negative (0 for the default)", d.What, c.MaxClaimBytes))
	}
	return errs
}

var consumerNameRE = regexp.MustCompile(fmt.Sprintf(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,%d}$`, MaxConsumerNameLength-1))

// CheckConsumerName refuses a name that is not 1 to
// MaxConsumerNameLength letters, digits, '_', '.' or '-', not starting
// with '.' or '-'; what prefixes the error ("mysql store").
func CheckConsumerName(what, name string) error {
	if !consumerNameRE.MatchString(name) {
		return fmt.Errorf("%s: consumer name %q: must be 1 to %d letters, digits, '_', '.' or '-', not starting with '.' or '-'", what, name, MaxConsumerNameLength)
	}
	return nil
}
