package postgres

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"maps"
	"slices"

	"github.com/outboxrelay/outboxrelay/inbox/internal/sqldialect"
	"github.com/outboxrelay/outboxrelay/inbox/sqlinbox"
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
// table name is written {table}, the version {version}.
//
//go:embed schema/create.sql
var createSQL string

// requiredColumns are the columns of the inbox table the inbox reads and
// writes, with their types.
var requiredColumns = map[string]string{"consumer": "text", "msg_id": "bytea", "processed_at": "timestamp with time zone"}

func (dialect) Schema() (string, int) { return createSQL, SchemaVersion }

// migration is one Migrate in one transaction, DDL and all.
type migration struct {
	tx    *sql.Tx
	table string
}

func (dialect) BeginMigration(ctx context.Context, db *sql.DB, table string) (sqldialect.Migration, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	return &migration{tx: tx, table: table}, nil
}

// migrationLockSQL takes the advisory lock that makes Migrates of one
// table take turns, until the transaction ends. The key is per database
// (advisory locks are) and table name.
const migrationLockSQL = "SELECT pg_advisory_xact_lock(hashtextextended('outboxrelay inbox ' || $1, 0))"

func (m *migration) Lock(ctx context.Context) error {
	_, err := m.tx.ExecContext(ctx, migrationLockSQL, m.table)
	return err
}

// Version reads the highest recorded schema version; 0 when there is no
// record.
func (m *migration) Version(ctx context.Context) (int, error) {
	versions := quote(m.table + sqldialect.SchemaVersionSuffix)
	var exists bool
	if err := m.tx.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL", versions).Scan(&exists); err != nil || !exists {
		return 0, err
	}
	var v sql.NullInt64
	err := m.tx.QueryRowContext(ctx, "SELECT max(version) FROM "+versions).Scan(&v)
	return int(v.Int64), err
}

// verifySQL lists the columns of a table, with their types and whether
// they are the primary key's, in the key's order.
const verifySQL = `SELECT a.attname, format_type(a.atttypid, NULL),
       coalesce((SELECT k.n FROM pg_index i, unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
                  WHERE i.indrelid = a.attrelid AND i.indisprimary AND k.attnum = a.attnum), 0)
  FROM pg_attribute a
 WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`

// Lacks checks that the table has the columns the inbox needs, of the
// types it writes, and the primary key (consumer, msg_id) its ON
// CONFLICT names. A table the search_path does not find has no columns.
func (m *migration) Lacks(ctx context.Context) (exists bool, missing []string, err error) {
	rows, err := m.tx.QueryContext(ctx, verifySQL, quote(m.table))
	if err != nil {
		return false, nil, err
	}
	defer rows.Close()
	types, key := map[string]string{}, map[int]string{}
	for rows.Next() {
		var name, typ string
		var pos int
		if err := rows.Scan(&name, &typ, &pos); err != nil {
			return false, nil, err
		}
		types[name] = typ
		if pos > 0 {
			key[pos] = name
		}
	}
	if err := rows.Err(); err != nil {
		return false, nil, err
	}
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
	return len(types) > 0, missing, nil
}

func (m *migration) Exec(ctx context.Context, statement string) error {
	_, err := m.tx.ExecContext(ctx, statement)
	return err
}

func (m *migration) Commit() error { return m.tx.Commit() }

// Close rolls back what Commit did not keep, which releases the lock.
func (m *migration) Close() { _ = m.tx.Rollback() }

// DefaultTable is the table name when Options.Table is empty:
// sqlinbox.DefaultTable.
const DefaultTable = sqlinbox.DefaultTable

// SchemaSQL returns the SQL that creates the inbox table named table at
// the current SchemaVersion, with its names filled in, for a migration
// tool (golang-migrate, goose, atlas) or a DBA to apply instead of
// Migrate. Migrate runs the same statements, in one transaction.
func SchemaSQL(table string) (string, error) {
	return sqlinbox.SchemaSQL(dialect{}, table)
}
