package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"fmt"
	"hash/fnv"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// SchemaVersion is the schema version this build creates and needs.
const SchemaVersion = 3

//go:embed schema/*.sql
var schemaFiles embed.FS

// schemaStep returns the SQL of version v (1: create; later ones
// upgrade from the one before), for table.
func schemaStep(table string, v int) (string, error) {
	names, err := schemaFiles.ReadDir("schema")
	if err != nil {
		return "", err
	}
	for _, n := range names {
		if strings.HasPrefix(n.Name(), strconv.Itoa(v)+"_") {
			b, err := schemaFiles.ReadFile("schema/" + n.Name())
			if err != nil {
				return "", err
			}
			return renderSchema(table, string(b)), nil
		}
	}
	return "", fmt.Errorf("postgres store: no schema version %d", v)
}

func renderSchema(table, sqlText string) string {
	t := defaultTarget(table)
	return strings.NewReplacer(
		"{outbox}", t.outbox, "{consumers}", t.consumers, "{consumption}", quote(table+"_consumption"), "{prefix}", table,
		"{state}", quote(table+"_state"), "{ranges}", quote(table+"_ranges"), "{horizon}", horizonSQL,
	).Replace(sqlText)
}

// SchemaSQL returns the DDL that takes table's tables from schema
// version from (0: none) to version to, for migration tools
// (outboxctl schema --driver postgres prints it). Each version's
// statements end with a COMMENT ON TABLE that records the version, which
// Migrate and Verify read.
func SchemaSQL(table string, from, to int) (string, error) {
	if _, err := (Options{Table: table}).checked(); err != nil {
		return "", err
	}
	if from < 0 || to > SchemaVersion || from >= to {
		return "", fmt.Errorf("postgres store: schema from version %d to %d: this build knows versions 1 to %d", from, to, SchemaVersion)
	}
	var b strings.Builder
	for v := from + 1; v <= to; v++ {
		step, err := schemaStep(table, v)
		if err != nil {
			return "", err
		}
		if v > from+1 {
			b.WriteString("\n")
		}
		b.WriteString(step)
	}
	return b.String(), nil
}

// Schema returns the DDL of the store's tables at SchemaVersion.
func (s *Store) Schema() string {
	text, err := SchemaSQL(s.opts.Table, 0, SchemaVersion)
	if err != nil {
		panic(err) // the options were validated by New
	}
	return text
}

var versionRE = regexp.MustCompile(`schema version (\d+)`)

// schemaVersion reads the version of the table (0: no table).
func schemaVersion(ctx context.Context, q querier, table string) (int, error) {
	var comment sql.NullString
	var exists bool
	err := q.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL, obj_description(to_regclass($1), 'pg_class')", quote(table)).Scan(&exists, &comment)
	if err != nil || !exists {
		return 0, err
	}
	m := versionRE.FindStringSubmatch(comment.String)
	if m == nil {
		return 0, fmt.Errorf("table %q exists but is not an outboxrelay outbox of this store (its comment is %q)", table, comment.String)
	}
	return strconv.Atoi(m[1])
}

// lockKey is the advisory lock key of table's migrations.
func lockKey(table string) int64 {
	h := fnv.New64a()
	h.Write([]byte("outboxrelay/store/postgres migrate " + table))
	return int64(h.Sum64())
}

// Migrate creates the tables, or upgrades them to SchemaVersion, one
// version per transaction. It holds a session advisory lock
// (pg_advisory_lock) on the table's name meanwhile, so that processes
// starting at once migrate one after the other: it is safe to call from
// every instance at start-up. A database whose schema is newer than this
// build fails with an error.
func (s *Store) Migrate(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.wrap("migrate", err)
	}
	defer conn.Close()
	key := lockKey(s.opts.Table)
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		return s.wrap("migrate: advisory lock", err)
	}
	defer func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", key); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // drop the session: it may hold the lock
		}
	}()
	v, err := schemaVersion(ctx, conn, s.opts.Table)
	if err != nil {
		return s.wrap("migrate", err)
	}
	if v > SchemaVersion {
		return fmt.Errorf("postgres store: migrate: table %q is at schema version %d, newer than this build's %d", s.opts.Table, v, SchemaVersion)
	}
	for next := v + 1; next <= SchemaVersion; next++ {
		step, err := schemaStep(s.opts.Table, next)
		if err != nil {
			return err
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return s.wrap("migrate", err)
		}
		if next == 3 && v > 0 {
			if err := s.quiesceOldBuild(ctx, tx); err != nil {
				_ = tx.Rollback()
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, step); err != nil {
			_ = tx.Rollback()
			return s.wrap(fmt.Sprintf("migrate to version %d", next), err)
		}
		if err := tx.Commit(); err != nil {
			return s.wrap(fmt.Sprintf("migrate to version %d", next), err)
		}
	}
	return nil
}

