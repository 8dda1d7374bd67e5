// Package dsnsafe parses go-sql-driver/mysql DSNs and reports errors about
// them without ever quoting the password: for the commands (outboxctl,
// room-service) that take a DSN from their users.
package dsnsafe

import (
	"errors"
	"fmt"
	"strings"

	mysqldrv "github.com/go-sql-driver/mysql"
)

// Redacted replaces a password in error texts.
const Redacted = "[redacted]"

// Form says what a DSN looks like, for errors about one.
const Form = `the form is USER:PASSWORD@tcp(HOST:PORT)/DATABASE?PARAM=VALUE; ` +
	`the "/" before the database is required, and lets the password hold "/" and "@"`

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

// Parse is mysqldrv.ParseDSN with an error that never quotes the DSN.
func Parse(dsn string) (*mysqldrv.Config, error) {
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err == nil {
		return cfg, nil
	}
	why := "does not parse"
	if fixedErrors[err.Error()] {
		why += " (" + strings.TrimPrefix(err.Error(), "invalid DSN: ") + ")"
	}
	return nil, fmt.Errorf("%s: %s", why, Form)
}

// Target names what a DSN reaches, without its password:
// USER@NET(ADDR)/DATABASE.
func Target(cfg *mysqldrv.Config) string {
	return fmt.Sprintf("%s@%s(%s)/%s", cfg.User, cfg.Net, cfg.Addr, cfg.DBName)
}

// Err returns err, or, when its text holds password, an error with the
// same text, password replaced, that unwraps to nothing: a caller that
// unwraps it must not find the password either. errors.Is still matches
// the sentinels err matched (see Is).
func Err(err error, password string) error {
	if err == nil || password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), password, Redacted), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }

// Is lets errors.Is see through to the original error's sentinels
// without handing the original out.
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }
