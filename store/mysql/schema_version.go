package mysql

import (
	"embed"
	"fmt"
	"strconv"
	"strings"
)

// SchemaVersion is the version of the schema this build of the store
// makes and needs. The versions so far:
//
//	1  the outbox table (uk_event_id, idx_due)
//	2  idx_key, for ordered claims
//	3  named consumers: the fanout column and idx_fanout, and the
//	   companion tables <table>_consumers and <table>_consumption
//	4  binary keys (event_key VARBINARY(1020) in the outbox and
//	   consumption tables), occurred_at, and the removing and add_token
//	   columns of <table>_consumers
//	5  state columns rewritten in place: status CHAR(9), the lease token
//	   in the fixed-width NOT NULL column lease (lease_token stays, NULL),
//	   no lease_owner, and no published_at (a published record's
//	   next_attempt_at is when it was published)
//	6  narrower state columns: status an ENUM, the lease token a BIGINT
//	   in lease_id (lease stays, no longer written)
//	7  idx_head (key_state, event_key, id) instead of idx_key: an
//	   outcome no longer moves the record in an index of ordered claims
//	   (key_state, which only ordered claims write)
//	8  idx_status_key (status, event_key, id) instead of idx_head, and
//	   no key_state: ordered claims read only pending records whatever
//	   the history; the vestigial lease and lease_token columns go
//	9  the outbox as a log read past a position per consumer
//	   (LOG-DESIGN.md): the companion tables <table>_ranges,
//	   <table>_state and <table>_gaps; the writer's head start in
//	   writer_token and writer_until; no delivery state in the outbox
//	   table, no <table>_consumption
//
// Migrate upgrades a table from any of them; the table <table>_schema_version
// records the version reached (a table made before the record existed is
// recognised by its columns and indexes).
const SchemaVersion = 9

// The DDL of the schema, as SQL files: create.sql makes the current version
// from nothing, upgrade_N.sql goes from version N-1 to N, and record.sql
// records a version. Table names are written {outbox}, {consumers},
// {consumption} and {schema_version} (see schemaNames).
//
//go:embed schema/*.sql
var schemaFiles embed.FS

// step is one statement of an upgrade: it adds a column or an index,
// changes a column's type, copies a column's values to where the store
// keeps them now, drops a column, or creates a companion table. It is
// needed while the table lacks what it adds, or has what it drops (a
// copy: while the columns its version drops are there).
type step struct {
	version int
	suffix  string // the table: "" for the outbox table, or a companion's suffix
	what    string // "column x", "index x", "type of x", "copy of x", "no column x" or "table"
	ddl     string // with {outbox}, {consumers} or {consumption}
	typ     string // for "type of x": the data type it gives x, lower case ("char")
}

// modifiedType is the data type an "ALTER TABLE … MODIFY x TYPE…"
// statement gives x, lower case, without its length or values.
func modifiedType(ddl string) string {
	_, after, ok := strings.Cut(ddl, " MODIFY ")
	if !ok {
		return ""
	}
	fields := strings.Fields(after)
	if len(fields) < 2 {
		return ""
	}
	typ, _, _ := strings.Cut(fields[1], "(")
	return strings.ToLower(typ)
}

// The parsed SQL files.
var (
	createStatements []string // create.sql
	recordStatements []string // record.sql, with {version}
	upgrades         []step   // every upgrade_N.sql, in order
)

func init() {
	createStatements = statementsOf(mustRead("create.sql"), nil)
	recordStatements = statementsOf(mustRead("record.sql"), nil)
	for v := 2; v <= SchemaVersion; v++ {
		var steps []step
		statementsOf(mustRead(fmt.Sprintf("upgrade_%d.sql", v)), func(stepLine, ddl string) {
			table, what, _ := strings.Cut(stepLine, " ")
			suffix, ok := suffixOfTable[table]
			if !ok || what == "" {
				panic(fmt.Sprintf("mysql store: upgrade_%d.sql: bad step line %q", v, stepLine))
			}
			u := step{version: v, suffix: suffix, what: what, ddl: ddl}
			if strings.HasPrefix(what, "type of ") {
				if u.typ = modifiedType(ddl); u.typ == "" {
					panic(fmt.Sprintf("mysql store: upgrade_%d.sql: step %q is not a MODIFY", v, stepLine))
				}
			}
			steps = append(steps, u)
		})
		if len(steps) == 0 {
			panic(fmt.Sprintf("mysql store: upgrade_%d.sql has no steps", v))
		}
		upgrades = append(upgrades, steps...)
	}
}

