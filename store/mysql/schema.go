package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/internal/mysqlerr"
)

// consumersTable and consumptionTable name the companion tables of an
// outbox table (MaxTableLength leaves room for the suffixes).
func consumersTable(table string) string   { return table + consumersSuffix }
func consumptionTable(table string) string { return table + consumptionSuffix }
func rangesTable(table string) string      { return table + rangesSuffix }
func stateTable(table string) string       { return table + stateSuffix }
func gapsTable(table string) string        { return table + gapsSuffix }

const (
	consumersSuffix   = "_consumers"
	consumptionSuffix = "_consumption" // schema version 8's, dropped by the upgrade to 9
	rangesSuffix      = "_ranges"
	stateSuffix       = "_state"
	gapsSuffix        = "_gaps"
)

// requiredColumns are the columns the store reads and writes, per table
// (by its suffix: "" for the outbox table itself), with the data types the
// store depends on ("" for any).
var requiredColumns = map[string]map[string]string{
	"": {
		"id": "", "event_id": "", "event_key": "varbinary", "event_type": "", "payload": "", "headers": "",
		"occurred_at": "", "created_at": "", "writer_token": "bigint", "writer_until": "datetime",
	},
	consumersSuffix: {"id": "", "name": "", "walked": "", "start_seq": "", "held": "varbinary", "created_at": "", "removing": "", "add_token": ""},
	rangesSuffix:    {"consumer_id": "", "token": "bigint", "from_id": "", "to_id": "", "n": "", "owner": "", "claimed_at": "", "lease_until": ""},
	stateSuffix: {
		"consumer_id": "", "id": "", "event_key": "varbinary", "status": "enum", "retry_count": "", "last_error": "",
		"next_attempt_at": "", "lease_token": "bigint", "finished_at": "",
	},
	gapsSuffix: {"consumer_id": "", "lo": "", "hi": "", "seen_at": "", "passed_at": ""},
}

// requiredIndexes are the indexes the store's queries rely on, per table.
var requiredIndexes = map[string][]string{
	"":              {"uk_event_id"},
	consumersSuffix: {"uk_name"},
	stateSuffix:     {"idx_due", "idx_key", "idx_finished", "idx_id"},
}

// companions are the suffixes of the companion tables the store reads and
// writes, and the ones earlier versions had (consumption, until 9).
var (
	companions    = []string{consumersSuffix, rangesSuffix, stateSuffix, gapsSuffix}
	allSuffixes   = []string{"", consumersSuffix, rangesSuffix, stateSuffix, gapsSuffix, consumptionSuffix}
	suffixOfTable = map[string]string{
		"outbox": "", "consumers": consumersSuffix, "consumption": consumptionSuffix,
		"ranges": rangesSuffix, "state": stateSuffix, "gaps": gapsSuffix,
	}
)

// DefaultLockWaitTimeout is MigrateOptions.LockWaitTimeout's default.
const DefaultLockWaitTimeout = 10 * time.Second

// MigrateOptions configures MigrateWith. The zero value means all
// defaults.
type MigrateOptions struct {
	// LockWaitTimeout bounds how long each DDL statement waits for the
	// metadata lock of its table (the session's lock_wait_timeout, in
	// whole seconds, rounded up). While an ALTER waits for that lock,
	// every other statement on the table queues behind it, so a short wait
	// that fails is better than a long one that stalls the application.
	// Defaults to DefaultLockWaitTimeout (10s).
	LockWaitTimeout time.Duration
	// BatchSize bounds the rows each statement of an upgrade's data step
	// (an UPDATE that copies values to where the new version keeps them)
	// changes: the step walks the primary key in ranges of BatchSize
	// rows, each its own short transaction, so that claims, settles and
	// inserts wait at most one batch for it. Defaults to
	// DefaultMigrateBatch (1000); at most MaxMigrateBatch.
	BatchSize int
}

func (o MigrateOptions) withDefaults() MigrateOptions {
	if o.LockWaitTimeout == 0 {
		o.LockWaitTimeout = DefaultLockWaitTimeout
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultMigrateBatch
	}
	return o
}

func (o MigrateOptions) validate() error {
	var errs []error
	if o.LockWaitTimeout < 0 || o.LockWaitTimeout > 365*24*time.Hour {
		errs = append(errs, fmt.Errorf("mysql store: LockWaitTimeout %v: must be 1s to 8760h (0 for the default)", o.LockWaitTimeout))
	}
	if o.BatchSize < 0 || o.BatchSize > MaxMigrateBatch {
		errs = append(errs, fmt.Errorf("mysql store: BatchSize %d: must be 1 to %d (0 for the default)", o.BatchSize, MaxMigrateBatch))
	}
	return errors.Join(errs...)
}

// Migrate is MigrateWith with the default MigrateOptions.
func (s *Store) Migrate(ctx context.Context) error {
	return s.MigrateWith(ctx, MigrateOptions{})
}

