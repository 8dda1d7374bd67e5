package storecore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// InTx runs fn in a transaction of db begun with opts (nil for the
// driver's defaults), committed if fn succeeds and rolled back if not.
// fn's error is returned as it is; those of the begin and the commit
// pass through wrap, unless it is nil.
func InTx(ctx context.Context, db *sql.DB, opts *sql.TxOptions, wrap func(error) error, fn func(tx *sql.Tx) error) error {
	if wrap == nil {
		wrap = func(err error) error { return err }
	}
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return wrap(err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return wrap(err)
	}
	return nil
}

// Column reads the rows of a query of one column, and closes rows. No
// rows are a nil slice.
func Column[T any](rows *sql.Rows) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Found is Get's answer from the rows a lookup of one event ID read
// (at most one, the ID being unique), each split by record into the
// record and the error that decoding its fields met. No row is an error
// wrapping outbox.ErrNotFound; a record that could not all be decoded is
// returned with the fields that could, and the error.
func Found[R any](what, id string, rows []R, record func(R) (outbox.Record, error)) (outbox.Record, error) {
	if len(rows) == 0 {
		return outbox.Record{}, fmt.Errorf("%s: get %q: %w", what, id, outbox.ErrNotFound)
	}
	rec, err := record(rows[0])
	if err != nil {
		return rec, fmt.Errorf("%s: get %q: %w", what, id, err)
	}
	return rec, nil
}

// One runs query, which reads one value, with args on db and returns the
// value; its error passes through wrap.
func One[T any](ctx context.Context, db *sql.DB, wrap func(error) error, query string, args ...any) (T, error) {
	var v T
	if err := db.QueryRowContext(ctx, query, args...).Scan(&v); err != nil {
		var zero T
		return zero, wrap(err)
	}
	return v, nil
}
