package mysql

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/outboxrelay/outboxrelay/internal/mysqlerr"
)

// Verify checks that the tables exist and have the columns and indexes
// the store needs, without creating or changing anything (Migrate does
// that), so an application whose database user has no CREATE or ALTER
// rights can check its schema at start-up. Tools call it first, so that
// a wrong table name fails with a clear error. The error says what is
// missing and the statements that would add it.
//
// A table at a newer schema version than this build knows passes, as long
// as it has what this build needs.
func (s *Store) Verify(ctx context.Context) error {
	sc, err := s.readSchema(ctx, s.db)
	if err != nil {
		return s.wrap("verify", err)
	}
	if !sc.exists("") {
		if sc.otherCase != "" {
			return fmt.Errorf("mysql store: table %q does not exist in this database; %q does, and table names are case-sensitive on this server (lower_case_table_names = 0): check the name", s.table, sc.otherCase)
		}
		return fmt.Errorf("mysql store: table %q does not exist in this database (run Store.Migrate, or apply the SQL of: outboxctl schema --table %s)", s.table, s.table)
	}
	if missing := sc.missing(true); len(missing) > 0 {
		return s.notOurs("verify", sc, missing)
	}
	if pending := sc.pending(); len(pending) > 0 {
		return fmt.Errorf("mysql store: verify: %s", sc.lacks(s.table, pending))
	}
	if missing := sc.missing(false); len(missing) > 0 {
		return s.notOurs("verify", sc, missing)
	}
	return nil
}

// SchemaStatus is what SchemaStatus found.
type SchemaStatus struct {
	// Version is the schema version of the tables: the one recorded in
	// <table>_schema_version, or, for tables made before the record
	// existed, the one their columns and indexes match. 0 when the outbox
	// table does not exist.
	Version int
	// Recorded says whether Version is the recorded one.
	Recorded bool
	// Pending are the statements Migrate would run, in order, with the
	// table names filled in. (A data step, an UPDATE that copies values,
	// is shown whole; Migrate runs it in batches: see
	// MigrateOptions.BatchSize.)
	Pending []string
}

// SchemaStatus reports the schema version of the tables and what Migrate
// would do to them, without changing anything.
func (s *Store) SchemaStatus(ctx context.Context) (SchemaStatus, error) {
	sc, err := s.readSchema(ctx, s.db)
	if err != nil {
		return SchemaStatus{}, s.wrap("schema status", err)
	}
	st := SchemaStatus{Version: sc.recorded, Recorded: sc.recorded > 0}
	if !st.Recorded && sc.exists("") {
		st.Version = SchemaVersion
		if pending := sc.pending(); len(pending) > 0 {
			st.Version = pending[0].version - 1
		}
	}
	if sc.exists("") {
		if missing := sc.missing(true); len(missing) > 0 {
			return st, s.notOurs("schema status", sc, missing)
		}
	}
	for _, p := range sc.plan(s.table) {
		st.Pending = append(st.Pending, printable(p.ddl))
	}
	return st, nil
}

// tableSchema is what information_schema says about one table.
type tableSchema struct {
	columns map[string]string // name → data type, lower case
	indexes map[string]bool
}

// schema is the outbox table's and its companions', by suffix, and the
// version recorded for them (0: none).
type schema struct {
	tables   map[string]tableSchema
	recorded int
	// otherCase is an outbox table whose name differs from the store's
	// only in case, on a server where that makes it another table.
	otherCase string
}

func (sc schema) exists(suffix string) bool { return len(sc.tables[suffix].columns) > 0 }

