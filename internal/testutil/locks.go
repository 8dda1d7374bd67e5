package testutil

import (
	"context"
	"database/sql"
	"strings"
)

// LockWaits counts the transactions that wait for a lock on a table of
// database dbName, as SHOW ENGINE INNODB STATUS reports them. Tests use
// it to let go of a lock at the moment another transaction waits for it.
//
// It does not read information_schema.INNODB_TRX: the server refreshes
// that table's cache only once nobody has read it for 100ms, so a process
// that polls it (another test binary on a shared server, say) keeps it
// stale for every reader, and waiters never show. The status report is
// made afresh for each call, and MariaDB lists there the locking reads it
// leaves out of INNODB_TRX.
func LockWaits(ctx context.Context, db *sql.DB, dbName string) (int, error) {
	var typ, name, status string
	if err := db.QueryRowContext(ctx, "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		return 0, err
	}
	n := 0
	for _, waiting := range strings.Split(status, "TRX HAS BEEN WAITING")[1:] {
		// The next lines name the lock: "... of table `db`.`table` ...".
		if strings.Contains(waiting[:min(len(waiting), 600)], "`"+dbName+"`.") {
			n++
		}
	}
	return n, nil
}
