package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	_ "embed"
	"strconv"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/inbox/internal/sqlinbox"
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
// table names are written {inbox} and {schema_version}, the version
// {version}.
//
//go:embed schema/create.sql
var createSQL string

// requiredColumns are the columns of the inbox table the inbox reads and
// writes.
var requiredColumns = []string{"consumer", "msg_id", "processed_at"}

// SchemaSQL returns the SQL that creates the inbox table named table at
// the current SchemaVersion, with its names filled in, for a migration
// tool (golang-migrate, goose, atlas) or a DBA to apply instead of
// Migrate. Migrate runs the same statements.
func SchemaSQL(table string) (string, error) {
	return sqlinbox.SchemaSQL(dialect{}, table)
}

// Schema is the statements of create.sql, without comments, with the
// names of table filled in.
func (dialect) Schema(table string) []string {
	return sqlinbox.SplitSchema(createSQL, strings.NewReplacer(
		"{inbox}", quote(table),
		"{schema_version}", quote(table+sqlinbox.SchemaVersionSuffix),
		"{version}", strconv.Itoa(SchemaVersion),
	))
}

// Migrate creates the inbox table and <table>_schema_version if they do
// not exist, records the schema version, and checks that the table has
// the columns the inbox needs. It is idempotent and safe to run from
// several instances at start-up: they take turns on a named lock
// (GET_LOCK). When the table is already current it runs no DDL, so a
// database user without CREATE rights may call it. A table of the same
// name that the inbox did not make fails with an error naming what it
// lacks; one recorded at a newer schema version than this build knows
// fails too.
func (ib *Inbox) Migrate(ctx context.Context) error {
	conn, err := ib.core.DB().Conn(ctx)
	if err != nil {
		return ib.core.Wrap("migrate", err)
	}
	locked := false
	defer func() { ib.closeSession(conn, locked) }()
	if err := ib.lockMigration(ctx, conn); err != nil {
		return err
	}
	locked = true
	version, err := ib.recordedVersion(ctx, conn)
	if err != nil {
		return ib.core.Wrap("migrate: read the schema version", err)
	}
	if err := ib.core.CheckVersion(version, SchemaVersion); err != nil {
		return err
	}
	if version < SchemaVersion {
		for _, st := range (dialect{}).Schema(ib.Table()) {
			if _, err := conn.ExecContext(ctx, st); err != nil {
				return ib.core.Wrap("migrate to schema version "+strconv.Itoa(SchemaVersion), err)
			}
		}
	}
	return ib.verify(ctx, conn)
}

// recordedVersion reads the highest recorded schema version; 0 when
// there is no record.
func (ib *Inbox) recordedVersion(ctx context.Context, conn *sql.Conn) (int, error) {
	var v sql.NullInt64
	err := conn.QueryRowContext(ctx, "SELECT MAX(version) FROM "+quote(ib.Table()+sqlinbox.SchemaVersionSuffix)).Scan(&v)
	if (dialect{}).IsNoTable(err) {
		return 0, nil
	}
	return int(v.Int64), err
}

// verify checks that the table has the columns the inbox needs and the
// primary key (consumer, msg_id).
func (ib *Inbox) verify(ctx context.Context, conn *sql.Conn) error {
	rows, err := conn.QueryContext(ctx,
		"SELECT COLUMN_NAME, COLUMN_KEY FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", ib.Table())
	if err != nil {
		return ib.core.Wrap("migrate: read the table's columns", err)
	}
	defer rows.Close()
	key := map[string]string{}
	for rows.Next() {
		var name, k string
		if err := rows.Scan(&name, &k); err != nil {
			return ib.core.Wrap("migrate: read the table's columns", err)
		}
		key[strings.ToLower(name)] = k
	}
	if err := rows.Err(); err != nil {
		return ib.core.Wrap("migrate: read the table's columns", err)
	}
	var missing []string
	for _, c := range requiredColumns {
		if _, ok := key[c]; !ok {
			missing = append(missing, "column "+c)
		}
	}
	if len(missing) == 0 && (key["consumer"] != "PRI" || key["msg_id"] != "PRI") {
		missing = append(missing, "primary key (consumer, msg_id)")
	}
	if len(missing) > 0 {
		return ib.core.NotInboxTable(missing)
	}
	return nil
}

// migrationLockSQL takes the named lock that makes Migrates of one table
// take turns, waiting a second; the name is per database and table.
const migrationLockSQL = "SELECT GET_LOCK(CONCAT('outboxrelay_inbox_', LEFT(SHA1(CONCAT(DATABASE(), '.', ?)), 40)), 1)"

// migrationUnlockSQL releases the lock migrationLockSQL takes.
const migrationUnlockSQL = "DO RELEASE_LOCK(CONCAT('outboxrelay_inbox_', LEFT(SHA1(CONCAT(DATABASE(), '.', ?)), 40)))"

// lockMigration takes the migration lock on conn, waiting while another
// instance migrates, until ctx is done.
func (ib *Inbox) lockMigration(ctx context.Context, conn *sql.Conn) error {
	for {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, migrationLockSQL, ib.Table()).Scan(&got); err != nil {
			return ib.core.Wrap("migrate: wait for other instances' Migrate", err)
		}
		if got.Valid && got.Int64 == 1 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return ib.core.Wrap("migrate: wait for other instances' Migrate", err)
		}
	}
}

// closeSession gives conn back to the pool with the migration lock
// released; when that fails, it is closed instead, which releases it.
func (ib *Inbox) closeSession(conn *sql.Conn, locked bool) {
	if locked {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := conn.ExecContext(ctx, migrationUnlockSQL, ib.Table()); err != nil {
			// driver.ErrBadConn makes database/sql close the connection.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}
	_ = conn.Close()
}
