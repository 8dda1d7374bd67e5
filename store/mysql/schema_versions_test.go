package mysql_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// version1 is the outbox table as the first version of the store made
// it (commit 94186a2): no idx_key, no fanout, no companion tables. Every
// later version is made from it by oldSchema.
const version1 = `CREATE TABLE room_outbox (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  event_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  event_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  event_type VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  payload LONGBLOB NOT NULL,
  headers TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending',
  retry_count INT UNSIGNED NOT NULL DEFAULT 0,
  last_error VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  created_at DATETIME(6) NOT NULL,
  next_attempt_at DATETIME(6) NOT NULL,
  published_at DATETIME(6) NULL,
  lease_owner VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  lease_token CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
  PRIMARY KEY (id), UNIQUE KEY uk_event_id (event_id), KEY idx_due (status, next_attempt_at, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`

// oldSchema returns the DDL of schema version v (1 to SchemaVersion-1),
// without data: version1, then the upgrade statements of every version up
// to v as SchemaSQL prints them (the statements Migrate runs), without
// the record of the version, so that the tables are recognised by their
// columns and indexes as tables from before the record were. One fixture
// makes every version: what an upgrade file says is what its version's
// tables are.
func oldSchema(v int) []string {
	if v < 1 || v >= mysql.SchemaVersion {
		panic(fmt.Sprintf("oldSchema(%d): versions 1 to %d", v, mysql.SchemaVersion-1))
	}
	out := []string{version1}
	if v == 1 {
		return out
	}
	script, err := mysql.SchemaSQL(testTable, 1, v)
	if err != nil {
		panic(err)
	}
	for _, chunk := range strings.Split(script, ";\n") {
		var lines []string
		for _, line := range strings.Split(chunk, "\n") {
			if !strings.HasPrefix(line, "--") {
				lines = append(lines, line)
			}
		}
		if st := strings.TrimSpace(strings.Join(lines, "\n")); st != "" && !strings.Contains(st, "_schema_version") {
			out = append(out, st)
		}
	}
	return out
}

// oldRows fills tables of schema version v with a pending, a published
// and a dead record (and, from version 3, a consumer with a pending,
// published and dead consumption row).
func oldRows(v int) []string {
	published, publishedAt := ", published_at", ", NULL"
	if v >= 5 { // the publication time is next_attempt_at
		published, publishedAt = "", ""
	}
	out := []string{
		"INSERT INTO room_outbox (event_id, event_key, event_type, payload, headers, status, retry_count, last_error, created_at, next_attempt_at" + published + ") VALUES" +
			" ('pend', 'room-\té', 'T', x'00ff', '{\"a\":\"b\"}', 'pending', 1, 'boom', UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE, UTC_TIMESTAMP(6) - INTERVAL 1 SECOND" + publishedAt + ")," +
			" ('pub', 'k', 'T', 'p', NULL, 'published', 0, NULL, UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE, UTC_TIMESTAMP(6)" + strings.ReplaceAll(publishedAt, "NULL", "UTC_TIMESTAMP(6)") + ")," +
			" ('dead', 'k', 'T', 'p', NULL, 'dead', 5, 'gave up', UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE, UTC_TIMESTAMP(6)" + publishedAt + ")",
	}
	if v >= 3 {
		out = append(out,
			"UPDATE room_outbox SET fanout = 1",
			"INSERT INTO room_outbox_consumers (name, start_seq, created_at) VALUES ('activity', 1, UTC_TIMESTAMP(6))",
			"INSERT INTO room_outbox_consumption (consumer, msg_id, event_id, event_key, event_type, status, retry_count, created_at, next_attempt_at)"+
				" SELECT 'activity', id, event_id, event_key, event_type, status, retry_count, created_at, next_attempt_at FROM room_outbox")
	}
	return out
}

