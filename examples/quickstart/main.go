// Command quickstart shows the outbox loop on a real MySQL or MariaDB in a
// few seconds: events are written in the same transaction as a state
// change, the after-commit publish fails, the command still succeeds, and
// the worker delivers the same events later.
//
//	go run ./examples/quickstart [-dsn 'root@tcp(127.0.0.1:3306)/']
//
// The DSN names a server; the example creates (and afterwards drops) its
// own database on it. It can also come from MYSQL_DSN.
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

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

func main() {
	dsn := flag.String("dsn", envOr("MYSQL_DSN", "root@tcp(127.0.0.1:3306)/"), "MySQL/MariaDB server DSN")
	flag.Parse()
	if err := run(context.Background(), *dsn); err != nil {
		log.Fatal(err)
	}
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func run(ctx context.Context, serverDSN string) error {
	db, cleanup, err := openScratchDB(ctx, serverDSN, "outboxrelay_quickstart")
	if err != nil {
		return err
	}
	defer cleanup()

	store, err := mysql.New(db, mysql.Options{Table: "room_outbox"})
	if err != nil {
		return err
	}
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE rooms (id VARCHAR(64) PRIMARY KEY, members INT NOT NULL)"); err != nil {
		return err
	}

	// A sink standing in for Tencent IM: down for its first two calls.
	var calls atomic.Int32
	sink := outbox.SinkFunc(func(_ context.Context, m outbox.Message) error {
		if calls.Add(1) <= 2 {
			fmt.Printf("  sink: IM unavailable for %s\n", m.ID)
			return errors.New("im: connection refused")
		}
		fmt.Printf("  sink: delivered %s (%s)\n", m.ID, m.Type)
		return nil
	})
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	worker, err := outbox.NewWorker(store, sink, outbox.WorkerOptions{
		Name: "room_outbox", KeyAttr: "room_id", PollInterval: 100 * time.Millisecond, Logger: logger,
	})
	if err != nil {
		return err
	}

	fmt.Println("1. command: create room-1 and write RoomCreated in one transaction")
	msg := outbox.Message{ID: "evt-room-1-created", Key: "room-1", Type: "RoomCreated", Payload: []byte(`{"room_id":"room-1"}`)}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO rooms (id, members) VALUES ('room-1', 0)"); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := store.Enqueue(ctx, tx, &outbox.EnqueueOptions{HeadStart: outbox.DefaultHeadStart}, msg); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
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
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- worker.Run(runCtx) }()
	for rec.Status != outbox.StatusPublished {
		time.Sleep(50 * time.Millisecond)
		if rec, err = store.Get(ctx, msg.ID); err != nil {
			stop()
			<-done
			return err
		}
	}
	stop()
	if err := <-done; err != nil {
		return err
	}
	fmt.Printf("6. outbox: status=%s retry_count=%d last_error=%q\n", rec.Status, rec.Attempts, rec.LastError)
	fmt.Println("7. worker stopped before the database is closed")
	return nil
}

// openScratchDB creates a fresh database on the server and returns a pool on
// it, with a cleanup that closes the pool and drops the database.
func openScratchDB(ctx context.Context, serverDSN, name string) (*sql.DB, func(), error) {
	cfg, err := mysqldrv.ParseDSN(serverDSN)
	if err != nil {
		return nil, nil, fmt.Errorf("bad DSN: %w", err)
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
			return nil, nil, fmt.Errorf("cannot prepare database %s (is MySQL running? pass -dsn): %w", name, err)
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
