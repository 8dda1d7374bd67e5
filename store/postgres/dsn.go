package postgres

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxrelay/outboxrelay/internal/pgdsn"
	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
)

// ErrAmbiguousDSN is what CheckDSN's errors, NewListener's for such a
// DSN, and the store's for a pool opened with one match (errors.Is): the
// DSN does not parse unambiguously.
var ErrAmbiguousDSN = pgdsn.ErrAmbiguous

// CheckDSN returns nil when dsn, a PostgreSQL DSN (a postgres:// or
// postgresql:// URL, or key=value), parses unambiguously, and otherwise
// an error that quotes nothing of it and says how to write it. In the
// URL form a password with a raw "@", "/", "?", "#", ":", "%", space or
// non-ASCII character is refused: pgx, like libpq, ends the user and
// password at the first "@" or "/", so it would take the rest for the
// host or the database, and its errors (the host it could not resolve,
// the database that does not exist) would show that part of the
// password. The rules are in docs/postgres-store.md.
//
// NewListener calls it. A service that opens its pool from a DSN (with
// sql.Open("pgx", dsn) or pgxpool) calls it first: the store cannot see
// the DSN, and can only tell from pgx's errors that a part of it went
// astray (see the store's errors, below).
func CheckDSN(dsn string) error {
	if err := pgdsn.Check(dsn); err != nil {
		return fmt.Errorf("postgres store: the DSN %w", err)
	}
	return nil
}

// dsnError stands in for pgx's error about a DSN that went astray.
type dsnError struct {
	*secretfmt.CauseError
	// connect: pgx failed to connect (so the store's classification,
	// through SafeToRetry, still says a lost connection).
	connect bool
	// ambiguous: the DSN did not parse unambiguously.
	ambiguous bool
}

// SafeToRetry makes a failed connect classify as a connection failure,
// as pgx's own ConnectError does.
func (e *dsnError) SafeToRetry() bool { return e.connect }

// Is makes errors.Is(err, ErrAmbiguousDSN) hold for a DSN that did not
// parse unambiguously.
func (e *dsnError) Is(target error) bool { return e.ambiguous && target == ErrAmbiguousDSN }

// safeDriverErr returns err, or a stand-in for it that quotes nothing of
// the DSN when err is pgx's failure to parse or connect with a DSN that
// went astray: pgx's parse error quotes the DSN, masking the password as
// well as it can tell it, which is not at all in a DSN it cannot read;
// its connect error names the user, host and database it read, which
// are parts of the password when the DSN did not parse unambiguously. A
// parse error is replaced when the DSN does not pass CheckDSN; a connect
// error when pgx's host, user or database holds an "@" (none can, read
// from a DSN that passes CheckDSN, unless written as %40) or its text a
// piece of the password it read.
func safeDriverErr(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if cerr := pgdsn.Check(pe.ConnString); cerr != nil {
			return &dsnError{ambiguous: true, CauseError: secretfmt.Cause("the pool's DSN "+cerr.Error()+
				" (pgx's message, which quotes the DSN, is not shown)", err)}
		}
		return err
	}
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) || ce.Config == nil {
		return err
	}
	c := ce.Config
	read := []string{c.User, c.Host, c.Database}
	for _, f := range c.Fallbacks {
		read = append(read, f.Host)
	}
	if strings.Contains(strings.Join(read, ""), "@") {
		return &dsnError{connect: true, ambiguous: true, CauseError: secretfmt.Cause(`cannot connect, and pgx read an "@" into the host, user or database, `+
			`so the pool's DSN did not parse as meant: percent-encode the password (postgres.CheckDSN tells); `+
			`pgx's message is not shown, as it may hold part of the password`, err)}
	}
	public := append(read, strconv.Itoa(int(c.Port))) // as pgx shows them: host:port
	for _, f := range c.Fallbacks {
		public = append(public, fmt.Sprintf("%s:%d", f.Host, f.Port))
	}
	if hidden := secretfmt.Hide(err, c.Password, public); hidden != err {
		return &dsnError{connect: true, CauseError: hidden.(*secretfmt.CauseError)}
	}
	return err
}
