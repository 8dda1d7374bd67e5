package roomservice

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	drv "github.com/go-sql-driver/mysql"
)

// migrateRoomTables creates room-service's tables and brings an older
// room_commands up to date. It is idempotent, and safe when several
// instances start at once (an ALTER that another instance has just made
// is taken as done).
func migrateRoomTables(ctx context.Context, db *sql.DB) error {
	for _, ddl := range roomSchema {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("migrate room tables: %w", err)
		}
	}
	if err := upgradeRoomCommands(ctx, db); err != nil {
		return fmt.Errorf("migrate room tables: upgrade room_commands: %w", err)
	}
	return nil
}

// upgradeRoomCommands upgrades a room_commands created before the
// digest, the bounded response and retention (CREATE TABLE IF NOT EXISTS
// leaves an existing table as it is):
//
//  1. it adds command_digest. Old rows keep NULL there, and a repeat of
//     one of their IDs is compared by kind and room only, as it was when
//     they were written; they are gone after one commands.retention.
//  2. it rewrites the old responses, which held the room's whole member
//     list, into the bounded form (member_count instead of members), in
//     batches, and then changes response from MEDIUMTEXT to
//     VARBINARY(8192).
//  3. it adds the index on created_at_ms that retention deletes by.
//
// Step 2 rewrites every row once, so on a large log it takes a while; an
// operator may run PurgeCommands first to shrink it. Instances of the old
// version still running during a rolling upgrade cannot store a response
// over 8 KB (rooms of a few hundred members) and fail those commands with
// a 500 until they are replaced.
func upgradeRoomCommands(ctx context.Context, db *sql.DB) error {
	columns, err := tableColumns(ctx, db, "room_commands")
	if err != nil {
		return err
	}
	if _, ok := columns["command_digest"]; !ok {
		err := execIgnoring(ctx, db, "ALTER TABLE room_commands ADD COLUMN command_digest BINARY(32) NULL AFTER kind", errDupFieldName)
		if err != nil {
			return err
		}
	}
	if columns["response"] != "varbinary" {
		if err := boundOldResponses(ctx, db); err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, "ALTER TABLE room_commands MODIFY response VARBINARY(8192) NULL"); err != nil {
			return err
		}
	}
	var indexed int
	err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.STATISTICS"+
		" WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'room_commands' AND INDEX_NAME = 'room_commands_created_at'").Scan(&indexed)
	if err != nil || indexed > 0 {
		return err
	}
	return execIgnoring(ctx, db, "ALTER TABLE room_commands ADD INDEX room_commands_created_at (created_at_ms)", errDupKeyName)
}

// boundOldResponses replaces, in each old response, the room's member
// list by its length, 500 rows per statement.
func boundOldResponses(ctx context.Context, db *sql.DB) error {
	const batch = 500
	for {
		res, err := db.ExecContext(ctx, "UPDATE room_commands SET response ="+
			" JSON_REMOVE(JSON_SET(response, '$.room.member_count', JSON_LENGTH(response, '$.room.members')), '$.room.members')"+
			" WHERE JSON_CONTAINS_PATH(response, 'one', '$.room.members') LIMIT ?", batch)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n < batch {
			return err
		}
	}
}

// tableColumns maps a table's column names to their data types
// (lowercase, e.g. "mediumtext").
func tableColumns(ctx context.Context, db *sql.DB, table string) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS"+
		" WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, err
		}
		out[strings.ToLower(name)] = strings.ToLower(typ)
	}
	return out, rows.Err()
}

// MySQL's errors for a column or an index that exists already: another
// instance made the same ALTER first.
const (
	errDupFieldName = 1060
	errDupKeyName   = 1061
)

func execIgnoring(ctx context.Context, db *sql.DB, stmt string, code uint16) error {
	_, err := db.ExecContext(ctx, stmt)
	var me *drv.MySQLError
	if errors.As(err, &me) && me.Number == code {
		return nil
	}
	return err
}
