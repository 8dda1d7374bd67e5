// Package postgres is the outbox store for PostgreSQL 13 and later (xid8
// and pg_current_xact_id), on github.com/jackc/pgx/v5: the same contract
// as store/mysql (backend.Store, SettleClaimer, HeadStartLeaser,
// OrderedHeadStartLeaser, HeadStartEnder, the operator contract backend.Outbox with named
// consumers, retention), checked by the same backendtest suites.
//
// The store reads and claims through a *sql.DB on pgx's stdlib driver:
//
//	import _ "github.com/jackc/pgx/v5/stdlib"
//
//	db, err := sql.Open("pgx", dsn) // or stdlib.OpenDBFromPool(pool)
//	store, err := postgres.New(db, postgres.Options{Table: "outbox"})
//	err = store.Migrate(ctx) // at start-up, from every instance
//
// Messages are written in the caller's transaction, whichever API the
// service uses. With database/sql, pass the *sql.Tx:
//
//	tx, err := db.BeginTx(ctx, nil)
//	// ... the state change ...
//	err = store.Enqueue(ctx, tx, nil, outbox.Message{ID: id, Key: orderID, Type: "OrderPlaced", Payload: body})
//	err = tx.Commit()
//
// With pgx's own API (pgx.Tx from a *pgx.Conn or *pgxpool.Pool), wrap it
// with PgxTx:
//
//	tx, err := pool.Begin(ctx)
//	// ... the state change ...
//	err = store.Enqueue(ctx, postgres.PgxTx(tx), nil, msg)
//	err = tx.Commit(ctx)
//
// A rejected Enqueue (a duplicate ID, an invalid message) writes nothing
// and does not abort the caller's transaction.
//
// The outbox is a log each consumer reads past a position of its own,
// below the oldest transaction that may still write to it (so that none
// is skipped whatever the commit order). A claim records one range per
// batch and moves the position, both committed before any sink call; a
// settle that publishes the whole batch deletes the range, and only a
// message that failed, is dead, was released or waits behind its key gets
// a row of its own. A writer's after-commit publish (Worker.PublishNow
// after Enqueue with a HeadStart) runs under the head start its
// transaction took, with or without ordering, and records its outcome in
// one update of the message. Claims and settles commit without waiting
// for the WAL flush (synchronous_commit off, for those transactions
// only): a server crash can forget their last moments, which costs
// duplicates, never a message. Every time that decides delivery is the
// server's (statement_timestamp()). store/postgres/LOG-DESIGN.md has the
// design.
//
// Enqueue notifies the table's channel (pg_notify, delivered at commit);
// a Listener turns notifications into Worker.Notify calls, so that a
// commit wakes an idle worker at once. Polling stays the fallback:
//
//	l, err := store.Listener(postgres.ListenerOptions{})
//	go l.Run(ctx, worker.Notify)
//
// Named consumers (AddConsumer, Consumer) are handed messages in the
// order of their writers' transaction IDs, only once those transactions
// have ended, so that none is skipped whatever the commit order; see
// docs/postgres-store.md for the rule and its price.
//
// What PostgreSQL text cannot hold: a NUL character. IDs and header
// names and values that contain one are rejected with
// outbox.ErrInvalidMessage; keys and types are bytea and keep any bytes;
// error texts are stored with NUL as U+FFFD.
package postgres
