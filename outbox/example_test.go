package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// A service enqueues events in its own transaction, publishes them right
// after commit, and runs a worker that delivers whatever the fast path
// could not. (Compiled, not run: it needs a database.)
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/shop?interpolateParams=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close() // last: after the worker has stopped

	store, err := mysql.New(db, mysql.Options{Table: "orders_outbox"})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	sink := outbox.SinkFunc(func(ctx context.Context, m outbox.Message) error {
		slog.InfoContext(ctx, "deliver", "event_id", m.ID) // call an API, a broker, …
		return nil
	})
	worker, err := outbox.NewWorker(store, sink, outbox.WorkerOptions{Name: "orders_outbox", KeyAttr: "order_id"})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()

	// One command: state change and event in one transaction.
	msg := outbox.Message{ID: "evt-1", Key: "order-1", Type: "OrderPaid", Payload: []byte(`{"amount":42}`)}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE orders SET state = 'paid' WHERE id = ?", "order-1"); err != nil {
		_ = tx.Rollback()
		log.Fatal(err)
	}
	err = store.Enqueue(ctx, tx, &outbox.EnqueueOptions{HeadStart: outbox.DefaultHeadStart}, msg)
	if errors.Is(err, outbox.ErrDuplicateID) {
		log.Print("event already written")
	}
	if err != nil {
		_ = tx.Rollback()
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	if err := worker.PublishNow(ctx, msg); err != nil {
		slog.WarnContext(ctx, "sync publish failed; the worker will retry", "error", err)
	}

	<-ctx.Done() // shutdown: the worker stops, then the database closes
	if err := <-done; err != nil {
		log.Print(err)
	}
}

// The after-commit fast path: the writer publishes its own message right
// after commit, and it ends published without waiting for a worker's
// round. (Runs in memory, with outboxtest.NewStore.)
func ExampleWorker_PublishNow() {
	ctx := context.Background()
	store := outboxtest.NewStore()
	sink := outbox.SinkFunc(func(_ context.Context, m outbox.Message) error {
		fmt.Println("delivered", m.ID)
		return nil
	})
	worker, err := outbox.NewWorker(store, sink, outbox.WorkerOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}

	msg := outbox.Message{ID: "evt-1", Key: "order-1", Type: "OrderPaid", Payload: []byte(`{"amount":42}`)}
	tx := store.Begin() // with a database: the *sql.Tx of the state change
	if err := store.Enqueue(ctx, tx, &outbox.EnqueueOptions{HeadStart: outbox.DefaultHeadStart}, msg); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	if err := worker.PublishNow(ctx, msg); err != nil {
		log.Print("the worker will deliver it: ", err)
	}
	rec, _ := store.Get(ctx, msg.ID)
	fmt.Println(rec.Status)
	// Output:
	// delivered evt-1
	// published
}

// One round of a worker: each record fails or succeeds alone, a failed
// one is scheduled again by the retry policy, and one the sink marks
// Permanent becomes a dead letter.
func ExampleWorker_ProcessBatch() {
	ctx := context.Background()
	store := outboxtest.NewStore()
	tx := store.Begin()
	for _, id := range []string{"ok", "busy", "gone"} {
		if err := store.Enqueue(ctx, tx, nil, outbox.Message{ID: id, Type: "OrderPaid"}); err != nil {
			log.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	sink := outbox.SinkFunc(func(_ context.Context, m outbox.Message) error {
		switch m.ID {
		case "busy":
			return errors.New("503: try later")
		case "gone":
			return outbox.Permanent(errors.New("404: no such queue"))
		}
		return nil
	})
	worker, err := outbox.NewWorker(store, sink, outbox.WorkerOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	res, err := worker.ProcessBatch(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("published %d, retried %d, dead %d\n", res.Published, res.Retried, res.Dead)
	for _, id := range []string{"ok", "busy", "gone"} {
		rec, _ := store.Get(ctx, id)
		fmt.Printf("%s: %s after %d failed attempts %q\n", id, rec.Status, rec.Attempts, rec.LastError)
	}
	// Output:
	// published 1, retried 1, dead 1
	// ok: published after 0 failed attempts ""
	// busy: pending after 1 failed attempts "503: try later"
	// gone: dead after 1 failed attempts "404: no such queue"
}
