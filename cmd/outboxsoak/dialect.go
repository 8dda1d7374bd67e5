package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// A dialect is what the soak program needs of one kind of server: how to
// connect (to a database of its choice, through an address of its choice
// such as a proxy), how to make and drop a scratch database, the store,
// the placeholders of its SQL, and the server's own figures. The parsed
// DSN stays inside; describe and redact are all that may reach output.
type dialect interface {
	// name is the --driver value.
	name() string
	// describe names the server and database, for output: host:port/db,
	// never a user or a password. database "" is the DSN's.
	describe(database string) string
	// dsnDatabase is the database the DSN names ("" for none).
	dsnDatabase() string
	// open returns a pool on database (the DSN's when ""), reached at
	// addr (the DSN's when "").
	open(database, addr string) (*sql.DB, error)
	// serverAddr is the host:port the DSN reaches (for a proxy).
	serverAddr() (string, error)
	createDatabase(ctx context.Context, db *sql.DB, name string) error
	dropDatabase(ctx context.Context, db *sql.DB, name string) error
	// newStore returns the outbox store of table on db.
	// notifyInterval is postgres.Options.NotifyInterval (PostgreSQL only).
	newStore(db *sql.DB, table string, notifyInterval time.Duration) (soakStore, error)
	// listen returns a function that calls notify at every commit to
	// table, until ctx ends, or nil if the store has no such thing.
	listen(database, addr, table string, logger *slog.Logger) (func(ctx context.Context, notify func()) error, error)
	// ph returns the i-th (from 1) placeholder of a statement.
	ph(i int) string
	// version is the server's version string.
	version(ctx context.Context, db *sql.DB) (string, error)
	// figures reads the server's figures for database and the tables
	// whose names start with prefix.
	figures(ctx context.Context, db *sql.DB, database, prefix string) (serverFigures, error)
	// killSessions has the server end the sessions on database whose
	// client port (as the server sees it) is one of ports, and returns
	// how many it ended.
	killSessions(ctx context.Context, db *sql.DB, database string, ports []int) (int, error)
	// redact returns err's text with every secret of the DSN masked.
	redact(err error) error
}

// soakStore is what the program needs of a store: delivery, the
// operator contract (consumers, stats), and migration.
type soakStore interface {
	backend.Outbox
	Migrate(ctx context.Context) error
}

// serverFigures are the server's side of a sample. A figure the server
// does not have is -1.
type serverFigures struct {
	// Connections counts the server's sessions on the run's database.
	Connections int64 `json:"connections"`
	// Tables are the outbox's tables, by name.
	Tables map[string]tableFigures `json:"tables"`
	// HistoryLength is InnoDB's history list length (server-wide: other
	// databases' transactions count too); -1 on PostgreSQL.
	HistoryLength int64 `json:"history_length"`
}

// tableFigures are one table's size. DeadTuples is -1 on MySQL.
type tableFigures struct {
	DataBytes  int64 `json:"data_bytes"`
	IndexBytes int64 `json:"index_bytes"`
	LiveTuples int64 `json:"live_tuples"`
	DeadTuples int64 `json:"dead_tuples"`
}

// newDialect parses dsn for driver. Its errors never contain the DSN.
func newDialect(driver, dsn string) (dialect, error) {
	switch {
	case driver != "mysql" && driver != "postgres":
		return nil, fmt.Errorf("--driver %q: must be mysql or postgres", driver)
	case dsn == "":
		return nil, errNoDSN
	case driver == "mysql":
		return newMySQL(dsn)
	}
	return newPostgres(dsn)
}

// errNoDSN is returned when no DSN is given.
var errNoDSN = errors.New("no DSN: pass --dsn or set OUTBOXSOAK_DSN")

// redactText masks, in s, every run of characters that shares four or
// more characters with a secret: not only the secret as the driver
// parsed it, but any piece of it a misparse cut out and an error quoted.
// Each masked run becomes "xxxxx".
func redactText(s string, secrets []string) string {
	grams := map[string]bool{}
	for _, sec := range secrets {
		for i := 0; i+4 <= len(sec); i++ {
			grams[sec[i:i+4]] = true
		}
	}
	if len(grams) == 0 {
		return s
	}
	masked := make([]bool, len(s))
	for i := 0; i+4 <= len(s); i++ {
		if grams[s[i:i+4]] {
			for j := i; j < i+4; j++ {
				masked[j] = true
			}
		}
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if !masked[i] {
			b.WriteByte(s[i])
			continue
		}
		b.WriteString("xxxxx")
		for i+1 < len(s) && masked[i+1] {
			i++
		}
	}
	return b.String()
}

// redactedError is an error whose text had secrets masked. It keeps no
// link to the original, whose text may hold them.
type redactedError struct{ msg string }

func (e *redactedError) Error() string { return e.msg }

// redactErr returns err with secrets masked, or nil.
func redactErr(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	return &redactedError{msg: redactText(err.Error(), secrets)}
}

// secretsOf returns the texts of a DSN that must never be printed: the
// password as the driver parsed it, and what stands between the user
// name's colon and the last @, which is the password when the parse went
// wrong (an unencoded @, / or # in it). redactText masks every piece of
// either.
func secretsOf(dsn, parsed string) []string {
	out := []string{parsed}
	rest := dsn
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if colon := strings.Index(rest[:at], ":"); colon >= 0 {
			out = append(out, rest[colon+1:at])
		}
	}
	return out
}

// ambiguousURL reports a URL DSN whose user information holds, not
// percent-encoded, a character that ends it early for a URL parser (/,
// ?, #) or that makes the host's @ ambiguous: the parse would take part
// of the password for the host or the database.
func ambiguousURL(dsn string) bool {
	i := strings.Index(dsn, "://")
	if i < 0 {
		return false
	}
	rest := dsn[i+3:]
	at := strings.LastIndex(rest, "@")
	return at >= 0 && strings.ContainsAny(rest[:at], "/?#@")
}

// likePrefix is a LIKE pattern that matches the names starting with
// prefix, whose underscores match only themselves.
func likePrefix(prefix string) string {
	return strings.NewReplacer(`\`, `\\`, "_", `\_`, "%", `\%`).Replace(prefix) + "%"
}

// portSet returns ports as a set.
func portSet(ports []int) map[int]bool {
	out := make(map[int]bool, len(ports))
	for _, p := range ports {
		out[p] = true
	}
	return out
}