// requiredColumns are the columns the store reads and writes, per table
// suffix, with their types.
var requiredColumns = map[string]map[string]string{
	"": {
		"seq": "bigint", "event_id": "text", "event_key": "bytea", "event_type": "bytea", "payload": "bytea", "headers": "jsonb",
		"occurred_at": "timestamp with time zone", "xid": "xid8", "created_at": "timestamp with time zone",
		"writer_token": "bigint", "writer_until": "timestamp with time zone",
	},
	"_consumers": {
		"id": "integer", "name": "text", "start_seq": "bigint", "walked_xid": "xid8", "walked_seq": "bigint", "held": "bigint[]",
		"created_at": "timestamp with time zone", "removing": "boolean",
	},
	"_state": {
		"consumer_id": "integer", "seq": "bigint", "event_key": "bytea", "status": "text", "retry_count": "integer",
		"last_error": "text", "next_attempt_at": "timestamp with time zone", "lease_token": "bigint", "finished_at": "timestamp with time zone",
	},
	"_ranges": {
		"consumer_id": "integer", "token": "bigint", "from_xid": "xid8", "from_seq": "bigint", "to_xid": "xid8", "to_seq": "bigint", "n": "integer",
		"owner": "text", "claimed_at": "timestamp with time zone", "lease_until": "timestamp with time zone",
	},
}

// requiredIndexes are the indexes the store's queries rely on (their
// names, after the table's name).
var requiredIndexes = map[string][]string{
	"":       {"_event_id", "_xid", "_key_xid", "_created"},
	"_state": {"_s_due", "_s_key", "_s_finished", "_s_seq"},
}

// Verify checks, changing nothing, that the tables are at SchemaVersion
// and have the columns (with their types) and indexes the store needs.
// Its error lists every problem.
func (s *Store) Verify(ctx context.Context) error {
	v, err := schemaVersion(ctx, s.db, s.opts.Table)
	if err != nil {
		return s.wrap("verify", err)
	}
	if v != SchemaVersion {
		return fmt.Errorf("postgres store: verify: table %q is at schema version %d, this build needs %d (run Store.Migrate)", s.opts.Table, v, SchemaVersion)
	}
	var problems []string
	suffixes := make([]string, 0, len(requiredColumns))
	for suffix := range requiredColumns {
		suffixes = append(suffixes, suffix)
	}
	sort.Strings(suffixes)
	for _, suffix := range suffixes {
		table := s.opts.Table + suffix
		have := map[string]string{}
		rows, err := s.db.QueryContext(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, quote(table))
		if err != nil {
			return s.wrap("verify", err)
		}
		for rows.Next() {
			var name, typ string
			if err := rows.Scan(&name, &typ); err != nil {
				rows.Close()
				return s.wrap("verify", err)
			}
			have[name] = typ
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return s.wrap("verify", err)
		}
		if len(have) == 0 {
			problems = append(problems, fmt.Sprintf("table %q does not exist", table))
			continue
		}
		cols := make([]string, 0, len(requiredColumns[suffix]))
		for c := range requiredColumns[suffix] {
			cols = append(cols, c)
		}
		sort.Strings(cols)
		for _, c := range cols {
			want := requiredColumns[suffix][c]
			switch got, ok := have[c]; {
			case !ok:
				problems = append(problems, fmt.Sprintf("table %q has no column %s", table, c))
			case got != want:
				problems = append(problems, fmt.Sprintf("column %s.%s is %s, want %s", table, c, got, want))
			}
		}
		if idx := requiredIndexes[suffix]; len(idx) > 0 {
			present := map[string]bool{}
			rows, err := s.db.QueryContext(ctx, `SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = to_regclass($1) AND i.indisvalid`, quote(table))
			if err != nil {
				return s.wrap("verify", err)
			}
			for rows.Next() {
				var name string
				if err := rows.Scan(&name); err != nil {
					rows.Close()
					return s.wrap("verify", err)
				}
				present[name] = true
			}
			rows.Close()
			for _, name := range idx {
				if !present[s.opts.Table+name] {
					problems = append(problems, fmt.Sprintf("table %q has no valid index %s", table, s.opts.Table+name))
				}
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("postgres store: verify: %s", strings.Join(problems, "; "))
	}
	return nil
}

// quiesceOldBuild starts the upgrade to schema version 3 in tx: it
// takes the tables an older build writes (EXCLUSIVE: reads go on, writes
// wait), so that every writer and worker of that build in flight has
// ended before the upgrade reads their state and none starts until it has
// committed; then it refuses while a worker of that build holds a lease:
// it would settle into columns the upgrade drops, and its messages would
// be delivered again. Stop the workers of the older build first (or wait
// until their leases run out).
func (s *Store) quiesceOldBuild(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, renderSchema(s.opts.Table, `LOCK TABLE {outbox}, {consumption} IN EXCLUSIVE MODE`)); err != nil {
		return s.wrap("migrate to version 3", err)
	}
	return s.noLiveLeases(ctx, tx)
}

func (s *Store) noLiveLeases(ctx context.Context, q querier) error {
	var n int
	err := q.QueryRowContext(ctx, renderSchema(s.opts.Table, `SELECT
	(SELECT count(*) FROM {outbox} WHERE status = 'pending' AND lease_token > 0 AND next_attempt_at > statement_timestamp())
	+ (SELECT count(*) FROM {consumption} WHERE status = 'pending' AND lease_token > 0 AND next_attempt_at > statement_timestamp())`)).Scan(&n)
	if err != nil {
		return s.wrap("migrate to version 3", err)
	}
	if n > 0 {
		return fmt.Errorf("postgres store: migrate to version 3: workers of an older build hold %d leases; stop them (or wait until the leases run out) and migrate again", n)
	}
	return nil
}
