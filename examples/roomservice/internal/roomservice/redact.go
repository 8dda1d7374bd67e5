package roomservice

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	mysqldrv "github.com/go-sql-driver/mysql"
)

// The configuration holds two secrets: the database password in the DSN
// and the Tencent IM secret key. Every type that holds one prints, logs
// (slog.LogValuer) and formats (every fmt verb) with it redacted, so a
// config that ends up in a log line or an error does not leak it.

const redactedMark = "[redacted]"

// redactDSN returns dsn with its password replaced; a DSN that does not
// parse is replaced whole, as its password cannot be found.
func redactDSN(dsn string) string {
	if dsn == "" {
		return ""
	}
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		return "(a DSN that does not parse)"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = redactedMark
	}
	return cfg.FormatDSN()
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

// errDSNForm says what a DSN looks like, for errors about one.
const errDSNForm = `the form is USER:PASSWORD@tcp(HOST:PORT)/DATABASE?PARAM=VALUE; ` +
	`the "/" before the database is required, and lets the password hold "/" and "@"`

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
	return nil, fmt.Errorf("%s: %s", why, errDSNForm)
}

// dsnTarget names what a DSN reaches, without its password:
// USER@NET(ADDR)/DATABASE.
func dsnTarget(cfg *mysqldrv.Config) string {
	return fmt.Sprintf("%s@%s(%s)/%s", cfg.User, cfg.Net, cfg.Addr, cfg.DBName)
}

// redactErr returns err with every occurrence of secret in its text
// replaced; errors.Is and errors.As still see err.
func redactErr(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), secret, redactedMark), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func (c MySQLConfig) redacted() MySQLConfig {
	c.DSN = redactDSN(c.DSN)
	return c
}

func (c TencentIMConfig) redacted() TencentIMConfig {
	if c.SecretKey != "" {
		c.SecretKey = redactedMark
	}
	return c
}

func (c Config) redacted() Config {
	c.MySQL, c.TencentIM = c.MySQL.redacted(), c.TencentIM.redacted()
	return c
}

// String prints the block with the password redacted.
func (c MySQLConfig) String() string {
	type plain MySQLConfig
	return fmt.Sprintf("%+v", plain(c.redacted()))
}

// String prints the block with the secret key redacted.
func (c TencentIMConfig) String() string {
	type plain TencentIMConfig
	return fmt.Sprintf("%+v", plain(c.redacted()))
}

// String prints the configuration with its secrets redacted.
func (c Config) String() string {
	type plain Config
	return fmt.Sprintf("%+v", plain(c.redacted()))
}

// Format makes every verb (%v, %+v, %#v, %s, %q, %x …) print String.
func (c MySQLConfig) Format(f fmt.State, _ rune)     { _, _ = io.WriteString(f, c.String()) }
func (c TencentIMConfig) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }
func (c Config) Format(f fmt.State, _ rune)          { _, _ = io.WriteString(f, c.String()) }

// LogValue makes slog log String.
func (c MySQLConfig) LogValue() slog.Value     { return slog.StringValue(c.String()) }
func (c TencentIMConfig) LogValue() slog.Value { return slog.StringValue(c.String()) }
func (c Config) LogValue() slog.Value          { return slog.StringValue(c.String()) }
