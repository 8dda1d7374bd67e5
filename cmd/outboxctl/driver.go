package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/outboxrelay/outboxrelay/internal/pgdsn"
)

// A driver is what outboxctl knows of one kind of database: how to reach
// it from a DSN, which store reads and repairs its outbox, and its DDL.
// The commands speak only to the operator contract (outboxStore), so a
// store they work on here works on every driver.
type driver struct {
	// name is what --driver takes.
	name string
	// dsnForm shows how a DSN of this driver looks, for --dsn's errors.
	dsnForm string
	// agedFrom says from when the store's retention counts a record's
	// age ("published", "written"), for purge's confirmation.
	agedFrom string
	// connect parses dsn and returns a pool on its database (not yet
	// reached). Its errors never quote the DSN's password.
	connect func(dsn string) (dbConn, error)
	// openStore returns the store of table on db.
	openStore func(db *sql.DB, table string) (outboxStore, error)
	// listTables lists the tables of db's database (its current schema,
	// for PostgreSQL), sorted, with those that look like outbox tables.
	listTables func(ctx context.Context, db *sql.DB) (tableList, error)
	// schema is the outbox's DDL; inbox the inbox table's.
	schema schemaDDL
	inbox  inboxDDL
	// status reads what Migrate would do to a store's tables.
	status func(ctx context.Context, s outboxStore) (schemaStatus, error)
}

// dbConn is a pool on the DSN's database and how to name it.
type dbConn struct {
	db *sql.DB
	// target names the database as USER@ADDRESS/DATABASE: never with the
	// password.
	target string
	// dbName is the database's name.
	dbName string
	// hide stands in for an error of the driver's whose text holds a
	// piece of the DSN's password (secretfmt.Hide).
	hide func(error) error
}

// schemaDDL is a store's versioned DDL.
type schemaDDL struct {
	version int
	sql     func(table string, from, to int) (string, error)
}

// inboxDDL is an inbox's DDL, at its one version.
type inboxDDL struct {
	defaultTable string
	version      int
	sql          func(table string) (string, error)
}

// schemaStatus is what a migration would do.
type schemaStatus struct {
	// version is the tables' schema version, 0 when there are none.
	version int
	// pending are the statements Migrate would run, in order.
	pending []string
}

// drivers are the databases outboxctl speaks to, by --driver's name.
var drivers = map[string]*driver{}

// driverEnv is the environment variable --driver defaults to.
const driverEnv = "OUTBOXCTL_DRIVER"

// driverNames lists drivers' names, sorted, for messages.
func driverNames() string {
	names := make([]string, 0, len(drivers))
	for n := range drivers {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// pickDriver resolves the driver: --driver, else $OUTBOXCTL_DRIVER, else
// the DSN's form (a postgres:// or postgresql:// URL is PostgreSQL's),
// else mysql.
func (c *cli) pickDriver() (*driver, error) {
	name, from := c.driverName, "--driver"
	if name == "" {
		name, from = os.Getenv(driverEnv), "$"+driverEnv
	}
	if name == "" {
		name, from = "mysql", "the default driver"
		if looksLikePostgres(c.dsn) {
			name, from = "postgres", "a PostgreSQL --dsn"
		}
	}
	d, ok := drivers[name]
	if !ok {
		return nil, fmt.Errorf("%s %s: must be one of %s", from, argText(name), driverNames())
	}
	return d, nil
}

// looksLikePostgres says whether dsn is PostgreSQL's: a postgres:// or
// postgresql:// URL, or libpq's keyword/value form (host=... dbname=...).
// MySQL's DSN (USER:PASSWORD@tcp(HOST)/DB) is neither.
func looksLikePostgres(dsn string) bool { return pgdsn.Looks(dsn) }
