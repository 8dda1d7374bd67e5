package pgtest

import (
	"database/sql"
	"errors"
	"strings"
	"testing"
)

// The tests that need a server run in store/postgres (pgtest_test.go),
// whose test binary registers pgx's driver: this module's must not, so
// that the library's module never requires pgx.

// TestNoDriver: a test binary without pgx's driver is told how to
// register it, before any container is started. This one has none,
// which also keeps pgx out of the library's module.
func TestNoDriver(t *testing.T) {
	for _, d := range sql.Drivers() {
		if d == DriverName {
			t.Fatalf("the library's test binary registered %q: pgx must stay out of the root module", d)
		}
	}
	err := checkDriver()
	if !errors.Is(err, errNoDriver) || !strings.Contains(err.Error(), "github.com/jackc/pgx/v5/stdlib") {
		t.Fatalf("checkDriver() = %v; want errNoDriver naming pgx's stdlib", err)
	}
}

func TestRedact(t *testing.T) {
	for _, c := range []struct{ dsn, want string }{
		{"postgres://u:s3cret@h:5433/db?sslmode=disable", "postgres://u:xxxxx@h:5433/db?sslmode=disable"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"host=h user=u password=s3cret dbname=db", "host=h user=u password=xxxxx dbname=db"},
		{"host=h password='s3 cret' user=u", "host=h password=xxxxx user=u"},
		{"postgres://u:s3cret@h:bad port/db", "(unparseable DSN)"},
	} {
		if got := Redact(c.dsn); got != c.want {
			t.Errorf("Redact(%q) = %q; want %q", c.dsn, got, c.want)
		}
	}
}

func TestWithoutPassword(t *testing.T) {
	got := withoutPassword("failed to connect to `user=u password=s3cret`", "host=h password=s3cret")
	if strings.Contains(got, "s3cret") {
		t.Fatalf("withoutPassword = %q", got)
	}
	got = withoutPassword("dial h: s3cret", "postgres://u:s3cret@h/db")
	if strings.Contains(got, "s3cret") {
		t.Fatalf("withoutPassword = %q", got)
	}
}

func TestWithDatabase(t *testing.T) {
	for _, c := range []struct{ dsn, want string }{
		{"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres://postgres@127.0.0.1:5432/ort_x?sslmode=disable"},
		{"host=127.0.0.1 user=postgres", "host=127.0.0.1 user=postgres dbname=ort_x"},
	} {
		got, err := withDatabase(c.dsn, "ort_x")
		if err != nil || got != c.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", c.dsn, got, err, c.want)
		}
	}
}
