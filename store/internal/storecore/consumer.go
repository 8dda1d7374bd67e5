package storecore

// What the stores of named consumers (their ConsumerStores) share.

import (
	"context"
	"database/sql"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// ConsumerQueue is a store's ConsumerQueue (backend.Outbox): the Queue
// of the named consumer, as consumer returns it, or the store's own (the
// default consumer's) for "". An error comes with a nil Queue.
func ConsumerQueue[C backend.Queue](store backend.Queue, name string, consumer func(string) (C, error)) (backend.Queue, error) {
	if name == "" {
		return store, nil
	}
	c, err := consumer(name)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// ConsumerEnqueue is a named consumer's Enqueue of msgs through tx with
// opts, whose head start is the consumer's own: enqueue writes messages
// for every consumer (the Store's Enqueue), due at once, and held writes
// the consumer's records of those with ids, due when the head start
// ends. Without a head start or messages it is enqueue's. Given a
// *sql.DB, both write in one transaction of it (InTx with txOpts and
// wrap), so that the messages and the consumer's records commit
// together. what prefixes the errors.
func ConsumerEnqueue(ctx context.Context, what string, tx backend.Execer, opts *backend.EnqueueOptions, msgs []backend.Message,
	enqueue func(context.Context, backend.Execer, *backend.EnqueueOptions, ...backend.Message) error,
	held func(ctx context.Context, tx backend.Execer, headStart time.Duration, ids []string) error,
	txOpts *sql.TxOptions, wrap func(error) error) error {
	headStart, err := HeadStart(what, opts)
	if err != nil {
		return err
	}
	if headStart == 0 || len(msgs) == 0 {
		return enqueue(ctx, tx, opts, msgs...)
	}
	write := func(tx backend.Execer) error {
		if err := enqueue(ctx, tx, nil, msgs...); err != nil {
			return err
		}
		ids := make([]string, len(msgs))
		for i, m := range msgs {
			ids[i] = m.ID
		}
		return held(ctx, tx, headStart, ids)
	}
	db, ok := tx.(*sql.DB)
	if !ok {
		return write(tx)
	}
	return InTx(ctx, db, txOpts, wrap, func(tx *sql.Tx) error { return write(tx) })
}
