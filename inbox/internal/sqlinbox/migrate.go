package sqlinbox

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// SchemaVersionSuffix makes the name of the table that records an inbox
// table's schema version: <table>_schema_version.
const SchemaVersionSuffix = "_schema_version"

// A Migration is one Migrate's hold on the database (a connection, or
// a transaction where DDL is transactional), which Dialect.BeginMigration
// returns for the inbox's table. Its methods return the database's
// errors as they are.
type Migration interface {
	// Lock waits for the lock that makes the Migrates of one table take
	// turns, until ctx is done.
	Lock(ctx context.Context) error
	// Version reads the table's recorded schema version; 0 when there
	// is none.
	Version(ctx context.Context) (int, error)
	// Lacks reads the table's columns and reports whether it exists and
	// what it lacks of what the inbox needs, in words: "column msg_id",
	// "primary key (consumer, msg_id)".
	Lacks(ctx context.Context) (exists bool, missing []string, err error)
	// Exec runs one statement of the schema.
	Exec(ctx context.Context, statement string) error
	// Commit keeps what the migration did, where a transaction holds it.
	Commit() error
	// Close releases the lock and ends the migration, rolling back what
	// Commit did not keep.
	Close()
}

// Migrate creates the inbox table at the schema version if it is not
// there yet, and checks that the table is one the inbox can use: it
// takes the migration lock, reads the recorded version, refuses a newer
// one, refuses a table of that name that the inbox did not make before
// any DDL touches it, runs the schema's statements when the version is
// older, and checks the table again. A current table takes no DDL.
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
func (ib *Inbox) verify(ctx context.Context, m Migration, mustExist bool) error {
	exists, missing, err := m.Lacks(ctx)
	switch {
	case err != nil:
		return ib.wrap("migrate: read the table's columns", err)
	case len(missing) > 0 && (exists || mustExist):
		return fmt.Errorf("%s: migrate: table %q exists but is not an inbox table: it lacks %s", ib.d.Name(), ib.opts.Table, strings.Join(missing, ", "))
	}
	return nil
}

// SchemaSQL is the package's SchemaSQL: d's schema of the table named
// table (checked as Options.Table is), one statement after another.
func SchemaSQL(d Dialect, table string) (string, error) {
	opts := Options{Table: table, Consumer: "x"}.WithDefaults()
	if err := opts.Validate(d); err != nil {
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
func schema(d Dialect, table string) []string {
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
