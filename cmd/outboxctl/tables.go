package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
)

// tableEnv is the environment variable --table defaults to.
const tableEnv = "OUTBOXCTL_TABLE"

// Where the table's name came from (cli.tableFrom), as errors name it.
const (
	tableFromDefault = "" // neither: defaultTable
	tableFromFlag    = "--table"
	tableFromEnv     = "$" + tableEnv
)

// resolveTable fills in the table when fs has --table and it was not
// given: $OUTBOXCTL_TABLE, then defaultTable. An empty --table is
// refused: the store would take it for the default.
func (c *cli) resolveTable(fs *flag.FlagSet) (int, bool) {
	if fs.Lookup("table") == nil {
		return exitOK, true
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "table" })
	env := os.Getenv(tableEnv)
	switch {
	case given && c.table == "":
		return c.usageError(`--table "": give a table name (or leave --table out for $%s, then %q)`, tableEnv, defaultTable), false
	case given:
		c.tableFrom = tableFromFlag
	case env != "":
		c.table, c.tableFrom = env, tableFromEnv
	default:
		c.table, c.tableFrom = defaultTable, tableFromDefault
	}
	return exitOK, true
}

// tableSource names where the table's name came from, for an error
// about it.
func (c *cli) tableSource() string {
	if c.tableFrom == tableFromDefault {
		return fmt.Sprintf("neither --table nor $%s given, so the default %q", tableEnv, defaultTable)
	}
	return c.tableFrom
}

// tableHint says what to do about a wrong table: pass --table, or check
// where the name came from.
func (c *cli) tableHint() string {
	if c.tableFrom == tableFromDefault {
		return "pass --table or set " + tableEnv
	}
	return "check " + c.tableFrom
}

// explainVerify returns the error of the table's Verify, or, when the
// table does not exist, one that says where its name came from and
// lists the outbox tables that do exist: a forgotten --table found the
// default table missing and suggested creating it.
func (c *cli) explainVerify(verr error) error {
	if te := (*timeoutError)(nil); errors.As(verr, &te) {
		return verr
	}
	l, err := call(c, c.listTables)
	switch {
	case err != nil, slices.Contains(l.outboxes, c.table):
		return verr // an outbox table that verr explains, or the listing failed
	case slices.Contains(l.all, c.table) && len(l.outboxes) > 0:
		// Another table (a companion of an outbox, say).
		return fmt.Errorf("%w; outbox tables here: %s (%s)", verr, nameList(l.outboxes), c.tableHint())
	case slices.ContainsFunc(l.all, func(t string) bool { return strings.EqualFold(t, c.table) }):
		return verr // it exists, but not in this case, or not ours: verr says so
	case len(l.outboxes) == 0:
		return fmt.Errorf("table %q does not exist in database %s, nor does any other outbox table (%s): "+
			"outboxctl migrate creates it, or check --dsn", c.table, c.dbName, c.tableSource())
	}
	hint := c.tableHint()
	if s := suggest(c.table, l.outboxes); len(s) > 0 {
		hint += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return fmt.Errorf("table %q does not exist; outbox tables here: %s (%s)", c.table, nameList(l.outboxes), hint)
}

// outboxesBeside lists the outbox tables of the database other than the
// table, for migrate's warning; nil when the listing fails.
func (c *cli) outboxesBeside() []string {
	l, err := call(c, c.listTables)
	if err != nil {
		return nil
	}
	return slices.DeleteFunc(l.outboxes, func(t string) bool { return t == c.table })
}

// maxNamesShown bounds the tables an error lists.
const maxNamesShown = 10

// nameList joins names for a message, at most maxNamesShown of them.
func nameList(names []string) string {
	if len(names) <= maxNamesShown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxNamesShown], ", "), len(names)-maxNamesShown)
}
