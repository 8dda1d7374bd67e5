package mysql

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/outboxrelay/outboxrelay/internal/mysqlerr"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Statements that may be retried are tried this many times in all.
const maxStatementTries = 4

// retryTransient runs op, retrying it with a short exponential backoff
// while it fails with a deadlock, a lock wait timeout or a lost
// connection. op must be safe to repeat: a transaction of its own, or a
// statement that cannot apply twice.
func retryTransient(ctx context.Context, op func() error) error {
	return retryWhile(ctx, IsTransient, op)
}

// retryRolledBack runs op, a transaction of its own, retrying it only
// while the server rolled it back as a deadlock victim (or, on MariaDB,
// for a record changed since its read view): then nothing of it was
// applied, so running it again is exact. Unlike retryTransient it never
// repeats op after a lost connection, whose commit may have applied.
func retryRolledBack(ctx context.Context, op func() error) error {
	return retryWhile(ctx, func(err error) bool { return mysqlerr.Classify(err) == mysqlerr.Deadlock }, op)
}

// retryWhile runs op, retrying it with a short exponential backoff while
// it fails with an error retry accepts, at most maxStatementTries times.
func retryWhile(ctx context.Context, retry func(error) bool, op func() error) error {
	policy := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(20*time.Millisecond),
		backoff.WithMaxInterval(500*time.Millisecond),
		backoff.WithMaxElapsedTime(0),
	)
	return backoff.Retry(func() error {
		err := op()
		if err != nil && !retry(err) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(backoff.WithMaxRetries(policy, maxStatementTries-1), ctx))
}

// execRetrying runs an idempotent statement with retryTransient and
// returns the rows it changed.
func execRetrying(ctx context.Context, db backend.Execer, st statement) (int64, error) {
	var affected int64
	err := retryTransient(ctx, func() error {
		var err error
		affected, err = st.exec(ctx, db)
		return err
	})
	return affected, err
}
