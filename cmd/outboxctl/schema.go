package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
)

// runSchema prints the SQL of the schema for a table, with no database:
// for golang-migrate, goose or atlas users, or a DBA.
func runSchema(c *cli, args []string) int {
	fs := c.baseFlags("[--driver D] [--table T] [--from VERSION] [--to VERSION] [--inbox]")
	c.addDriverFlag(fs)
	fs.StringVar(&c.table, "table", "", fmt.Sprintf("outbox table name (default $%s, then %q; with --inbox: the inbox table's, default %q)",
		tableEnv, defaultTable, drivers["mysql"].inbox.defaultTable))
	from := fs.Int("from", 0, "the schema version the tables are at (0: none, print the CREATE statements)")
	to := fs.Int("to", 0, "the schema version to reach (default: the driver's current one)")
	inbox := fs.Bool("inbox", false, "print the schema of a consumer's inbox table (inbox/mysql, inbox/postgres) instead, at its current version")
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	d, err := c.pickDriver()
	if err != nil {
		return c.usageError("%v", err)
	}
	if *to == 0 {
		*to = d.schema.version
	}
	switch {
	case len(c.args) > 0:
		return c.extraArgs("schema takes no arguments", c.args, func(args []string) string { return schemaTable(d, args) })
	case *inbox:
		return printInboxSchema(c, fs, d)
	case *to < 1 || *to > d.schema.version:
		return c.usageError("--to %d: this build knows schema versions 1 to %d (%s)", *to, d.schema.version, d.name)
	case *from < 0 || *from > *to:
		return c.usageError("--from %d: must be 0 (no tables yet) to %d (--to)", *from, *to)
	}
	sqlText, err := d.schema.sql(c.table, *from, *to)
	if err != nil {
		return c.usageError("%s: %v", c.tableSource(), err)
	}
	if c.json {
		return c.printJSON(map[string]any{"driver": d.name, "table": c.table, "from": *from, "to": *to, "sql": sqlText})
	}
	fmt.Fprintln(c.out, sqlText)
	return exitOK
}

// schemaTable is schema's extraArgs lookup: the first of args that is a
// valid outbox table name (schema reads no database).
func schemaTable(d *driver, args []string) string {
	for _, a := range args {
		if _, err := d.schema.sql(a, 0, d.schema.version); err == nil {
			return a
		}
	}
	return ""
}

// printInboxSchema prints the driver's inbox SchemaSQL for --table (by
// default the inbox's default table).
func printInboxSchema(c *cli, fs *flag.FlagSet, d *driver) int {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["from"] || set["to"] {
		return c.usageError("--inbox takes no --from or --to: the inbox table has one schema version, %d", d.inbox.version)
	}
	if c.tableFrom != tableFromFlag { // $OUTBOXCTL_TABLE names an outbox table
		c.table = d.inbox.defaultTable
	}
	sqlText, err := d.inbox.sql(c.table)
	if err != nil {
		return c.usageError("--table: %v", err)
	}
	if c.json {
		return c.printJSON(map[string]any{"driver": d.name, "table": c.table, "inbox": true, "to": d.inbox.version, "sql": sqlText})
	}
	fmt.Fprintln(c.out, sqlText)
	return exitOK
}

// runMigrate applies what Migrate would: without --yes it prints the
// statements and changes nothing.
func runMigrate(c *cli, args []string) int {
	fs := c.flags("[--dry-run] [--yes]")
	cf := addConfirm(fs)
	if code, ok := c.parseNoArgs(fs, args, c.tableInDB); !ok {
		return code
	}
	if code, ok := c.open(); !ok {
		return code
	}
	defer c.close()
	d := c.driver
	st, err := call(c, func(ctx context.Context) (schemaStatus, error) { return d.status(ctx, c.store) })
	if err != nil {
		return c.fail(exitFailed, err)
	}
	if others := c.outboxesBeside(); st.version == 0 && c.tableFrom == tableFromDefault && len(others) > 0 {
		c.warn(fmt.Errorf("%s: this makes a new table %q beside the outbox tables here, %s (pass --table to upgrade one of them)",
			c.tableSource(), c.table, nameList(others)))
	}
	if len(st.pending) == 0 {
		if c.json {
			return c.printJSON(map[string]any{"version": st.version, "statements": []string{}, "done": true})
		}
		fmt.Fprintf(c.out, "table %s is at schema version %d: nothing to do\n", c.table, st.version)
		return exitOK
	}
	what := fmt.Sprintf("bring table %s from schema version %d to %d with:\n%s", c.table, st.version, d.schema.version, statements(st.pending))
	if code, ok := c.proceed(cf, what); !ok {
		return code
	}
	if err := call0(c, c.store.Migrate); err != nil {
		return c.fail(exitFailed, err)
	}
	if c.json {
		return c.printJSON(map[string]any{"version": d.schema.version, "statements": st.pending, "done": true})
	}
	fmt.Fprintf(c.out, "table %s is at schema version %d\n", c.table, d.schema.version)
	return exitOK
}

// statements joins SQL statements (or whole scripts), each ended by a
// semicolon.
func statements(sqls []string) string {
	var b strings.Builder
	for i, s := range sqls {
		if i > 0 {
			b.WriteString("\n")
		}
		s = strings.TrimRight(s, " \n")
		b.WriteString(s)
		if !strings.HasSuffix(s, ";") {
			b.WriteString(";")
		}
	}
	return b.String()
}
