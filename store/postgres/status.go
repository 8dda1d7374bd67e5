package postgres

import (
	"context"
	"fmt"
)

// SchemaStatus is what Store.SchemaStatus found.
type SchemaStatus struct {
	// Version is the schema version of the tables, as recorded in the
	// outbox table's comment; 0 when the table does not exist.
	Version int
	// Pending are the scripts Migrate would run, one per version, in
	// order, with the table names filled in (each runs in a transaction
	// of its own).
	Pending []string
}

// SchemaStatus reports the schema version of the tables and what Migrate
// would do to them, changing nothing: for outboxctl migrate's dry run,
// or a DBA.
func (s *Store) SchemaStatus(ctx context.Context) (SchemaStatus, error) {
	v, err := schemaVersion(ctx, s.db, s.opts.Table)
	if err != nil {
		return SchemaStatus{}, s.wrap("schema status", err)
	}
	st := SchemaStatus{Version: v}
	if v > SchemaVersion {
		return st, fmt.Errorf("postgres store: schema status: table %q is at schema version %d, newer than this build's %d", s.opts.Table, v, SchemaVersion)
	}
	for next := v + 1; next <= SchemaVersion; next++ {
		step, err := schemaStep(s.opts.Table, next)
		if err != nil {
			return st, err
		}
		st.Pending = append(st.Pending, step)
	}
	return st, nil
}