func mustRead(name string) string {
	b, err := schemaFiles.ReadFile("schema/" + name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// statementsOf splits a SQL file into its statements (each ends with ";"
// at the end of a line), without their comment lines. For a statement
// under a "-- step: " line, it calls onStep with the rest of that line.
func statementsOf(file string, onStep func(stepLine, ddl string)) []string {
	var out []string
	for _, chunk := range strings.Split(file, ";\n") {
		var stepLine string
		var lines []string
		for _, line := range strings.Split(chunk, "\n") {
			switch {
			case strings.HasPrefix(line, "-- step: "):
				stepLine = strings.TrimPrefix(line, "-- step: ")
			case strings.HasPrefix(line, "--"):
			default:
				lines = append(lines, line)
			}
		}
		ddl := strings.TrimSpace(strings.Join(lines, "\n"))
		if ddl == "" {
			continue
		}
		out = append(out, ddl)
		if stepLine != "" && onStep != nil {
			onStep(stepLine, ddl)
		}
	}
	return out
}

// schemaNames fills in the table names of the schema's SQL, quoted.
func schemaNames(table string) *strings.Replacer {
	q := func(name string) string { return "`" + name + "`" }
	return strings.NewReplacer(
		"{outbox}", q(table),
		"{consumers}", q(consumersTable(table)),
		"{consumption}", q(consumptionTable(table)),
		"{ranges}", q(rangesTable(table)),
		"{state}", q(stateTable(table)),
		"{gaps}", q(gapsTable(table)),
		"{schema_version}", q(schemaVersionTable(table)),
	)
}

// schemaVersionTable names the table that records the schema version of
// the outbox table.
func schemaVersionTable(table string) string { return table + schemaVersionSuffix }

const schemaVersionSuffix = "_schema_version"

// recordSQL is record.sql for version v.
func recordSQL(v int) []string {
	out := make([]string, len(recordStatements))
	for i, st := range recordStatements {
		out[i] = strings.ReplaceAll(st, "{version}", strconv.Itoa(v))
	}
	return out
}

// dataStepNote is the comment SchemaSQL puts before a data step, saying
// how Migrate runs it.
func dataStepNote(ddl string) string {
	if !isDataStep(ddl) {
		return ""
	}
	return "-- A data step. Migrate runs it in batches of the primary key (with\n" +
		"-- AND id > ? AND id <= ?, or consumer = ? AND msg_id > ? AND msg_id <= ?,\n" +
		"-- 1000 rows by default), each its own READ COMMITTED transaction, so\n" +
		"-- that writers wait at most one batch. On a large table, do the same.\n"
}

// SchemaSQL returns the SQL that brings the outbox table named table, with
// its companion tables, from schema version from to version to, with the
// table names filled in, for a migration tool (golang-migrate, goose,
// atlas) or a DBA to apply instead of Migrate. from 0 means an empty
// database: the CREATE statements of the current version, and to must be
// SchemaVersion. Otherwise the result is the upgrade statements of each
// version after from up to to, ending with the statements that record
// the version reached. Migrate runs the same statements.
func SchemaSQL(table string, from, to int) (string, error) {
	if _, err := (Options{Table: table}).checked(); err != nil {
		return "", err
	}
	switch {
	case to < 1 || to > SchemaVersion:
		return "", fmt.Errorf("mysql store: schema version %d: this build knows versions 1 to %d", to, SchemaVersion)
	case from < 0 || from > to:
		return "", fmt.Errorf("mysql store: from version %d: must be 0 (an empty database) to %d", from, to)
	case from == 0 && to != SchemaVersion:
		return "", fmt.Errorf("mysql store: to version %d: an empty database can only be given the current version, %d", to, SchemaVersion)
	}
	names := schemaNames(table)
	var b strings.Builder
	add := func(comment string, stmts []string) {
		fmt.Fprintf(&b, "-- %s\n", comment)
		for _, st := range stmts {
			fmt.Fprintf(&b, "%s;\n\n", names.Replace(st))
		}
	}
	if from == 0 {
		add(fmt.Sprintf("outboxrelay schema version %d for table %s: a fresh install.", SchemaVersion, table), createStatements)
	}
	for v := max(from, 1) + 1; v <= to && from > 0; v++ {
		var stmts []string
		for _, u := range upgrades {
			if u.version == v {
				stmts = append(stmts, dataStepNote(u.ddl)+printable(u.ddl))
			}
		}
		add(fmt.Sprintf("From schema version %d to %d.", v-1, v), stmts)
	}
	add(fmt.Sprintf("Record schema version %d.", to), recordSQL(to))
	return strings.TrimSuffix(b.String(), "\n"), nil
}
