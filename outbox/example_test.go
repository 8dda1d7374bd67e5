package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"log"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// A service enqueues events in its own transaction, publishes them right
// after commit, and runs a worker that delivers whatever the fast path
// could not. (Compiled, not run: it needs a database.)
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/rooms?interpolateParams=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close() // last: after the worker has stopped

	store, err := mysql.New(db, mysql.Options{Table: "room_outbox"})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	sink := outbox.SinkFunc(func(ctx context.Context, m outbox.Message) error {
		slog.InfoContext(ctx, "deliver", "event_id", m.ID) // call IM, a broker, …
		return nil
	})
	worker, err := outbox.NewWorker(store, sink, outbox.WorkerOptions{Name: "room_outbox", KeyAttr: "room_id"})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()

	// One command: state change and event in one transaction.
	msg := outbox.Message{ID: "evt-1", Key: "room-1", Type: "RoomUserJoined", Payload: []byte(`{"user":"u1"}`)}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE rooms SET members = members + 1 WHERE id = ?", "room-1"); err != nil {
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
