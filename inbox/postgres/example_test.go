package postgres_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/postgres"
	"github.com/outboxrelay/outboxrelay/inbox/sqlinbox"
)

// giftSent is the payload of the example's event.
type giftSent struct {
	From, To string
	Amount   int64
}

// A consumer applies each event through its inbox: the user's totals
// change exactly once per event ID, however often the broker delivers it
// and on however many instances. The message is acknowledged after
// Processed or Duplicate, and left for redelivery after an error.
// (Compiled, not run: it needs a database and a broker.)
func ExampleInbox_Process() {
	ctx := context.Background()
	// pgx's database/sql driver; the DSN's password stays out of errors.
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ib, err := postgres.New(db, postgres.Options{Consumer: "activity-service"})
	if err != nil {
		log.Fatal(err)
	}
	if err := ib.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	// handle is called for every delivery of a message from the broker.
	handle := func(ctx context.Context, eventID string, payload []byte, ack func() error) error {
		var ev giftSent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return err // a poison message: the broker's dead-letter policy takes over
		}
		res, err := ib.Process(ctx, eventID, func(ctx context.Context, tx *sql.Tx) error {
			// Every write goes through tx; return every error it returns.
			// Rows are locked in a fixed order (sender first), so that two
			// gifts between the same users never deadlock.
			if _, err := tx.ExecContext(ctx,
				`INSERT INTO gift_totals (user_id, sent) VALUES ($1, $2)
				 ON CONFLICT (user_id) DO UPDATE SET sent = gift_totals.sent + EXCLUDED.sent`,
				ev.From, ev.Amount); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx,
				`INSERT INTO gift_totals (user_id, received) VALUES ($1, $2)
				 ON CONFLICT (user_id) DO UPDATE SET received = gift_totals.received + EXCLUDED.received`,
				ev.To, ev.Amount)
			return err
		})
		var pe *inbox.PanicError
		switch {
		case errors.As(err, &pe):
			return err // rolled back; the stack is in pe.Stack
		case err != nil:
			return err // rolled back: no ack, the broker delivers it again
		}
		slog.DebugContext(ctx, "event applied", "event_id", eventID, "result", res)
		return ack()
	}
	_ = handle
}

// A service on pgxpool gives the inbox a *sql.DB over the same pool;
// the handler's tx is a transaction on one of the pool's connections.
// (Compiled, not run: it needs a database.)
func ExampleNew_pgxpool() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	ib, err := postgres.New(db, postgres.Options{Consumer: "activity-service"})
	if err != nil {
		log.Fatal(err)
	}
	_ = ib
}

// Retention: delete processed IDs older than the window, hourly, in
// small batches. A message redelivered after the window would be
// processed again, so the window must outlast any redelivery. Several
// instances may run it at once: their batches skip each other's rows.
// (Compiled, not run: it needs a database.)
func ExampleInbox_Purge() {
	ctx := context.Background()
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ib, err := postgres.New(db, postgres.Options{Consumer: "activity-service"})
	if err != nil {
		log.Fatal(err)
	}
	tick := time.NewTicker(time.Hour)
	defer tick.Stop()
	for {
		n, err := ib.Purge(ctx, sqlinbox.DefaultRetention, 1000)
		if err != nil {
			slog.WarnContext(ctx, "inbox retention failed", "error", err)
		} else {
			slog.InfoContext(ctx, "inbox retention", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// SchemaSQL prints the DDL that Migrate runs, for a migration tool.
func ExampleSchemaSQL() {
	ddl, err := postgres.SchemaSQL("activity_inbox")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(ddl)
	// Output:
	// CREATE TABLE IF NOT EXISTS "activity_inbox" (
	//   consumer     text COLLATE "C" NOT NULL CHECK (octet_length(consumer) BETWEEN 1 AND 64),
	//   msg_id       bytea NOT NULL CHECK (octet_length(msg_id) BETWEEN 1 AND 1020),
	//   processed_at timestamptz NOT NULL,
	//   CONSTRAINT "activity_inbox_pkey" PRIMARY KEY (consumer, msg_id)
	// );
	//
	// CREATE INDEX IF NOT EXISTS "activity_inbox_processed_idx" ON "activity_inbox" (consumer, processed_at);
	//
	// CREATE TABLE IF NOT EXISTS "activity_inbox_schema_version" (
	//   version    integer NOT NULL PRIMARY KEY,
	//   applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
	// );
	//
	// INSERT INTO "activity_inbox_schema_version" (version) VALUES (1) ON CONFLICT (version) DO NOTHING;
}

// New checks its options at once and names every bad field.
func ExampleNew_validation() {
	db, err := sql.Open("pgx", "postgres://localhost/unused") // New does not connect
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	_, err = postgres.New(db, postgres.Options{Consumer: "activity service", MaxAttempts: -1})
	fmt.Println(err)
	// Output:
	// postgres inbox: Consumer "activity service": required, 1 to 64 letters, digits, '_', '.' or '-', not starting with '.' or '-'
	// postgres inbox: MaxAttempts -1: must be 1 to 1000 (0 for the default)
}
