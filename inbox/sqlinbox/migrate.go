package sqlinbox

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/outboxrelay/outboxrelay/inbox/internal/sqldialect"
)

// Migrate creates the inbox table, its index and <table>_schema_version
// if they do not exist, records the schema version, and checks that the
// table has the columns and the primary key (consumer, msg_id) the inbox
// needs. It is idempotent and safe to run from several instances at
// start-up: they take turns on a lock (the database's package says
// which, and whether the migration is one transaction). When the table
// is already current it runs no DDL, so a database user without CREATE
// rights may call it. A table of the same name that the inbox did not
// make fails, before any DDL, with an error naming what it lacks; one
// recorded at a newer schema version than this build knows fails too.
//
// In order: it takes the migration lock, reads the recorded version,
// refuses a newer one, refuses a foreign table, runs the schema's
// statements when the version is older, and checks the table again.
func (ib *Inbox) Migrate(ctx context.Context) error {
	m, err := ib.d.BeginMigration(ctx, ib.db, ib.opts.Table)
	if err != nil {
		return ib.wrap("migrate", err)
	}
	defer m.Close()
	if err := m.Lock(ctx); err != nil {
		return ib.wrap("migrate: wait for other instances' Migrate", err)
	}
	recorded, err := m.Version(ctx)
	if err != nil {
		return ib.wrap("migrate: read the schema version", err)
	}
	_, version := ib.d.Schema()
	switch {
	case recorded > version:
		return fmt.Errorf("%s: migrate: table %q is at schema version %d, newer than this build's %d: upgrade the module", ib.d.Name(), ib.opts.Table, recorded, version)
	case recorded < version:
		if err := ib.verify(ctx, m, false); err != nil {
			return err
		}
		for _, st := range schema(ib.d, ib.opts.Table) {
			if err := m.Exec(ctx, st); err != nil {
				return ib.wrap("migrate to schema version "+strconv.Itoa(version), err)
			}
		}
	}
	if err := ib.verify(ctx, m, true); err != nil {
		return err
	}
	if err := m.Commit(); err != nil {
		return ib.wrap("migrate: commit", err)
	}
	return nil
}

// verify refuses a table that lacks what the inbox needs; one that does
// not exist is refused only if mustExist.
func (ib *Inbox) verify(ctx context.Context, m sqldialect.Migration, mustExist bool) error {
	exists, missing, err := m.Lacks(ctx)
	switch {
	case err != nil:
		return ib.wrap("migrate: read the table's columns", err)
	case len(missing) > 0 && (exists || mustExist):
		return fmt.Errorf("%s: migrate: table %q exists but is not an inbox table: it lacks %s", ib.d.Name(), ib.opts.Table, strings.Join(missing, ", "))
	}
	return nil
}

// SchemaSQL returns the SQL that creates the inbox table named table (a
// name Options.Table accepts; "" for DefaultTable) in d's dialect at its
// schema version, one statement after another: what Migrate runs. It is
// what inbox/mysql's and inbox/postgres's SchemaSQL call: call theirs.
func SchemaSQL(d sqldialect.Dialect, table string) (string, error) {
	opts := Options{Table: table, Consumer: "x"}.withDefaults()
	if err := opts.validate(d); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, st := range schema(d, opts.Table) {
		fmt.Fprintf(&b, "%s;\n\n", st)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// schema returns the statements of d's schema file, without comments,
// with the names of table and the version filled in.
func schema(d sqldialect.Dialect, table string) []string {
	file, version := d.Schema()
	names := strings.NewReplacer("{table}", table, "{version}", strconv.Itoa(version))
	var out []string
	for _, chunk := range strings.Split(file, ";\n") {
		var lines []string
		for _, line := range strings.Split(chunk, "\n") {
			if !strings.HasPrefix(line, "--") {
				lines = append(lines, line)
			}
		}
		if st := strings.TrimSpace(strings.Join(lines, "\n")); st != "" {
			out = append(out, names.Replace(st))
		}
	}
	return out
}
