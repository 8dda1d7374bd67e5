package main

import (
	"flag"
	"fmt"
	"strings"

	inboxmysql "github.com/outboxrelay/outboxrelay/inbox/mysql"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// runSchema prints the SQL of the schema for a table, with no database:
// for golang-migrate, goose or atlas users, or a DBA.
func runSchema(c *cli, args []string) int {
	fs := c.baseFlags("[--table T] [--from VERSION] [--to VERSION] [--inbox]")
	fs.StringVar(&c.table, "table", "", fmt.Sprintf("outbox table name (default $%s, then %q; with --inbox: the inbox table's, default %q)",
		tableEnv, defaultTable, inboxmysql.DefaultTable))
	from := fs.Int("from", 0, "the schema version the tables are at (0: none, print the CREATE statements)")
	to := fs.Int("to", mysql.SchemaVersion, "the schema version to reach")
	inbox := fs.Bool("inbox", false, "print the schema of a consumer's inbox table (inbox/mysql) instead, at its current version")
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	switch {
	case len(c.args) > 0:
		return c.extraArgs("schema takes no arguments", c.args, schemaTable)
	case *inbox:
		return printInboxSchema(c, fs)
	case *to < 1 || *to > mysql.SchemaVersion:
		return c.usageError("--to %d: this build knows schema versions 1 to %d", *to, mysql.SchemaVersion)
	case *from < 0 || *from > *to:
		return c.usageError("--from %d: must be 0 (no tables yet) to %d (--to)", *from, *to)
	}
	sqlText, err := mysql.SchemaSQL(c.table, *from, *to)
	if err != nil {
		return c.usageError("%s: %v", c.tableSource(), err)
	}
	if c.json {
		return c.printJSON(map[string]any{"table": c.table, "from": *from, "to": *to, "sql": sqlText})
	}
	fmt.Fprintln(c.out, sqlText)
	return exitOK
}

// schemaTable is schema's extraArgs lookup: the first of args that is a
// valid outbox table name (schema reads no database).
func schemaTable(args []string) string {
	for _, a := range args {
		if _, err := mysql.SchemaSQL(a, 0, mysql.SchemaVersion); err == nil {
			return a
		}
	}
	return ""
}

// printInboxSchema prints inbox/mysql's SchemaSQL for --table (by
// default the inbox's default table).
func printInboxSchema(c *cli, fs *flag.FlagSet) int {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["from"] || set["to"] {
		return c.usageError("--inbox takes no --from or --to: the inbox table has one schema version, %d", inboxmysql.SchemaVersion)
	}
	if c.tableFrom != tableFromFlag { // $OUTBOXCTL_TABLE names an outbox table
		c.table = inboxmysql.DefaultTable
	}
	sqlText, err := inboxmysql.SchemaSQL(c.table)
	if err != nil {
		return c.usageError("--table: %v", err)
	}
	if c.json {
		return c.printJSON(map[string]any{"table": c.table, "inbox": true, "to": inboxmysql.SchemaVersion, "sql": sqlText})
	}
	fmt.Fprintln(c.out, sqlText)
	return exitOK
}

// runMigrate applies what Migrate would: without --yes it prints the
// statements and changes nothing.
func runMigrate(c *cli, args []string) int {
	fs := c.flags("[--dry-run] [--yes]")
	cf := addConfirm(fs)
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	if len(c.args) > 0 {
		return c.extraArgs("migrate takes no arguments", c.args, c.tableInDB)
	}
	if code, ok := c.open(); !ok {
		return code
	}
	defer c.close()
	ms := c.store.(*mysql.Store) // the DDL is the MySQL store's
	st, err := call(c, ms.SchemaStatus)
	if err != nil {
		return c.fail(exitFailed, err)
	}
	if others := c.outboxesBeside(); st.Version == 0 && c.tableFrom == tableFromDefault && len(others) > 0 {
		c.warn(fmt.Errorf("%s: this makes a new table %q beside the outbox tables here, %s (pass --table to upgrade one of them)",
			c.tableSource(), c.table, nameList(others)))
	}
	if len(st.Pending) == 0 {
		if c.json {
			return c.printJSON(map[string]any{"version": st.Version, "statements": []string{}, "done": true})
		}
		fmt.Fprintf(c.out, "table %s is at schema version %d: nothing to do\n", c.table, st.Version)
		return exitOK
	}
	what := fmt.Sprintf("bring table %s from schema version %d to %d with:\n%s;", c.table, st.Version, mysql.SchemaVersion,
		strings.Join(st.Pending, ";\n"))
	if code, ok := c.proceed(cf, what); !ok {
		return code
	}
	if err := call0(c, ms.Migrate); err != nil {
		return c.fail(exitFailed, err)
	}
	if c.json {
		return c.printJSON(map[string]any{"version": mysql.SchemaVersion, "statements": st.Pending, "done": true})
	}
	fmt.Fprintf(c.out, "table %s is at schema version %d\n", c.table, mysql.SchemaVersion)
	return exitOK
}
