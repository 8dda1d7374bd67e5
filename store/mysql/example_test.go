package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"log"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// Migrate creates the outbox table and its companion tables, or upgrades
// them, at startup. It is safe when several instances start at once.
// (Compiled, not run: it needs a database.)
func ExampleStore_Migrate() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/shop?interpolateParams=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	store, err := mysql.New(db, mysql.Options{Table: "orders_outbox"})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
}

// A second consumer of the same outbox: registered once by name (here
// from the beginning, so it also gets every message still retained), then
// served by a worker of its own, with its own delivery state and dead
// letters. (Compiled, not run: it needs a database.)
func ExampleStore_Consumer() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/shop?interpolateParams=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := mysql.New(db, mysql.Options{Table: "orders_outbox"})
	if err != nil {
		log.Fatal(err)
	}

	// Once, at deployment (outboxctl consumers add audit --from beginning
	// does the same). A second call fails with ErrConsumerExists.
	err = store.AddConsumer(ctx, "audit", mysql.StartBeginning)
	if err != nil && !errors.Is(err, mysql.ErrConsumerExists) {
		log.Fatal(err)
	}

	audit, err := store.Consumer("audit")
	if err != nil {
		log.Fatal(err)
	}
	sink := outbox.SinkFunc(func(ctx context.Context, m outbox.Message) error {
		slog.InfoContext(ctx, "audit", "event_id", m.ID, "type", m.Type)
		return nil
	})
	worker, err := outbox.NewWorker(audit, sink, outbox.WorkerOptions{Name: "orders_outbox_audit"})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Run(ctx); err != nil {
		log.Print(err)
	}
}

// Requeue gives one dead letter a fresh start, by its event ID.
// (Compiled, not run: it needs a database.)
func ExampleStore_Requeue() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/shop?interpolateParams=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := mysql.New(db, mysql.Options{Table: "orders_outbox"})
	if err != nil {
		log.Fatal(err)
	}

	switch err := store.Requeue(ctx, "evt-1"); {
	case errors.Is(err, outbox.ErrNotFound):
		log.Print("no such record")
	case errors.Is(err, mysql.ErrNotDead):
		log.Print("not a dead letter: nothing changed")
	case err != nil:
		log.Fatal(err)
	}
}

// RequeueDead gives every dead letter that matches a filter a fresh
// start, in short batches; CountDead is its dry run. A named consumer's
// dead letters are requeued the same way, on its ConsumerStore.
// (Compiled, not run: it needs a database.)
func ExampleStore_RequeueDead() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/shop?interpolateParams=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := mysql.New(db, mysql.Options{Table: "orders_outbox"})
	if err != nil {
		log.Fatal(err)
	}

	// Dead OrderPaid events, written over an hour ago, whose last error
	// mentions a timeout.
	filter := mysql.DeadFilter{Type: "OrderPaid", ErrorContains: "timeout", OlderThan: time.Hour}
	n, err := store.CountDead(ctx, filter)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("requeueing %d dead letters", n)
	done, err := store.RequeueDead(ctx, filter, mysql.RequeueOptions{BatchSize: 500})
	if err != nil {
		log.Fatalf("after requeueing %d: %v", done, err)
	}
	log.Printf("requeued %d", done)
}
