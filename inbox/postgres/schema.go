package postgres

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/outboxrelay/outboxrelay/inbox/internal/sqlinbox"
)

// SchemaVersion is the version of the inbox schema this build makes and
// needs. The versions so far:
//
//	1  the inbox table: (consumer, msg_id bytea) primary key,
//	   processed_at and <table>_processed_idx (consumer, processed_at)
//
// The table <table>_schema_version records the version reached.
const SchemaVersion = 1

// createSQL makes the current version from nothing, and records it. Its
// names are written {inbox}, {schema_version}, {pkey} and
// {processed_idx}, the version {version}.
//
//go:embed schema/create.sql
var createSQL string

// requiredColumns are the columns of the inbox table the inbox reads and
// writes, with their types.
var requiredColumns = map[string]string{"consumer": "text", "msg_id": "bytea", "processed_at": "timestamp with time zone"}

// SchemaSQL returns the SQL that creates the inbox table named table at
// the current SchemaVersion, with its names filled in, for a migration
// tool (golang-migrate, goose, atlas) or a DBA to apply instead of
// Migrate. Migrate runs the same statements, in one transaction.
func SchemaSQL(table string) (string, error) {
	return sqlinbox.SchemaSQL(dialect{}, table)
}

// Schema is the statements of create.sql, without comments, with the
// names of table filled in.
func (dialect) Schema(table string) []string {
	return sqlinbox.SplitSchema(createSQL, strings.NewReplacer(
		"{inbox}", quote(table),
		"{schema_version}", quote(table+sqlinbox.SchemaVersionSuffix),
		"{pkey}", quote(table+"_pkey"),
		"{processed_idx}", quote(table+"_processed_idx"),
		"{version}", strconv.Itoa(SchemaVersion),
	))
}

// Migrate creates the inbox table, its index and <table>_schema_version
// if they do not exist, records the schema version, and checks that the
// table has the columns and the primary key the inbox needs. It runs in
// one transaction, so a failure leaves nothing half made. It is
// idempotent and safe to run from several instances at start-up: they
// take turns on a transaction-scoped advisory lock
// (pg_advisory_xact_lock, keyed by the table's name), which the commit
// releases, and which also keeps two CREATE TABLE IF NOT EXISTS from
// racing. When the table is already current it runs no DDL, so a
// database user without CREATE rights may call it. A table of the same
// name that the inbox did not make fails with an error naming what it
// lacks; one recorded at a newer schema version than this build knows
// fails too.
func (ib *Inbox) Migrate(ctx context.Context) error {
	tx, err := ib.core.DB().BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return ib.core.Wrap("migrate", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, migrationLockSQL, ib.Table()); err != nil {
		return ib.core.Wrap("migrate: wait for other instances' Migrate", err)
	}
	version, err := ib.recordedVersion(ctx, tx)
	if err != nil {
		return ib.core.Wrap("migrate: read the schema version", err)
	}
	if err := ib.core.CheckVersion(version, SchemaVersion); err != nil {
		return err
	}
	if version < SchemaVersion {
		// A table of that name the inbox did not make is refused before
		// any DDL touches it.
		if exists, err := ib.exists(ctx, tx, ib.Table()); err != nil {
			return ib.core.Wrap("migrate: look for the table", err)
		} else if exists {
			if err := ib.verify(ctx, tx); err != nil {
				return err
			}
		}
		for _, st := range (dialect{}).Schema(ib.Table()) {
			if _, err := tx.ExecContext(ctx, st); err != nil {
				return ib.core.Wrap("migrate to schema version "+strconv.Itoa(SchemaVersion), err)
			}
		}
	}
	if err := ib.verify(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return ib.core.Wrap("migrate: commit", err)
	}
	return nil
}

// migrationLockSQL takes the advisory lock that makes Migrates of one
// table take turns, until the transaction ends. The key is per database
// (advisory locks are) and table name.
const migrationLockSQL = "SELECT pg_advisory_xact_lock(hashtextextended('outboxrelay inbox ' || $1, 0))"

// recordedVersion reads the highest recorded schema version; 0 when
// there is no record.
func (ib *Inbox) recordedVersion(ctx context.Context, tx *sql.Tx) (int, error) {
	if exists, err := ib.exists(ctx, tx, ib.Table()+sqlinbox.SchemaVersionSuffix); err != nil || !exists {
		return 0, err
	}
	var v sql.NullInt64
	err := tx.QueryRowContext(ctx, "SELECT max(version) FROM "+quote(ib.Table()+sqlinbox.SchemaVersionSuffix)).Scan(&v)
	return int(v.Int64), err
}

// exists reports whether the search_path finds a table (or a view) of
// that name.
func (ib *Inbox) exists(ctx context.Context, tx *sql.Tx, table string) (bool, error) {
	var exists bool
	err := tx.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL", quote(table)).Scan(&exists)
	return exists, err
}

// verifySQL lists the columns of a table, with their types and whether
// they are the primary key's, in the key's order.
const verifySQL = `SELECT a.attname, format_type(a.atttypid, NULL),
       coalesce((SELECT k.n FROM pg_index i, unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
                  WHERE i.indrelid = a.attrelid AND i.indisprimary AND k.attnum = a.attnum), 0)
  FROM pg_attribute a
 WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`

// verify checks that the table has the columns the inbox needs, of the
// types it writes, and the primary key (consumer, msg_id) its ON
// CONFLICT names.
func (ib *Inbox) verify(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, verifySQL, quote(ib.Table()))
	if err != nil {
		return ib.core.Wrap("migrate: read the table's columns", err)
	}
	defer rows.Close()
	types, key := map[string]string{}, map[int]string{}
	for rows.Next() {
		var name, typ string
		var pos int
		if err := rows.Scan(&name, &typ, &pos); err != nil {
			return ib.core.Wrap("migrate: read the table's columns", err)
		}
		types[name] = typ
		if pos > 0 {
			key[pos] = name
		}
	}
	if err := rows.Err(); err != nil {
		return ib.core.Wrap("migrate: read the table's columns", err)
	}
	var missing []string
	for _, c := range slices.Sorted(maps.Keys(requiredColumns)) {
		switch typ, ok := types[c]; {
		case !ok:
			missing = append(missing, "column "+c)
		case typ != requiredColumns[c]:
			missing = append(missing, fmt.Sprintf("column %s of type %s (it is %s)", c, requiredColumns[c], typ))
		}
	}
	if len(missing) == 0 && (len(key) != 2 || key[1] != "consumer" || key[2] != "msg_id") {
		missing = append(missing, "primary key (consumer, msg_id)")
	}
	if len(missing) > 0 {
		return ib.core.NotInboxTable(missing)
	}
	return nil
}