// needs reports whether the step has yet to run on a table that exists
// (a step on a table that does not exist yet is pending if the step that
// creates the table is: see pending).
func (sc schema) needs(u step) bool {
	ts := sc.tables[u.suffix]
	if u.what == "table" {
		return !sc.exists(u.suffix) && !sc.droppedLater(u)
	}
	if !sc.exists(u.suffix) {
		return false
	}
	kind, name, _ := strings.Cut(u.what, " ")
	switch kind {
	case "index":
		return !ts.indexes[name] && !sc.droppedLater(u)
	case "column":
		_, ok := ts.columns[name]
		return !ok && !sc.droppedLater(u)
	case "no": // "no column x", "no index x" or "no table": one the store no longer has
		if name == "table" {
			return true // exists, checked above
		}
		if idx, ok := strings.CutPrefix(name, "index "); ok {
			return ts.indexes[idx]
		}
		_, ok := ts.columns[strings.TrimPrefix(name, "column ")]
		return ok
	case "copy": // "copy of x": x's values, copied to a column the same version adds, or kept elsewhere before it drops a column
		// Idempotent, and run whenever its version is: it is needed while
		// x is there (version leaves it out of the tables' version).
		_, ok := ts.columns[strings.TrimPrefix(name, "of ")]
		return ok
	default: // "type of x": needed while x has a type from before u's version
		have, ok := ts.columns[strings.TrimPrefix(name, "of ")]
		return ok && !slices.ContainsFunc(upgrades, func(later step) bool {
			return later.version >= u.version && later.suffix == u.suffix && later.what == u.what && later.typ == have
		})
	}
}

// droppedLater reports whether u adds a column or an index that a later
// version drops, and the tables have reached that version: they lack it
// because they are past it (version 7 replaced idx_key, which version 2
// added, with idx_head; version 8 dropped idx_head and key_state, which
// version 7 added).
func (sc schema) droppedLater(u step) bool {
	for _, d := range upgrades {
		if d.version > u.version && d.suffix == u.suffix && d.what == "no "+u.what {
			return sc.reached(d.version)
		}
	}
	return false
}

// reached reports whether the tables have been upgraded to version v, in
// full or in part: one of its steps that add a column or an index has
// run. (Every version adds one: see version. A version's steps add before
// they drop, so a table that has lost what v drops has what it adds, or
// some of it: an upgrade by hand that stopped half way, which the
// version's remaining steps finish.)
func (sc schema) reached(v int) bool {
	return slices.ContainsFunc(upgrades, func(a step) bool {
		return a.version == v && (strings.HasPrefix(a.what, "column ") || strings.HasPrefix(a.what, "index ")) && sc.exists(a.suffix) && !sc.needs(a)
	})
}

// version is the schema version the tables' columns and indexes match:
// the version before the first one with a step they need, a data step
// (a copy) aside: its version's other steps tell whether it ran. Every version
// adds a column, an index or a type that it keeps, so that tables of an
// earlier version need a step of each later version. (A column or an
// index that a later version drops is needed only by tables that have
// not reached that version: see droppedLater.)
func (sc schema) version() int {
	for _, u := range upgrades {
		if !strings.HasPrefix(u.what, "copy of ") && sc.needs(u) {
			return u.version - 1
		}
	}
	return SchemaVersion
}

// pending lists the upgrade steps the tables need, in order: those of
// the first version they have not reached that they lack (with every step
// on a companion table that version creates: it is created as it was at
// that version), then every step of the later versions. Only the first
// version's can be told from the tables as they are: a later version's
// steps build on the earlier ones' (a column added by one is copied and
// dropped by the next), so Migrate runs one version at a time and reads
// the tables again after each.
func (sc schema) pending() []step {
	if !sc.exists("") {
		return nil // the CREATE statements make the current version
	}
	if sc.recorded > SchemaVersion {
		// A newer build upgraded the tables: an older one never changes
		// them back (it would, say, give a column the type of its own
		// version). They do or do not have what this build needs.
		return nil
	}
	next := sc.version() + 1
	created := map[string]bool{}
	var out []step
	for _, u := range upgrades {
		if u.what == "table" && u.version == next && sc.needs(u) {
			created[u.suffix] = true
		}
		if u.version > next || u.version == next && (created[u.suffix] || sc.needs(u)) {
			out = append(out, u)
		}
	}
	return out
}

// describe names what a step adds, as "column x", "index x", "type of x
// (varchar, not varbinary)" or "the companion table consumers", followed
// for a companion table by " of the companion table consumers".
func (sc schema) describe(u step, table string) string {
	what := u.what
	if what == "table" {
		return "the companion table " + u.suffix[1:]
	}
	if col, ok := strings.CutPrefix(what, "no column "); ok {
		what = "the removal of column " + col
	}
	if idx, ok := strings.CutPrefix(what, "no index "); ok {
		what = "the removal of index " + idx
	}
	if col, ok := strings.CutPrefix(what, "copy of "); ok {
		what = "the copy of the values of " + col
	}
	if col, ok := strings.CutPrefix(what, "type of "); ok {
		if have, ok := sc.tables[u.suffix].columns[col]; ok && have != u.typ {
			what = fmt.Sprintf("%s (%s, not %s)", what, have, u.typ)
		}
	}
	if u.suffix != "" {
		what += " of the companion table " + u.suffix[1:]
	}
	return what
}

