package pgtest

import (
	"context"
	"os"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestNewDatabase(t *testing.T) {
	t.Log(Server(t))
	d := NewDatabase(t)
	var name string
	if err := d.DB.QueryRow("SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != d.Name {
		t.Fatalf("connected to %q, want %q", name, d.Name)
	}
	var one int
	if err := d.Pool(t).QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("pool: %v %d", err, one)
	}
	other := d.Open(t)
	if err := other.Ping(); err != nil {
		t.Fatal(err)
	}
	n, err := d.KillConnections(context.Background())
	if err != nil || n < 1 {
		t.Fatalf("KillConnections = %d, %v; want at least 1", n, err)
	}
}

func TestRedact(t *testing.T) {
	got := Redact("postgres://u:s3cret@h:5433/db?sslmode=disable")
	if strings.Contains(got, "s3cret") || !strings.Contains(got, "u:xxx@h:5433/db") {
		t.Fatalf("Redact = %q", got)
	}
	if Redact("::nonsense") != "(unparseable DSN)" {
		t.Fatal("an unparseable DSN must not be echoed")
	}
}
