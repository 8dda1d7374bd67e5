package main

import (
	"context"
	"database/sql"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// The commands read and repair an outbox through the operator contract
// (backend.Outbox) and the retention and schema checks below; this file
// is the only one that knows which store implements them (schema.go,
// which prints and runs a store's DDL, is the other place that names the
// store).

// outboxStore is what the commands need of a store.
type outboxStore interface {
	backend.Outbox
	backend.Purger
	// Verify checks that the tables have what the store needs, changing
	// nothing.
	Verify(ctx context.Context) error
	// CountPurgeable counts what PurgePublished would delete.
	CountPurgeable(ctx context.Context, olderThan time.Duration) (int, error)
	// PurgeAll deletes everything PurgePublished would, in batches.
	PurgeAll(ctx context.Context, olderThan time.Duration, batch int, pause time.Duration) (int, error)
	// Migrate creates the tables or brings them to the store's schema
	// version (migrate).
	Migrate(ctx context.Context) error
}

// defaultTable is --table's default: the stores'.
const defaultTable = mysql.DefaultTable

// tableList is the tables of a database, for errors that name the right
// one.
type tableList struct {
	// all holds every table's name.
	all []string
	// outboxes holds those that look like outbox tables: they have the
	// event_id and payload columns, and status (MySQL schema versions up
	// to 8) or writer_until (from 9), or xid (PostgreSQL); a companion
	// table has at most two of them, an inbox table none.
	outboxes []string
}

// listTables lists the tables of the database, sorted.
func (c *cli) listTables(ctx context.Context) (tableList, error) {
	return c.driver.listTables(ctx, c.db)
}

// queryTables runs a driver's listing: query returns a table's name and
// how many of the columns event_id, status and payload it has.
func queryTables(ctx context.Context, db *sql.DB, query string) (tableList, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return tableList{}, err
	}
	defer rows.Close()
	var l tableList
	for rows.Next() {
		var (
			name    string
			outboxy int
		)
		if err := rows.Scan(&name, &outboxy); err != nil {
			return tableList{}, err
		}
		l.all = append(l.all, name)
		if outboxy == 3 {
			l.outboxes = append(l.outboxes, name)
		}
	}
	return l, rows.Err()
}