// lacks says what the pending steps add, and how to add it. When some of
// the steps of the first version to reach are done and others are not (a
// partial upgrade), it says which are there and which are missing, on
// the same table where it can.
func (sc schema) lacks(table string, pending []step) string {
	first := pending[0].version
	isPending := func(u step) bool { return slices.Contains(pending, u) }
	// The tables of the first version that are part way: some of their
	// steps done, some not.
	partWay := func(suffix string) bool {
		return slices.ContainsFunc(upgrades, func(u step) bool { return u.version == first && u.suffix == suffix && !isPending(u) }) &&
			slices.ContainsFunc(pending, func(u step) bool { return u.version == first && u.suffix == suffix && u.what != "table" })
	}
	near := func(u step) bool { return u.version == first && partWay(u.suffix) }
	if !slices.ContainsFunc(upgrades, near) {
		// Done steps on other tables of the version, if any.
		near = func(u step) bool { return u.version == first }
	}
	var done, missing, rest []string
	for _, u := range upgrades {
		switch {
		case near(u) && !isPending(u):
			done = append(done, sc.describe(u, table))
		case near(u):
			missing = append(missing, sc.describe(u, table))
		case isPending(u):
			rest = append(rest, sc.describe(u, table))
		}
	}
	var b strings.Builder
	if len(done) > 0 {
		fmt.Fprintf(&b, "table %q is part way through the upgrade to schema version %d: %s %s there but %s %s missing",
			table, first, strings.Join(done, ", "), isAre(done), strings.Join(missing, ", "), isAre(missing))
		if len(rest) > 0 {
			fmt.Fprintf(&b, "; it also lacks %s", strings.Join(rest, ", "))
		}
	} else {
		fmt.Fprintf(&b, "table %q is at schema version %d and this store needs version %d: it lacks %s",
			table, first-1, SchemaVersion, strings.Join(append(missing, rest...), ", "))
	}
	b.WriteString(": run Store.Migrate, or apply:\n")
	names := schemaNames(table)
	for _, u := range pending {
		fmt.Fprintf(&b, "\t%s;\n", names.Replace(printable(u.ddl)))
	}
	fmt.Fprintf(&b, "and record version %d (outboxctl schema --table %s --from %d --to %d prints the statements)", SchemaVersion, table, SchemaVersion, SchemaVersion)
	return b.String()
}

func isAre(list []string) string {
	if len(list) == 1 {
		return "is"
	}
	return "are"
}

// missing lists what the tables lack, as "column x of t", "index x of t"
// or "type of x of t". With beforeUpgrades, it leaves out what an upgrade
// step adds, and a companion table that does not exist yet.
func (sc schema) missing(beforeUpgrades bool) []string {
	var out []string
	for _, suffix := range append([]string{""}, companions...) {
		ts := sc.tables[suffix]
		if beforeUpgrades && suffix != "" && !sc.exists(suffix) {
			continue
		}
		upgraded := func(what string) bool {
			return beforeUpgrades && slices.ContainsFunc(upgrades, func(u step) bool { return u.suffix == suffix && u.what == what })
		}
		var lacks []string
		for col, typ := range requiredColumns[suffix] {
			have, ok := ts.columns[col]
			switch {
			case !ok && !upgraded("column "+col):
				lacks = append(lacks, "column "+col)
			case ok && typ != "" && have != typ && !upgraded("type of "+col):
				lacks = append(lacks, fmt.Sprintf("type of %s (%s, not %s)", col, have, typ))
			}
		}
		for _, idx := range requiredIndexes[suffix] {
			if !ts.indexes[idx] && !upgraded("index "+idx) {
				lacks = append(lacks, "index "+idx)
			}
		}
		slices.Sort(lacks)
		if suffix != "" {
			for i := range lacks {
				lacks[i] += " of the companion table " + suffix[1:]
			}
		}
		out = append(out, lacks...)
	}
	return out
}

