package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	_ "embed"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/inbox/internal/sqldialect"
	"github.com/outboxrelay/outboxrelay/inbox/sqlinbox"
)

// SchemaVersion is the version of the inbox schema this build makes and
// needs. The versions so far:
//
//	1  the inbox table: (consumer, msg_id) primary key, processed_at and
//	   idx_processed (consumer, processed_at)
//
// The table <table>_schema_version records the version reached.
const SchemaVersion = 1

// createSQL makes the current version from nothing, and records it. Its
// table name is written {table}, the version {version}.
//
//go:embed schema/create.sql
var createSQL string

// requiredColumns are the columns of the inbox table the inbox reads and
// writes.
var requiredColumns = []string{"consumer", "msg_id", "processed_at"}

func (dialect) Schema() (string, int) { return createSQL, SchemaVersion }

// migration is one Migrate on a connection of its own: MySQL commits
// each DDL statement as it runs, so there is no transaction to hold.
type migration struct {
	conn   *sql.Conn
	table  string
	locked bool
}

func (dialect) BeginMigration(ctx context.Context, db *sql.DB, table string) (sqldialect.Migration, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &migration{conn: conn, table: table}, nil
}

// migrationLockSQL takes the named lock that makes Migrates of one table
// take turns, waiting a second; the name is per database and table.
const migrationLockSQL = "SELECT GET_LOCK(CONCAT('outboxrelay_inbox_', LEFT(SHA1(CONCAT(DATABASE(), '.', ?)), 40)), 1)"

// migrationUnlockSQL releases the lock migrationLockSQL takes.
const migrationUnlockSQL = "DO RELEASE_LOCK(CONCAT('outboxrelay_inbox_', LEFT(SHA1(CONCAT(DATABASE(), '.', ?)), 40)))"

// Lock takes the migration lock on the connection, waiting while
// another instance migrates, until ctx is done.
func (m *migration) Lock(ctx context.Context) error {
	for {
		var got sql.NullInt64
		if err := m.conn.QueryRowContext(ctx, migrationLockSQL, m.table).Scan(&got); err != nil {
			return err
		}
		if got.Valid && got.Int64 == 1 {
			m.locked = true
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Version reads the highest recorded schema version; 0 when there is no
// record.
func (m *migration) Version(ctx context.Context) (int, error) {
	var v sql.NullInt64
	err := m.conn.QueryRowContext(ctx, "SELECT MAX(version) FROM "+quote(m.table+sqldialect.SchemaVersionSuffix)).Scan(&v)
	if (dialect{}).IsNoTable(err) {
		return 0, nil
	}
	return int(v.Int64), err
}

// Lacks checks that the table has the columns the inbox needs and the
// primary key (consumer, msg_id).
func (m *migration) Lacks(ctx context.Context) (exists bool, missing []string, err error) {
	rows, err := m.conn.QueryContext(ctx,
		"SELECT COLUMN_NAME, COLUMN_KEY FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", m.table)
	if err != nil {
		return false, nil, err
	}
	defer rows.Close()
	key := map[string]string{}
	for rows.Next() {
		var name, k string
		if err := rows.Scan(&name, &k); err != nil {
			return false, nil, err
		}
		key[strings.ToLower(name)] = k
	}
	if err := rows.Err(); err != nil {
		return false, nil, err
	}
	for _, c := range requiredColumns {
		if _, ok := key[c]; !ok {
			missing = append(missing, "column "+c)
		}
	}
	if len(missing) == 0 && (key["consumer"] != "PRI" || key["msg_id"] != "PRI") {
		missing = append(missing, "primary key (consumer, msg_id)")
	}
	return len(key) > 0, missing, nil
}

func (m *migration) Exec(ctx context.Context, statement string) error {
	_, err := m.conn.ExecContext(ctx, statement)
	return err
}

// Commit has nothing to do: every statement committed as it ran.
func (m *migration) Commit() error { return nil }

// Close gives the connection back to the pool with the migration lock
// released; when that fails, it is closed instead, which releases it.
func (m *migration) Close() {
	if m.locked {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := m.conn.ExecContext(ctx, migrationUnlockSQL, m.table); err != nil {
			// driver.ErrBadConn makes database/sql close the connection.
			_ = m.conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}
	_ = m.conn.Close()
}

// DefaultTable is the table name when Options.Table is empty:
// sqlinbox.DefaultTable.
const DefaultTable = sqlinbox.DefaultTable

// SchemaSQL returns the SQL that creates the inbox table named table at
// the current SchemaVersion, with its names filled in, for a migration
// tool (golang-migrate, goose, atlas) or a DBA to apply instead of
// Migrate. Migrate runs the same statements.
func SchemaSQL(table string) (string, error) {
	return sqlinbox.SchemaSQL(dialect{}, table)
}
