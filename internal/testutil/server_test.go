package testutil

import (
	"strings"
	"testing"
)

// TestDatabaseName: a name within both servers' limits (MySQL's 64
// characters, PostgreSQL's 63 bytes) that tells the test apart.
func TestDatabaseName(t *testing.T) {
	a, b := databaseName(strings.Repeat("TestA/Sub Test", 10)), databaseName("TestA")
	if len(a) > 63 || !strings.HasPrefix(a, "ort_") || strings.ContainsAny(a, "/ AT") {
		t.Fatalf("databaseName = %q", a)
	}
	if !strings.HasPrefix(b, "ort_testa_") || a == b {
		t.Fatalf("databaseName = %q, %q", a, b)
	}
}