// snapshot is what the tables hold, one string per row, in a form that
// does not depend on the schema version: each message with its delivery
// state for the default consumer (status, attempts, last error, and when
// a pending one is due), and, where named consumers exist, each
// consumer's state of the messages handed to it, and the registry. Up to
// version 8 the state is in the outbox and consumption tables; from
// version 9 in the state rows and the consumers' positions (a message
// behind the position without a state row was published: snapshots are
// taken with no batch in flight).
func snapshot(t *testing.T, db *sql.DB) []string {
	t.Helper()
	has := func(table, column string) bool {
		var n int
		require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?", table, column).Scan(&n))
		return n > 0
	}
	const msg = "o.id, o.event_id, HEX(o.event_key), o.event_type, HEX(o.payload), COALESCE(o.headers, '-')"
	if !has("room_outbox", "status") {
		return rowStrings(t, db,
			"SELECT CONCAT_WS('|', "+msg+", COALESCE(s.status, 'published'), COALESCE(s.retry_count, 0), COALESCE(NULLIF(s.last_error, ''), '-'),"+
				" o.created_at, IF(s.status = 'pending', s.next_attempt_at, '-')) FROM room_outbox o"+
				" LEFT JOIN room_outbox_state s ON s.consumer_id = 0 AND s.id = o.id ORDER BY o.id",
			"SELECT CONCAT_WS('|', c.name, o.id, o.event_id, HEX(o.event_key), COALESCE(s.status, 'published'), COALESCE(s.retry_count, 0))"+
				" FROM room_outbox_consumers c JOIN room_outbox o ON o.id > c.start_seq"+
				" LEFT JOIN room_outbox_state s ON s.consumer_id = c.id AND s.id = o.id"+
				" WHERE c.id <> 0 AND (o.id <= c.walked OR s.id IS NOT NULL) ORDER BY c.name, o.id",
			"SELECT CONCAT_WS('|', name, start_seq + 1, '-', created_at) FROM room_outbox_consumers WHERE id <> 0 ORDER BY name")
	}
	queries := []string{
		"SELECT CONCAT_WS('|', " + msg + ", o.status, o.retry_count, COALESCE(o.last_error, '-'), o.created_at," +
			" IF(o.status = 'pending', o.next_attempt_at, '-')) FROM room_outbox o ORDER BY o.id",
	}
	if has("room_outbox_consumption", "msg_id") {
		queries = append(queries,
			"SELECT CONCAT_WS('|', consumer, msg_id, event_id, HEX(event_key), status, retry_count) FROM room_outbox_consumption ORDER BY consumer, msg_id",
			"SELECT CONCAT_WS('|', name, start_seq, COALESCE(backfill_cursor, '-'), created_at) FROM room_outbox_consumers ORDER BY name")
	}
	return rowStrings(t, db, queries...)
}

// rowStrings runs each query, which selects one string column, and
// returns every row's string, in order.
func rowStrings(t *testing.T, db *sql.DB, queries ...string) []string {
	t.Helper()
	var out []string
	for _, q := range queries {
		rows, err := db.Query(q)
		require.NoError(t, err)
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			out = append(out, s)
		}
		require.NoError(t, rows.Err())
		require.NoError(t, rows.Close())
	}
	return out
}

func execAll(t *testing.T, db *sql.DB, stmts []string) {
	t.Helper()
	for _, st := range stmts {
		_, err := db.Exec(st)
		require.NoError(t, err, st)
	}
}

// TestMigrateUpgradesEveryVersion: Migrate brings tables of every earlier
// schema version, with data in them, to the current one, records the
// version, loses nothing, and the pending records are then delivered.
func TestMigrateUpgradesEveryVersion(t *testing.T) {
	for v := 1; v < mysql.SchemaVersion; v++ {
		t.Run(fmt.Sprintf("from version %d", v), func(t *testing.T) {
			d := testutil.NewDatabase(t)
			ctx := context.Background()
			execAll(t, d.DB, oldSchema(v))
			execAll(t, d.DB, oldRows(v))
			before := snapshot(t, d.DB)
			s, err := mysql.New(d.DB, mysql.Options{Table: testTable})
			require.NoError(t, err)
			st, err := s.SchemaStatus(ctx)
			require.NoError(t, err)
			require.Equal(t, mysql.SchemaStatus{Version: v, Recorded: false, Pending: st.Pending}, st, "recognised by its columns and indexes")
			require.NotEmpty(t, st.Pending)

			require.NoError(t, s.Migrate(ctx))
			require.NoError(t, s.Verify(ctx))
			st, err = s.SchemaStatus(ctx)
			require.NoError(t, err)
			require.Equal(t, mysql.SchemaStatus{Version: mysql.SchemaVersion, Recorded: true}, st)
			after := snapshot(t, d.DB)
			require.Equal(t, before, after[:len(before)], "every row and field kept")

			b, err := s.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 10, LeaseFor: time.Minute})
			require.NoError(t, err)
			require.Equal(t, []string{"pend"}, recordIDs(b.Records), "the pending record is delivered; published and dead ones are not")
			require.Equal(t, "room-\té", b.Records[0].Key)
			require.Equal(t, []byte{0, 0xff}, b.Records[0].Payload)
			if v >= 3 {
				b, err := consumer(t, s, "activity").Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 10, LeaseFor: time.Minute})
				require.NoError(t, err)
				require.Equal(t, []string{"pend"}, recordIDs(b.Records), "the named consumer's pending record too")
			}
		})
	}
}

