package testutil

import (
	"database/sql"
	"testing"
)

// Explain runs EXPLAIN for query (a single-table statement: one row of
// plan) and returns that row by column name, as strings (MySQL and
// MariaDB differ in their columns). Plan tests check "key" and "type".
func Explain(t testing.TB, db *sql.DB, query string, args ...any) map[string]string {
	t.Helper()
	rows, err := db.Query("EXPLAIN "+query, args...)
	if err != nil {
		t.Fatalf("testutil: EXPLAIN %s: %v", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatalf("testutil: EXPLAIN: %v", err)
	}
	if !rows.Next() {
		t.Fatalf("testutil: EXPLAIN %s returned no row", query)
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatalf("testutil: EXPLAIN: %v", err)
	}
	if rows.Next() {
		t.Fatalf("testutil: EXPLAIN %s: more than one row; want a single-table statement", query)
	}
	out := map[string]string{}
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out
}
