// Package dsnsafe parses go-sql-driver/mysql DSNs and reports errors about
// them without ever quoting the password: for the commands (outboxctl,
// the examples' services, the bench) that take a DSN from their users.
// Its PostgreSQL counterpart is internal/pgdsn.
//
// The driver splits a DSN, USER[:PASSWORD]@NET(ADDRESS)/DATABASE[?PARAMS],
// at its last "/", then at the last "@" before that, then at the first
// ":" before that. So a password may hold any character, "/", "@" and ":"
// included, and Parse refuses what would move those splits: a DSN
// without the "/" (the driver would split at a "/" in the password), an
// "@" after the last "/" (the driver would take the password's tail for
// the database), a URL (mysql://USER:PASSWORD@HOST/DB: the driver would
// take "mysql" for the user and the rest for the password), and a user
// with a space, a control character or "=" (a PostgreSQL key=value DSN,
// whose password would be shown as the user).
package dsnsafe

import (
	"errors"
	"fmt"
	"strings"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
)

// Form says what a DSN looks like, for errors about one.
const Form = `the form is USER:PASSWORD@tcp(HOST:PORT)/DATABASE?PARAM=VALUE; ` +
	`the "/" before the database is required, and lets the password hold "/" and "@"; ` +
	`the database and parameters hold no "@" (write %40)`

// ErrAmbiguous is what Parse's errors for a DSN that does not parse
// unambiguously match (errors.Is).
var ErrAmbiguous = errors.New("does not parse unambiguously")

// fixedErrors are the driver's DSN errors that quote nothing of the DSN.
// Its others can: with a "/" in the password and no database name, the
// driver splits the DSN at that "/" and reports the part before it,
// password included, as an unknown network.
var fixedErrors = map[string]bool{
	"invalid DSN: did you forget to escape a param value?":                  true,
	"invalid DSN: network address not terminated (missing closing brace)":   true,
	"invalid DSN: missing the slash separating the database name":           true,
	"invalid DSN: interpolateParams can not be used with unsafe collations": true,
}

// Parse is mysqldrv.ParseDSN, refusing a DSN that does not parse
// unambiguously (see the package doc), with errors that never quote the
// DSN.
func Parse(dsn string) (*mysqldrv.Config, error) {
	if reason := shapeReason(dsn); reason != "" {
		return nil, fmt.Errorf("%w (%s): %s", ErrAmbiguous, reason, Form)
	}
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		why := "does not parse"
		if fixedErrors[err.Error()] {
			why += " (" + strings.TrimPrefix(err.Error(), "invalid DSN: ") + ")"
		}
		return nil, fmt.Errorf("%s: %s", why, Form)
	}
	if strings.ContainsFunc(cfg.User, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '=' }) {
		return nil, fmt.Errorf(`%w (its user holds a space, a control character or "=": `+
			`a PostgreSQL key=value DSN?): %s`, ErrAmbiguous, Form)
	}
	return cfg, nil
}

// shapeReason is the rule of the package doc that dsn breaks before the
// driver reads it, or "".
func shapeReason(dsn string) string {
	if scheme, _, ok := strings.Cut(dsn, "://"); ok && isScheme(scheme) {
		return "it is a URL, which go-sql-driver/mysql does not take"
	}
	if slash := strings.LastIndexByte(dsn, '/'); slash >= 0 && strings.Contains(dsn[slash:], "@") {
		return `an "@" after the last "/": in the database name or a parameter, or a password with "@" and "/" and no database`
	}
	return ""
}

// isScheme reports whether s is a URL scheme: a letter, then letters,
// digits, "+", "-" and ".".
func isScheme(s string) bool {
	for i, r := range s {
		letter := 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
		if !letter && (i == 0 || !('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return false
		}
	}
	return s != ""
}

// Target names what a DSN reaches, without its password:
// USER@NET(ADDR)/DATABASE.
func Target(cfg *mysqldrv.Config) string {
	return fmt.Sprintf("%s@%s(%s)/%s", cfg.User, cfg.Net, cfg.Addr, cfg.DBName)
}

// Hide is secretfmt.Hide for an error of a connection made with cfg:
// err, or, when its text holds a piece of cfg's password that is not
// also part of its user, network, address or database, a stand-in that
// shows none of that text.
func Hide(err error, cfg *mysqldrv.Config) error {
	return secretfmt.Hide(err, cfg.Passwd, []string{cfg.User, cfg.Net, cfg.Addr, cfg.DBName})
}