// MigrateWith creates the outbox table and its companion tables if they
// do not exist, upgrades tables made by any earlier schema version (see
// SchemaVersion) to the current one, records the version in the table
// <table>_schema_version, and checks that the tables have the columns and
// indexes the store needs. It runs the statements of SchemaSQL.
//
// It is idempotent and safe to run from several instances at start-up:
// they take turns on a named lock (GET_LOCK), and a column or index
// another instance added meanwhile counts as added. When the tables are
// already current it runs no DDL, so a database user without CREATE and
// ALTER rights may call it; Verify checks without ever changing anything.
//
// Each DDL statement waits at most opts.LockWaitTimeout for its table's
// metadata lock, and asks for the cheapest algorithm: ALGORITHM=INSTANT
// to add a column, INPLACE with LOCK=NONE to add an index (falling back
// when the server refuses). Changing event_key's type (the upgrade to
// version 4) and status's (to versions 5 and 6; from version 4, once)
// copies the table and blocks writes to it meanwhile. Upgrades run one
// version at a time, and keep the leases records hold.
//
// A table of the same name that the store did not make fails with an
// error naming what it lacks.
func (s *Store) MigrateWith(ctx context.Context, opts MigrateOptions) error {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.wrap("migrate", err)
	}
	clean := true
	defer func() { closeSession(conn, s.table, clean) }()
	if err := s.lockMigration(ctx, conn); err != nil {
		return err
	}
	clean = false // the lock, and the setting below, are undone by closeSession
	secs := int64(math.Ceil(opts.LockWaitTimeout.Seconds()))
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", secs)); err != nil {
		return s.wrap("migrate: set lock_wait_timeout", err)
	}
	return s.migrate(ctx, conn, opts)
}

// migrate runs the plan for the tables, on conn: the upgrade steps one
// version at a time, reading the tables again after each version (a
// version's steps may build on the previous one's: see pending), then
// the CREATE statements or the record of the version.
func (s *Store) migrate(ctx context.Context, conn *sql.Conn, opts MigrateOptions) error {
	reached := 0
	for {
		sc, err := s.readSchema(ctx, conn)
		if err != nil {
			return s.wrap("migrate", err)
		}
		if sc.exists("") {
			if missing := sc.missing(true); len(missing) > 0 {
				return s.notOurs("migrate", sc, missing)
			}
		}
		plan := sc.plan(s.table)
		i := slices.IndexFunc(plan, func(p planned) bool { return p.step != nil })
		if i < 0 {
			return s.finish(ctx, conn, plan, reached > 0)
		}
		v := plan[i].version
		if v <= reached {
			return fmt.Errorf("mysql store: migrate to schema version %d: the tables still need %s after the version's steps ran", v, plan[i].describe(sc, s.table))
		}
		for _, p := range plan[i:] {
			if p.step == nil || p.version != v {
				break
			}
			if err := s.runStep(ctx, conn, sc, p, opts); err != nil {
				return err
			}
		}
		reached = v
	}
}

// runStep runs one upgrade step: a data step in batches (runBatched), a
// DDL statement at once.
func (s *Store) runStep(ctx context.Context, conn *sql.Conn, sc schema, p planned, opts MigrateOptions) error {
	var err error
	if p.ddl == cutOverMarker {
		return s.cutOver(ctx, conn) // its errors say what it is
	}
	if isDataStep(p.ddl) {
		err = runBatched(ctx, conn, p.ddl, batchKeyOf(s.table, p.step.suffix), opts.BatchSize)
	} else {
		err = execDDL(ctx, conn, p.ddl)
	}
	// Another instance may have run the same step (with a version of the
	// store that does not take the migration lock).
	if err == nil || mysqlerr.Classify(err) == mysqlerr.DuplicateIndex || mysqlerr.Classify(err) == mysqlerr.DuplicateColumn {
		return nil
	}
	return s.wrap(fmt.Sprintf("migrate to schema version %d: %s (%s)", p.version, p.describe(sc, s.table), printable(p.ddl)), err)
}

// lastTypeChange is u, or, when u changes a column's type, the last
// upgrade's change of that column's type.
func lastTypeChange(u step) step {
	if u.typ != "" {
		for _, later := range upgrades {
			if later.version > u.version && later.suffix == u.suffix && later.what == u.what {
				u = later
			}
		}
	}
	return u
}

// finish runs what is left of the plan once no upgrade step is: the
// CREATE statements and the record of the version, then checks the
// tables. ranDDL says whether upgrade steps ran before.
func (s *Store) finish(ctx context.Context, conn *sql.Conn, plan []planned, ranDDL bool) error {
	for _, p := range plan {
		if p.record && !ranDDL {
			// Only the record is missing (tables made before it existed):
			// a user without CREATE rights has what it needs anyway.
			if _, err := conn.ExecContext(ctx, p.ddl); err != nil && !isAccessDenied(err) {
				return s.wrap("migrate: record the schema version", err)
			}
			continue
		}
		ranDDL = true
		if err := execDDL(ctx, conn, p.ddl); err != nil {
			what := "create the tables"
			if p.record {
				what = "record the schema version"
			}
			return s.wrap(fmt.Sprintf("migrate to schema version %d: %s (%s)", p.version, what, p.ddl), err)
		}
	}
	sc, err := s.readSchema(ctx, conn)
	if err != nil {
		return s.wrap("migrate", err)
	}
	if missing := sc.missing(false); len(missing) > 0 {
		return s.notOurs("migrate", sc, missing)
	}
	return nil
}

