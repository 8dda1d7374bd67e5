package outboxui

import (
	"context"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// Queue is one consumer's delivery state of an outbox: what the
// dashboard reads and repairs. *mysql.Store (the table's default
// consumer) and *mysql.ConsumerStore (a named one) satisfy it. Every
// method must be safe for concurrent use and honour ctx.
type Queue interface {
	// Stats reports the backlog: pending, leased, dead, the oldest
	// pending age.
	Stats(ctx context.Context) (backend.Stats, error)
	// List returns a page of records in Seq order (paged by AfterSeq).
	List(ctx context.Context, f mysql.ListFilter) ([]outbox.Record, error)
	// Get returns one record, or an error wrapping outbox.ErrNotFound.
	Get(ctx context.Context, id string) (outbox.Record, error)
	// Requeue gives one dead letter a fresh start; mysql.ErrNotDead if
	// the record is not dead.
	Requeue(ctx context.Context, id string) error
	// CountDead counts the dead letters that match f.
	CountDead(ctx context.Context, f mysql.DeadFilter) (int, error)
	// RequeueDead requeues the dead letters that match f, in batches.
	RequeueDead(ctx context.Context, f mysql.DeadFilter, opts mysql.RequeueOptions) (int, error)
}

var (
	_ Queue = (*mysql.Store)(nil)
	_ Queue = (*mysql.ConsumerStore)(nil)
)

// Outbox is one outbox table with its consumers. MySQL adapts a
// *mysql.Store.
type Outbox interface {
	// Name names the outbox on the page (the table's name).
	Name() string
	// LastSeq is the Seq of the last message written: its growth is the
	// rate of writes.
	LastSeq(ctx context.Context) (int64, error)
	// Consumers lists the named consumers, by name.
	Consumers(ctx context.Context) ([]string, error)
	// Queue returns the delivery state of the named consumer, or of the
	// default consumer for "".
	Queue(consumer string) (Queue, error)
}

// MySQL returns the Outbox of a store/mysql table: its default consumer
// and every named consumer registered on it.
func MySQL(s *mysql.Store) Outbox { return mysqlOutbox{s} }

type mysqlOutbox struct{ s *mysql.Store }

func (m mysqlOutbox) Name() string { return m.s.Table() }

func (m mysqlOutbox) LastSeq(ctx context.Context) (int64, error) { return m.s.LastSeq(ctx) }

func (m mysqlOutbox) Consumers(ctx context.Context) ([]string, error) {
	infos, err := m.s.Consumers(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(infos))
	for _, c := range infos {
		if !c.Removing {
			names = append(names, c.Name)
		}
	}
	return names, nil
}

func (m mysqlOutbox) Queue(consumer string) (Queue, error) {
	if consumer == "" {
		return m.s, nil
	}
	return m.s.Consumer(consumer)
}
