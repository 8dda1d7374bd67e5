package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/mysql"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// FuzzIDs: whatever the ID, written into the SQL by the driver, Process refuses it with ErrInvalidID before
// any handler runs, or records it as itself: processed once, a duplicate
// after, found by Contains, and distinct from the same ID with a space
// appended or its case changed. (go test runs the seeds; go test -fuzz
// FuzzIDs explores.)
func FuzzIDs(f *testing.F) {
	for _, s := range []string{"evt-1", "a ", " ", "\x00", "\xff", "e\u0301", "É", strings.Repeat("😀", 255), "'`\\\"", ""} {
		f.Add(s)
	}
	d := testutil.NewDatabase(f)
	// The suite runs with prepared statements; here the driver writes the
	// IDs into the SQL text itself (the recommended DSN setting).
	cfg, err := mysqldrv.ParseDSN(d.DSN)
	if err != nil {
		f.Fatal(err)
	}
	cfg.InterpolateParams = true
	db := testutil.OpenDSN(f, cfg.FormatDSN())
	ctx := context.Background()
	n := 0
	noop := func(context.Context, *sql.Tx) error { return nil }
	f.Fuzz(func(t *testing.T, id string) {
		n++ // a consumer per input: the engine may repeat one
		ib, err := mysql.New(db, mysql.Options{Consumer: fmt.Sprintf("fuzz-%d", n)})
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			if err := ib.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
		}
		ran := false
		res, err := ib.Process(ctx, id, func(context.Context, *sql.Tx) error { ran = true; return nil })
		if inbox.ValidateID(id) != nil {
			if !errors.Is(err, inbox.ErrInvalidID) || ran || res != 0 {
				t.Fatalf("%q: invalid, yet res %v, ran %v, err %v", id, res, ran, err)
			}
			return
		}
		if err != nil || res != inbox.Processed || !ran {
			t.Fatalf("%q: res %v, ran %v, err %v", id, res, ran, err)
		}
		if res, err := ib.Process(ctx, id, noop); err != nil || res != inbox.Duplicate {
			t.Fatalf("%q again: res %v, err %v", id, res, err)
		}
		if ok, err := ib.Contains(ctx, id); err != nil || !ok {
			t.Fatalf("%q: contains %v, %v", id, ok, err)
		}
		for _, other := range []string{id + " ", strings.ToUpper(id), strings.ToLower(id)} {
			if other == id || inbox.ValidateID(other) != nil {
				continue
			}
			if ok, err := ib.Contains(ctx, other); err != nil || ok {
				t.Fatalf("%q is taken for %q: %v, %v", other, id, ok, err)
			}
		}
	})
}
