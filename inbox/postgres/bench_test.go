package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/internal/pgtest"
)

// BenchmarkProcess measures Process with a handler that writes one row:
// new messages (the INSERT, the handler, the stamp, the commit) and
// duplicates (an INSERT that inserts nothing, and a rollback), from 8
// goroutines.
func BenchmarkProcess(b *testing.B) {
	d := pgtest.NewDatabase(b)
	ctx := context.Background()
	if _, err := d.DB.ExecContext(ctx, "CREATE TABLE effects (id text PRIMARY KEY)"); err != nil {
		b.Fatal(err)
	}
	d.DB.SetMaxOpenConns(16)
	d.DB.SetMaxIdleConns(16)
	ib := newInbox(b, d.DB, "bench")
	h := func(id string) inbox.Handler {
		return func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO effects (id) VALUES ($1)", id)
			return err
		}
	}
	var seq atomic.Int64
	b.Run("new", func(b *testing.B) {
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				id := fmt.Sprintf("evt-%d", seq.Add(1))
				if res, err := ib.Process(ctx, id, h(id)); err != nil || res != inbox.Processed {
					b.Fatalf("%s: %v %v", id, res, err)
				}
			}
		})
	})
	b.Run("duplicate", func(b *testing.B) {
		const seen = 100
		for i := range seen {
			id := fmt.Sprintf("dup-%d", i)
			if _, err := ib.Process(ctx, id, h(id)); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		b.SetParallelism(8)
		var i atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				id := fmt.Sprintf("dup-%d", i.Add(1)%seen)
				if res, err := ib.Process(ctx, id, h(id)); err != nil || res != inbox.Duplicate {
					b.Fatalf("%s: %v %v", id, res, err)
				}
			}
		})
	})
}