// TestMigrateRecordsTablesFromBeforeTheRecord: current tables made
// before the version record existed get it, and nothing else.
func TestMigrateRecordsTablesFromBeforeTheRecord(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	execAll(t, d.DB, []string{"DROP TABLE room_outbox_schema_version"})
	st, err := s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, mysql.SchemaVersion, st.Version)
	require.False(t, st.Recorded)
	require.Len(t, st.Pending, 2, "only the record: %q", st.Pending)
	require.NoError(t, s.Migrate(ctx))
	st, err = s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, mysql.SchemaStatus{Version: mysql.SchemaVersion, Recorded: true}, st)
}

// TestConcurrentMigratesFromVersion1: instances starting at once on
// version 1 tables all succeed, and the data is kept.
func TestConcurrentMigratesFromVersion1(t *testing.T) {
	d := testutil.NewDatabase(t)
	execAll(t, d.DB, oldSchema(1))
	execAll(t, d.DB, oldRows(1))
	before := snapshot(t, d.DB)
	const n = 3
	errs := make(chan error, n)
	for range n {
		s, err := mysql.New(d.Open(t), mysql.Options{Table: testTable})
		require.NoError(t, err)
		go func() { errs <- s.Migrate(context.Background()) }()
	}
	for range n {
		require.NoError(t, <-errs)
	}
	s := newStore(t, d.DB)
	require.NoError(t, s.Verify(context.Background()))
	require.Equal(t, before, snapshot(t, d.DB))
}

// TestVerifyNamesAPartialUpgrade: a DBA who added the fanout column but
// not its index is told exactly that, and the statement that adds it;
// Migrate finishes the upgrade.
func TestVerifyNamesAPartialUpgrade(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	execAll(t, d.DB, oldSchema(2))
	execAll(t, d.DB, []string{"ALTER TABLE room_outbox ADD COLUMN fanout TINYINT UNSIGNED NOT NULL DEFAULT 0"})
	s, err := mysql.New(d.DB, mysql.Options{Table: testTable})
	require.NoError(t, err)
	err = s.Verify(ctx)
	require.Error(t, err)
	t.Log(err)
	require.ErrorContains(t, err, "column fanout is there but index idx_fanout is missing")
	require.ErrorContains(t, err, "run Store.Migrate, or apply:\n\tALTER TABLE `room_outbox` ADD INDEX idx_fanout (fanout, id), ALGORITHM=INPLACE, LOCK=NONE;")
	require.NotContains(t, err.Error(), "not made by this store")
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Verify(ctx))
}

// TestMigrateWithoutDDLRights: a database user with only SELECT, INSERT,
// UPDATE and DELETE can Verify, and Migrate current tables (it runs no
// DDL on them); on tables that need an upgrade, both say what to run.
func TestMigrateWithoutDDLRights(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	require.NoError(t, newStore(t, d.DB).Verify(ctx))
	limited := limitedUser(t, d)
	s, err := mysql.New(limited, mysql.Options{Table: testTable})
	require.NoError(t, err)
	require.NoError(t, s.Verify(ctx))
	require.NoError(t, s.Migrate(ctx), "current tables: no DDL, no ALTER rights needed")
	require.NoError(t, s.Enqueue(ctx, limited, nil, outbox.Message{ID: "m1", Type: "T"}))

	execAll(t, d.DB, []string{"ALTER TABLE room_outbox DROP COLUMN writer_until"})
	err = s.Verify(ctx)
	require.ErrorContains(t, err, "column writer_until is missing")
	err = s.Migrate(ctx)
	require.ErrorContains(t, err, "column writer_until")
	require.ErrorContains(t, err, "ALTER TABLE `room_outbox` ADD COLUMN writer_until")
	require.ErrorContains(t, err, "denied")
}

