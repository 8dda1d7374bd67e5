// Package inbox is the consuming side of the outbox: it turns
// at-least-once delivery into exactly-once effects.
//
// The outbox delivers every message at least once, so a consumer can get
// the same message (the same Message.ID) again: after a worker crashed
// between publishing and recording, after a broker redelivered an
// unacknowledged message, or when two instances of the consumer got it at
// the same time. An Inbox remembers which message IDs a consumer has
// processed, and it remembers them in the consumer's own database, in the
// same transaction as the consumer's writes:
//
//	res, err := ib.Process(ctx, msg.ID, func(ctx context.Context, tx *sql.Tx) error {
//		// every write of the message's effect goes through tx
//		_, err := tx.ExecContext(ctx, "UPDATE totals SET n = n + ? WHERE user_id = ?", amount, user)
//		return err
//	})
//	if err != nil {
//		return err // nothing was written: do not acknowledge; the message comes again
//	}
//	ack() // Processed or Duplicate: the effect is in the database exactly once
//
// Either the ID is recorded and the handler's writes are committed, or
// neither is. A message whose ID is recorded is acknowledged without
// running the handler again (Duplicate). Concurrent redeliveries of one
// message, to several goroutines or instances, run the handler's writes
// once: the others wait for the first and then skip, or, if it failed,
// process the message themselves. An error from the handler rolls
// everything back and is returned, so the message can be retried.
//
// # Limits
//
//   - One database per consumer. The handler's writes must go to the
//     database that holds the inbox table, through the transaction it is
//     given. A write elsewhere (another database, a cache, an HTTP call)
//     is not covered: it can happen more than once, or happen although
//     the transaction rolled back.
//   - The handler may run more than once for one message. When the
//     database rolls its transaction back (a deadlock, a lock wait
//     timeout, a lost connection), the inbox calls it again in a fresh
//     transaction; only its writes through the transaction are exactly
//     once. It must return every error the transaction's statements
//     return.
//   - The retention window. The recorded IDs are deleted once they are
//     older than a window the consumer chooses (inbox/mysql: Purge;
//     7 days is the documented default), counted from the commit of the
//     transaction that recorded them, however long the handler ran. A
//     message redelivered after its ID was deleted is processed again. The window must be longer
//     than a message can be late: the outbox's retry horizon plus the
//     broker's redelivery and retention.
//   - Exactly-once is per consumer name. Each consumer (a service, or a
//     separate projection within one) uses its own name; every instance
//     of one consumer uses the same.
//
// # Implementations
//
// inbox/mysql is the Inbox for MySQL and MariaDB, inbox/postgres (a
// module of its own) the Inbox for PostgreSQL; both construct one type,
// inbox/sqlinbox's Inbox, with its Options. inbox/inboxtest is the
// conformance suite an implementation runs. The Observer receives every
// outcome for metrics; outbox/outboxprom exports them to Prometheus.
package inbox