// planned is one statement Migrate runs: an upgrade step, a CREATE of the
// current version, or the record of the version.
type planned struct {
	ddl     string // names filled in
	version int
	step    *step // nil for a CREATE or the record
	record  bool
}

func (p planned) describe(sc schema, table string) string {
	if p.step == nil {
		return "create the tables"
	}
	return sc.describe(*p.step, table)
}

// plan lists what Migrate runs on tables as sc says they are: the CREATE
// statements of the current version when there is no outbox table, the
// upgrade steps they lack otherwise, then the record of the version.
func (sc schema) plan(table string) []planned {
	names := schemaNames(table)
	var out []planned
	if !sc.exists("") {
		for _, st := range createStatements {
			out = append(out, planned{ddl: names.Replace(st), version: SchemaVersion})
		}
	}
	retyped := map[step]bool{}
	for _, u := range sc.pending() {
		u := u
		if u.typ != "" {
			// A change of a column's type runs the last pending version's
			// change of that column instead, and that one is then done: a
			// table from before both is copied once, not once per version
			// (the steps between them do not depend on the type).
			last := lastTypeChange(u)
			if retyped[last] {
				continue
			}
			retyped[last] = true
			u.ddl, u.typ = last.ddl, last.typ
		}
		out = append(out, planned{ddl: names.Replace(u.ddl), version: u.version, step: &u})
	}
	if sc.recorded < SchemaVersion {
		for _, st := range recordSQL(SchemaVersion) {
			out = append(out, planned{ddl: names.Replace(st), version: SchemaVersion, record: true})
		}
	}
	return out
}

// execDDL runs a DDL statement, asking first for the algorithm it is
// written with and, when the server refuses it (an older server, or a
// table it cannot change that way), for the next cheaper one: INSTANT,
// then INPLACE with LOCK=NONE, then whatever the server chooses.
func execDDL(ctx context.Context, conn *sql.Conn, ddl string) error {
	const instant, inplace = ", ALGORITHM=INSTANT", ", ALGORITHM=INPLACE, LOCK=NONE"
	for {
		_, err := conn.ExecContext(ctx, ddl)
		if err == nil || !isAlgorithmRefused(err) {
			return err
		}
		switch {
		case strings.HasSuffix(ddl, instant):
			ddl = strings.TrimSuffix(ddl, instant) + inplace
		case strings.HasSuffix(ddl, inplace):
			ddl = strings.TrimSuffix(ddl, inplace)
		default:
			return err
		}
	}
}

// isAlgorithmRefused reports the server's "ALGORITHM=… is not supported"
// error.
func isAlgorithmRefused(err error) bool { return mysqlerr.Classify(err) == mysqlerr.AlgorithmRefused }

// isAccessDenied reports a statement the user has no right to run.
func isAccessDenied(err error) bool { return mysqlerr.Classify(err) == mysqlerr.AccessDenied }

// migrationLockSQL takes the named lock that makes Migrates of one table
// take turns, waiting a second; the name is per database and table, and
// short enough for MySQL's 64-character limit.
const migrationLockSQL = "SELECT GET_LOCK(CONCAT('outboxrelay_migrate_', LEFT(SHA1(CONCAT(DATABASE(), '.', ?)), 40)), 1)"

// migrationUnlockSQL releases the lock migrationLockSQL takes.
const migrationUnlockSQL = "DO RELEASE_LOCK(CONCAT('outboxrelay_migrate_', LEFT(SHA1(CONCAT(DATABASE(), '.', ?)), 40)))"

// lockMigration takes the migration lock on conn, waiting while another
// instance migrates, until ctx is done.
func (s *Store) lockMigration(ctx context.Context, conn *sql.Conn) error {
	for {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, migrationLockSQL, s.table).Scan(&got); err != nil {
			return s.wrap("migrate: wait for other instances' Migrate", err)
		}
		if got.Valid && got.Int64 == 1 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return s.wrap("migrate: wait for other instances' Migrate", err)
		}
	}
}

// closeSession gives conn back to the pool with the migration lock
// released and lock_wait_timeout back to the server's default; when
// that fails (or clean says there is nothing to undo), it is closed
// instead, which undoes both.
func closeSession(conn *sql.Conn, table string, clean bool) {
	if !clean {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout = DEFAULT")
		if err == nil {
			_, err = conn.ExecContext(ctx, migrationUnlockSQL, table)
		}
		if err != nil {
			// driver.ErrBadConn makes database/sql close the connection.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}
	_ = conn.Close()
}