// limitedUser creates a user with SELECT, INSERT, UPDATE and DELETE on
// d's database only, dropped when the test ends, and returns a pool
// connected as it.
func limitedUser(t *testing.T, d *testutil.Database) *sql.DB {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	user, pass := "app_"+hex.EncodeToString(b), hex.EncodeToString(b)+"Pw"
	execAll(t, d.DB, []string{
		fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, pass),
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON `%s`.* TO '%s'@'%%'", d.Name, user),
	})
	t.Cleanup(func() { _, _ = d.DB.Exec(fmt.Sprintf("DROP USER '%s'@'%%'", user)) })
	cfg, err := mysqldrv.ParseDSN(d.DSN)
	require.NoError(t, err)
	cfg.User, cfg.Passwd = user, pass
	return testutil.OpenDSN(t, cfg.FormatDSN())
}

// TestSchemaSQLMakesWhatMigrateMakes: the SQL SchemaSQL prints (and
// outboxctl schema with it), applied by hand, gives the tables Migrate
// gives: on an empty database, and from version 1.
func TestSchemaSQLMakesWhatMigrateMakes(t *testing.T) {
	for _, from := range []int{0, 1, 4, 5} {
		t.Run(fmt.Sprintf("from %d", from), func(t *testing.T) {
			byHand, byMigrate := testutil.NewDatabase(t), testutil.NewDatabase(t)
			if from > 0 {
				execAll(t, byHand.DB, oldSchema(from))
				execAll(t, byMigrate.DB, oldSchema(from))
			}
			script, err := mysql.SchemaSQL(testTable, from, mysql.SchemaVersion)
			require.NoError(t, err)
			cfg, err := mysqldrv.ParseDSN(byHand.DSN)
			require.NoError(t, err)
			cfg.MultiStatements = true
			_, err = testutil.OpenDSN(t, cfg.FormatDSN()).Exec(script)
			require.NoError(t, err)
			s, err := mysql.New(byMigrate.DB, mysql.Options{Table: testTable})
			require.NoError(t, err)
			require.NoError(t, s.Migrate(context.Background()))
			hand, migrated := describeTables(t, byHand.DB), describeTables(t, byMigrate.DB)
			require.NotEmpty(t, hand)
			require.Equal(t, migrated, hand)
			require.NoError(t, newStoreOn(t, byHand.DB).Verify(context.Background()))
		})
	}
}

// describeTables lists the columns and indexes of the database's tables,
// one string each, as information_schema has them.
func describeTables(t *testing.T, db *sql.DB) []string {
	t.Helper()
	out := rowStrings(t, db,
		"SELECT CONCAT_WS('|', TABLE_NAME, ORDINAL_POSITION, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COALESCE(COLUMN_DEFAULT, '-'),"+
			" COALESCE(CHARACTER_SET_NAME, '-'), COALESCE(COLLATION_NAME, '-'), EXTRA) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()",
		"SELECT CONCAT_WS('|', TABLE_NAME, INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()",
		"SELECT CONCAT_WS('|', TABLE_NAME, ENGINE, TABLE_COLLATION) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()",
	)
	slices.Sort(out)
	return out
}

// TestMigrateGivesUpOnALockedTable: an upgrade's ALTER waits at most
// LockWaitTimeout for its table's metadata lock, which any open
// transaction that touched the table holds, and fails with a lock wait
// timeout instead of queueing every later statement on the table behind
// it for the server's default wait (a year on MariaDB).
func TestMigrateGivesUpOnALockedTable(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	execAll(t, d.DB, oldSchema(2))
	blocker, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback() }()
	var n int
	require.NoError(t, blocker.QueryRowContext(ctx, "SELECT COUNT(*) FROM room_outbox").Scan(&n))

	s, err := mysql.New(d.Open(t), mysql.Options{Table: testTable})
	require.NoError(t, err)
	// The context is the test's safety net: without the session setting
	// the ALTER would wait until it ends, and the error would be the
	// context's, not the server's.
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = s.MigrateWith(runCtx, mysql.MigrateOptions{LockWaitTimeout: time.Second})
	require.Error(t, err)
	require.NoError(t, runCtx.Err(), "the server gave up, not the test's deadline")
	require.True(t, mysql.IsTransient(err), "a lock wait timeout, which a retry at the next start may pass: %v", err)
	require.ErrorContains(t, err, "Lock wait timeout")

	require.NoError(t, blocker.Rollback())
	require.NoError(t, s.MigrateWith(ctx, mysql.MigrateOptions{LockWaitTimeout: time.Second}), "once the transaction ends, it goes through")
}
