package main

import (
	"fmt"
	"os"
	"strings"

	mysqldrv "github.com/go-sql-driver/mysql"
)

// The environment variables --dsn defaults to, in order. Only their names
// are ever printed: a DSN holds a password.
var dsnEnv = []string{"OUTBOXCTL_DSN", "MYSQL_DSN"}

// dsnFromEnv is the first of dsnEnv that is set.
func dsnFromEnv() string {
	for _, n := range dsnEnv {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// dsnErrorsWithoutDSN are the driver's DSN errors that quote nothing of
// the DSN. Its others can: with a "/" in the password and no database
// name, the driver splits the DSN at that "/" and reports the part before
// it, password included, as an unknown network.
var dsnErrorsWithoutDSN = map[string]bool{
	"invalid DSN: did you forget to escape a param value?":                  true,
	"invalid DSN: network address not terminated (missing closing brace)":   true,
	"invalid DSN: missing the slash separating the database name":           true,
	"invalid DSN: interpolateParams can not be used with unsafe collations": true,
}

// parseDSN is mysqldrv.ParseDSN with an error that never quotes the DSN.
func parseDSN(dsn string) (*mysqldrv.Config, error) {
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err == nil {
		return cfg, nil
	}
	why := "does not parse"
	if dsnErrorsWithoutDSN[err.Error()] {
		why += " (" + strings.TrimPrefix(err.Error(), "invalid DSN: ") + ")"
	}
	return nil, fmt.Errorf(`%s: the form is USER:PASSWORD@tcp(HOST:PORT)/DATABASE?PARAM=VALUE; `+
		`the "/" before the database is required, and lets the password hold "/" and "@"`, why)
}

// dsnTarget names what a DSN reaches, without its password.
func dsnTarget(cfg *mysqldrv.Config) string {
	return fmt.Sprintf("%s@%s(%s)/%s", cfg.User, cfg.Net, cfg.Addr, cfg.DBName)
}

// redactErr returns err with every occurrence of secret in its text
// replaced; errors.Is and errors.As still see err.
func redactErr(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), secret, "[redacted]"), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
