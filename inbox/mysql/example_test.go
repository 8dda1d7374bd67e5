package mysql_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"time"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/mysql"
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
	db, err := sql.Open("mysql", "activity:secret@tcp(127.0.0.1:3306)/activity?interpolateParams=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ib, err := mysql.New(db, mysql.Options{Consumer: "activity-service"})
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
			if _, err := tx.ExecContext(ctx,
				"INSERT INTO gift_totals (user_id, sent) VALUES (?, ?) ON DUPLICATE KEY UPDATE sent = sent + VALUES(sent)",
				ev.From, ev.Amount); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx,
				"INSERT INTO gift_totals (user_id, received) VALUES (?, ?) ON DUPLICATE KEY UPDATE received = received + VALUES(received)",
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

// Retention: delete processed IDs older than the window, hourly, in
// small batches. A message redelivered after the window would be
// processed again, so the window must outlast any redelivery.
// (Compiled, not run: it needs a database.)
func ExampleInbox_Purge() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "activity:secret@tcp(127.0.0.1:3306)/activity")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ib, err := mysql.New(db, mysql.Options{Consumer: "activity-service"})
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
