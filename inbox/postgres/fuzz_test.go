package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/postgres"
	"github.com/outboxrelay/outboxrelay/internal/pgtest"
)

// FuzzIDs: whatever the ID (NULs, control characters, invalid UTF-8,
// 4-byte characters, megabytes), Process refuses it with ErrInvalidID
// before any handler runs, or records it as itself: processed once, a
// duplicate after, found by Contains, and distinct from the same ID with
// a space appended, its case changed or a NUL appended. (go test runs
// the seeds; go test -fuzz FuzzIDs explores.)
func FuzzIDs(f *testing.F) {
	for _, s := range []string{"evt-1", "a ", " ", "\x00", "a\x00", "\xff", "e\u0301", "É", "\\x41", "'\"\\$1?",
		strings.Repeat("😀", 255), strings.Repeat("😀", 256), ""} {
		f.Add(s)
	}
	d := pgtest.NewDatabase(f)
	ctx := context.Background()
	n := 0
	noop := func(context.Context, *sql.Tx) error { return nil }
	f.Fuzz(func(t *testing.T, id string) {
		n++ // a consumer per input: the engine may repeat one
		ib, err := postgres.New(d.DB, postgres.Options{Consumer: fmt.Sprintf("fuzz-%d", n)})
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
			if len(err.Error()) > 1024 {
				t.Fatalf("the error carries the whole ID: %d bytes", len(err.Error()))
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
		for _, other := range []string{id + " ", id + "\x00", strings.ToUpper(id), strings.ToLower(id)} {
			if other == id || inbox.ValidateID(other) != nil {
				continue
			}
			if ok, err := ib.Contains(ctx, other); err != nil || ok {
				t.Fatalf("%q is taken for %q: %v, %v", other, id, ok, err)
			}
		}
	})
}