// readSchema reads the columns and indexes of the outbox table and its
// companions, and the recorded schema version.
//
// information_schema matches table names without regard to case, but a
// server with lower_case_table_names 0 (the default on Linux) keeps
// orders_outbox and ORDERS_OUTBOX apart: the rows of a table whose name
// the server would not take for one of ours are left out.
func (s *Store) readSchema(ctx context.Context, q querier) (schema, error) {
	sc := schema{tables: map[string]tableSchema{}}
	for _, suffix := range allSuffixes {
		sc.tables[suffix] = tableSchema{columns: map[string]string{}, indexes: map[string]bool{}}
	}
	var lowerCaseNames int
	if err := q.QueryRowContext(ctx, "SELECT @@lower_case_table_names").Scan(&lowerCaseNames); err != nil {
		return sc, err
	}
	of := func(table string) (tableSchema, bool) {
		for suffix, ts := range sc.tables {
			name := s.table + suffix
			if table == name || lowerCaseNames != 0 && strings.EqualFold(table, name) {
				return ts, true
			}
		}
		if strings.EqualFold(table, s.table) && (sc.otherCase == "" || table < sc.otherCase) {
			sc.otherCase = table
		}
		return tableSchema{}, false
	}
	err := scanTriples(ctx, q, columnsSQL(s.t, s.table), func(table, column, typ string) {
		if ts, ok := of(table); ok {
			ts.columns[strings.ToLower(column)] = strings.ToLower(typ)
		}
	})
	if err != nil {
		return sc, err
	}
	err = scanTriples(ctx, q, indexesSQL(s.t, s.table), func(table, index, _ string) {
		if ts, ok := of(table); ok {
			ts.indexes[strings.ToLower(index)] = true
		}
	})
	if err != nil {
		return sc, err
	}
	err = q.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM `"+schemaVersionTable(s.table)+"`").Scan(&sc.recorded)
	if mysqlerr.Classify(err) == mysqlerr.NoTable {
		err = nil
	}
	return sc, err
}

// scanTriples runs st, a query of three text columns, and passes each row
// to f.
func scanTriples(ctx context.Context, q querier, st statement, f func(a, b, c string)) error {
	rows, err := st.query(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var a, b, c string
		if err := rows.Scan(&a, &b, &c); err != nil {
			return err
		}
		f(a, b, c)
	}
	return rows.Err()
}

// columnsSQL reads the columns of the outbox table and its companions:
// table, column, data type.
func columnsSQL(t *target, table string) statement {
	return t.renderList("SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ({list})",
		len(allSuffixes), tableNames(table)...)
}

// indexesSQL reads the indexes of the outbox table and its companions:
// table, index, and an empty third column, once per column of the index.
// (Not DISTINCT: TABLE_NAME compares without regard to case, and DISTINCT
// would fold the indexes of orders_outbox and ORDERS_OUTBOX into the
// rows of one of them.)
func indexesSQL(t *target, table string) statement {
	return t.renderList("SELECT TABLE_NAME, INDEX_NAME, '' FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ({list})",
		len(allSuffixes), tableNames(table)...)
}

// notOurs reports a table of the same name made by something else, at
// start-up rather than on the first claim, or a table a newer build
// upgraded that no longer has what this build needs.
func (s *Store) notOurs(op string, sc schema, missing []string) error {
	if sc.recorded > SchemaVersion {
		return fmt.Errorf("mysql store: %s: table %q is at schema version %d, newer than this build's %d, and lacks %s, which this build needs: run a build of the store that knows version %d",
			op, s.table, sc.recorded, SchemaVersion, strings.Join(missing, ", "), sc.recorded)
	}
	return fmt.Errorf("mysql store: %s: table %q exists but lacks %s; it was not made by this store", op, s.table, strings.Join(missing, ", "))
}

// tableNames is the names of the outbox table and its companions, past
// and present (allSuffixes).
func tableNames(table string) []any {
	out := make([]any, len(allSuffixes))
	for i, suffix := range allSuffixes {
		out[i] = table + suffix
	}
	return out
}
