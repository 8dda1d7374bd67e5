package sqlinbox

import (
	"fmt"
	"strings"
)

// SchemaVersionSuffix makes the name of the table that records an inbox
// table's schema version: <table>_schema_version.
const SchemaVersionSuffix = "_schema_version"

// SchemaSQL is the package's SchemaSQL: d's schema of the table named
// table (checked as Options.Table is), one statement after another.
func SchemaSQL(d Dialect, table string) (string, error) {
	opts := Options{Table: table, Consumer: "x"}.WithDefaults()
	if err := opts.Validate(d); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, st := range d.Schema(opts.Table) {
		fmt.Fprintf(&b, "%s;\n\n", st)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// SplitSchema returns the statements of a schema file, whose statements
// end with ";" at the end of a line and whose comments are whole lines
// starting with "--", without the comments and with names replaced.
func SplitSchema(file string, names *strings.Replacer) []string {
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

// CheckVersion refuses a table recorded at a schema version newer than
// current, the build's.
func (ib *Inbox) CheckVersion(recorded, current int) error {
	if recorded > current {
		return fmt.Errorf("%s: migrate: table %q is at schema version %d, newer than this build's %d: upgrade the module", ib.d.Name(), ib.opts.Table, recorded, current)
	}
	return nil
}

// NotInboxTable is Migrate's error for a table that lacks what the inbox
// needs (missing, in words: "column msg_id").
func (ib *Inbox) NotInboxTable(missing []string) error {
	return fmt.Errorf("%s: migrate: table %q exists but is not an inbox table: it lacks %s", ib.d.Name(), ib.opts.Table, strings.Join(missing, ", "))
}
