// Command quickstart shows the outbox loop on a real MySQL or MariaDB in a
// few seconds: events are written in the same transaction as a state
// change, the after-commit publish fails, the command still succeeds, and
// the worker delivers the same events later.
//
//	go run ./examples/quickstart [-dsn 'root@tcp(127.0.0.1:3306)/']
//
// The DSN names a server; the example creates (and afterwards drops) its
// own database on it. It can also come from MYSQL_DSN; its password is
// never printed, in usage text or in errors.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/outboxrelay/outboxrelay/examples/internal/localmysql"
	"github.com/outboxrelay/outboxrelay/internal/dsnsafe"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

func main() {
	// The default is named, not shown: a DSN holds a password.
	// The same default as the room-service demo's (localmysql).
	dsn := flag.String("dsn", "", "MySQL/MariaDB server DSN (default $MYSQL_DSN, else "+localmysql.DefaultDSN+")")
	flag.Parse()
	if err := run(context.Background(), localmysql.Choose(*dsn)); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, serverDSN string) error {
	db, cleanup, err := openScratchDB(ctx, serverDSN, "outboxrelay_quickstart")
	if err != nil {
		return err
	}
	defer cleanup()

	store, err := mysql.New(db, mysql.Options{Table: "orders_outbox"})
	if err != nil {
		return err
	}
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY, state VARCHAR(16) NOT NULL)"); err != nil {
		return err
	}
	worker, err := outbox.NewWorker(store, flakySink(), outbox.WorkerOptions{
		Name: "orders_outbox", KeyAttr: "order_id", PollInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}

	fmt.Println("1. command: place order-1 and write OrderPlaced in one transaction")
	msg := outbox.Message{ID: "evt-order-1-placed", Key: "order-1", Type: "OrderPlaced", Payload: []byte(`{"order_id":"order-1"}`)}
	if err := placeOrder(ctx, db, store, msg); err != nil {
		return err
	}
	fmt.Println("2. committed; publishing right after commit")
	if err := worker.PublishNow(ctx, msg); err != nil {
		fmt.Println("3. after-commit publish failed; the command still succeeded:", err)
	}
	rec, err := store.Get(ctx, msg.ID)
	if err != nil {
		return err
	}
	fmt.Printf("4. outbox: status=%s retry_count=%d\n", rec.Status, rec.Attempts)

	fmt.Println("5. starting the worker")
	if rec, err = runUntilPublished(ctx, worker, store, msg.ID); err != nil {
		return err
	}
	fmt.Printf("6. outbox: status=%s retry_count=%d last_error=%q\n", rec.Status, rec.Attempts, rec.LastError)
	fmt.Println("7. worker stopped before the database is closed")
	return nil
}

// flakySink stands in for a downstream API that is down for its first two
// calls.
func flakySink() outbox.Sink {
	var calls atomic.Int32
	return outbox.SinkFunc(func(_ context.Context, m outbox.Message) error {
		if calls.Add(1) <= 2 {
			fmt.Printf("  sink: downstream unavailable for %s\n", m.ID)
			return errors.New("downstream: connection refused")
		}
		fmt.Printf("  sink: delivered %s (%s)\n", m.ID, m.Type)
		return nil
	})
}

// placeOrder is a command: the state change and its event in one
// transaction, the event head-started for the after-commit publish.
func placeOrder(ctx context.Context, db *sql.DB, store *mysql.Store, msg outbox.Message) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, state) VALUES ('order-1', 'placed')"); err != nil {
		return err
	}
	if err := store.Enqueue(ctx, tx, &outbox.EnqueueOptions{HeadStart: outbox.DefaultHeadStart}, msg); err != nil {
		return err
	}
	return tx.Commit()
}

// runUntilPublished runs the worker until message id is published, then
// stops it and waits for it to return.
func runUntilPublished(ctx context.Context, worker *outbox.Worker, store *mysql.Store, id string) (outbox.Record, error) {
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- worker.Run(runCtx) }()
	var (
		rec outbox.Record
		err error
	)
	for err == nil && rec.Status != outbox.StatusPublished {
		time.Sleep(50 * time.Millisecond)
		rec, err = store.Get(ctx, id)
	}
	stop()
	return rec, errors.Join(err, <-done)
}

// openScratchDB creates a fresh database on the server and returns a pool on
// it, with a cleanup that closes the pool and drops the database.
func openScratchDB(ctx context.Context, serverDSN, name string) (*sql.DB, func(), error) {
	cfg, err := dsnsafe.Parse(serverDSN)
	if err != nil {
		return nil, nil, fmt.Errorf("-dsn %w", err)
	}
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, nil, err
	}
	stmts := []string{"DROP DATABASE IF EXISTS `" + name + "`", "CREATE DATABASE `" + name + "`"}
	for _, q := range stmts {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			admin.Close()
			return nil, nil, fmt.Errorf("cannot prepare database %s on %s (is MySQL running? pass -dsn): %w", name, dsnsafe.Target(cfg), dsnsafe.Hide(err, cfg))
		}
	}
	cfg.DBName = name
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		admin.Close()
		return nil, nil, err
	}
	cleanup := func() {
		db.Close()
		_, _ = admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS `"+name+"`")
		admin.Close()
	}
	return db, cleanup, nil
}
