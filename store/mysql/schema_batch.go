package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Defaults and bounds of MigrateOptions.BatchSize.
const (
	DefaultMigrateBatch = 1000
	MaxMigrateBatch     = 100_000
)

// batchMarker stands, in the WHERE clause of an upgrade's data step (an
// UPDATE that copies values: a "copy of x" step), for the range of
// primary keys one batch updates. Migrate fills it in per batch
// (runBatched); printed for a person or a migration tool, the statement
// reads without it (printable).
const batchMarker = "{batch}"

// printable is ddl as a person or a migration tool runs it: a data step
// over the whole table, without the batch marker. (SchemaSQL says how
// Migrate batches it.)
func printable(ddl string) string {
	if ddl == cutOverMarker {
		return cutOverText
	}
	return strings.Replace(ddl, " WHERE "+batchMarker+" AND ", " WHERE ", 1)
}

// isDataStep reports whether ddl is a data step Migrate runs in batches.
func isDataStep(ddl string) bool { return strings.Contains(ddl, batchMarker) }

// batchKey is how runBatched walks a table's primary key: by id in the
// outbox table, by msg_id within each consumer in the consumption table.
type batchKey struct {
	table    string // quoted
	column   string
	grouping string // a first primary key column whose values are walked one by one, or ""
}

func batchKeyOf(table, suffix string) batchKey {
	if suffix == consumptionSuffix {
		return batchKey{table: "`" + table + suffix + "`", column: "msg_id", grouping: "consumer"}
	}
	return batchKey{table: "`" + table + suffix + "`", column: "id"}
}

// runBatched runs the data step ddl in batches of at most size rows of
// the table k names, in primary key order, each batch its own short READ
// COMMITTED transaction: it locks only the rows of its range that it
// changes, takes no gap locks (a writer inserting at the end of the
// table never waits for it), and holds them for one batch only, so
// claims, settles and inserts wait at most one batch (issue 28: one
// UPDATE over 200,000 rows under REPEATABLE READ held every row it read,
// and the end of the table, for 5.7 s). A batch the server rolled back as
// a deadlock victim is run again: a data step is idempotent.
func runBatched(ctx context.Context, conn *sql.Conn, ddl string, k batchKey, size int) error {
	groups := []any{nil}
	if k.grouping != "" {
		var err error
		if groups, err = distinct(ctx, conn, k); err != nil {
			return err
		}
	}
	for _, g := range groups {
		if err := runBatchedGroup(ctx, conn, ddl, k, g, size); err != nil {
			return err
		}
	}
	return nil
}

// runBatchedGroup runs the batches of one value of k's grouping column
// (g; nil for a table without one).
func runBatchedGroup(ctx context.Context, conn *sql.Conn, ddl string, k batchKey, g any, size int) error {
	prefix, prefixArgs := "", []any{}
	if g != nil {
		prefix, prefixArgs = k.grouping+" = ? AND ", []any{g}
	}
	stmt := strings.Replace(ddl, batchMarker, prefix+k.column+" > ? AND "+k.column+" <= ?", 1)
	nextBound := fmt.Sprintf("SELECT %[2]s FROM %[1]s WHERE %[3]s%[2]s > ? ORDER BY %[2]s LIMIT 1 OFFSET ?", k.table, k.column, prefix)
	lastBound := fmt.Sprintf("SELECT MAX(%[2]s) FROM %[1]s WHERE %[3]s%[2]s > ?", k.table, k.column, prefix)
	var lo uint64
	for {
		var hi sql.NullInt64
		err := conn.QueryRowContext(ctx, nextBound, append(prefixArgs, lo, size-1)...).Scan(&hi)
		last := err == sql.ErrNoRows
		if last {
			err = conn.QueryRowContext(ctx, lastBound, append(prefixArgs, lo)...).Scan(&hi)
		}
		if err != nil {
			return err
		}
		if !hi.Valid {
			return nil // nothing after lo
		}
		args := append(append([]any{}, prefixArgs...), lo, hi.Int64)
		err = retryRolledBack(ctx, func() error {
			tx, err := conn.BeginTx(ctx, readCommitted)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			if _, err := tx.ExecContext(ctx, stmt, args...); err != nil {
				return err
			}
			return tx.Commit()
		})
		if err != nil || last {
			return err
		}
		lo = uint64(hi.Int64)
	}
}

// distinct lists the values of k's grouping column.
func distinct(ctx context.Context, conn *sql.Conn, k batchKey) ([]any, error) {
	values, err := column[string](ctx, conn, statement{text: fmt.Sprintf("SELECT DISTINCT %s FROM %s ORDER BY %[1]s", k.grouping, k.table)})
	return anyArgs(values), err
}
