package backend

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The operator contract: what tools need of a store beyond delivery. The
// dashboard (outbox/outboxui), outboxctl and outboxprom speak only these
// interfaces, so they work on any store that implements them, as River's
// UI works on any of its drivers. store/mysql implements them (Store is
// an Outbox, each ConsumerStore a Queue), and so does the in-memory store
// of outbox/outboxtest (an Outbox without named consumers).
// backendtest.RunOperatorTests checks an implementation.

// Errors of the operator contract. Stores wrap them with detail; test for
// them with errors.Is.
var (
	// ErrNotDead: Requeue was given a record that exists but is not dead.
	// Only dead letters are requeued, so that a requeue can never make a
	// published event go out again or disturb one in flight.
	ErrNotDead = errors.New("outbox: record is not dead")
	// ErrUnknownConsumer: no consumer of that name is registered.
	ErrUnknownConsumer = errors.New("outbox: no such consumer")
	// ErrConsumerExists: AddConsumer of a name already registered.
	ErrConsumerExists = errors.New("outbox: consumer already exists")
	// ErrNoConsumers: the store keeps no named consumers (the in-memory
	// store).
	ErrNoConsumers = errors.New("outbox: this store has no named consumers")
)

// ListFilter selects records for Lister.List. Empty fields match
// everything; every match is exact (a type "T" does not match "T ").
type ListFilter struct {
	// Status matches the status exactly.
	Status Status
	// Type matches the message type exactly.
	Type string
	// Key matches the message key exactly, byte for byte.
	Key string
	// ErrorContains matches records whose last error contains it,
	// literally (no wildcards).
	ErrorContains string
	// OlderThan matches records written at least this long ago, by the
	// store's clock.
	OlderThan time.Duration
	// MinAttempts matches records with at least this many failed worker
	// attempts: with Status pending and MinAttempts 1, the records that
	// are failing and will be tried again.
	MinAttempts int
	// AfterSeq pages: only records with a larger Seq.
	AfterSeq int64
	// Limit is the page size; 1 to MaxClaimLimit.
	Limit int
}

// Validate reports a filter no store accepts, naming the field and the
// value (a store prefixes it with what it was doing).
func (f ListFilter) Validate() error {
	switch {
	case f.Limit < 1 || f.Limit > MaxClaimLimit:
		//lint:ignore ST1005 the error starts with the field it is about
		return fmt.Errorf("Limit %d: must be 1 to %d", f.Limit, MaxClaimLimit)
	case f.OlderThan < 0:
		return fmt.Errorf("OlderThan %v: must not be negative", f.OlderThan)
	case f.MinAttempts < 0:
		return fmt.Errorf("MinAttempts %d: must not be negative", f.MinAttempts)
	case f.AfterSeq < 0:
		return fmt.Errorf("AfterSeq %d: must not be negative", f.AfterSeq)
	case f.Status != "" && f.Status != StatusPending && f.Status != StatusPublished && f.Status != StatusDead:
		return fmt.Errorf("Status %q: must be pending, published or dead", f.Status)
	}
	return nil
}

// DeadFilter selects dead letters. Empty fields match everything; every
// match is exact.
type DeadFilter struct {
	// Type matches the message type exactly.
	Type string
	// Key matches the message key exactly, byte for byte.
	Key string
	// OlderThan matches records written at least this long ago, by the
	// store's clock.
	OlderThan time.Duration
	// ErrorContains matches records whose last error contains it,
	// literally.
	ErrorContains string
}

// Defaults and bounds of RequeueOptions.
const (
	DefaultRequeueBatch = 500
	MaxRequeueBatch     = 10_000
)

// RequeueOptions bounds Requeuer.RequeueDead. The zero value means the
// defaults.
type RequeueOptions struct {
	// BatchSize is how many records one step requeues, so that no step
	// holds many records for long. Defaults to DefaultRequeueBatch; at
	// most MaxRequeueBatch.
	BatchSize int
	// Limit is the most records requeued in all; 0 means every match.
	Limit int
}

// WithDefaults returns o with its defaults filled in, or an error naming
// the field that no store accepts (a store prefixes it with what it was
// doing).
func (o RequeueOptions) WithDefaults() (RequeueOptions, error) {
	if o.BatchSize == 0 {
		o.BatchSize = DefaultRequeueBatch
	}
	switch {
	case o.BatchSize < 0 || o.BatchSize > MaxRequeueBatch:
		return o, fmt.Errorf("BatchSize %d: must be 1 to %d (0 for the default)", o.BatchSize, MaxRequeueBatch)
	case o.Limit < 0:
		//lint:ignore ST1005 the error starts with the field it is about
		return o, fmt.Errorf("Limit %d: must not be negative (0 for every match)", o.Limit)
	}
	return o, nil
}

// Lister lists a consumer's records for operators.
type Lister interface {
	// List returns a page of records that match f, in Seq (insert) order;
	// pass the last one's Seq as the next AfterSeq. A page costs the same
	// deep in a large store (no OFFSET). Records the store cannot decode
	// are listed with the fields it could read.
	List(ctx context.Context, f ListFilter) ([]Record, error)
}

// Requeuer gives dead letters a fresh start: status pending, attempts 0,
// due at once (under Ordering, once no record of its key is in flight).
// Their last error stays until the next attempt.
type Requeuer interface {
	// Requeue requeues the dead letter with message ID id. It returns an
	// error wrapping ErrNotFound if there is no such record, and ErrNotDead
	// if it is not dead (nothing is changed).
	Requeue(ctx context.Context, id string) error
	// CountDead counts the dead letters that match f: a dry run of
	// RequeueDead.
	CountDead(ctx context.Context, f DeadFilter) (int, error)
	// RequeueDead requeues the dead letters that match f, in steps of at
	// most opts.BatchSize, and returns how many. It stops at the first
	// error, having kept the steps before it.
	RequeueDead(ctx context.Context, f DeadFilter, opts RequeueOptions) (int, error)
}

// Queue is one consumer's delivery state as operators see it: its
// records, its backlog and its dead letters.
type Queue interface {
	Store
	StatsReader
	Lister
	Requeuer
}

// StartFrom says where a consumer added to a table with history starts.
type StartFrom int

const (
	// StartNow: only messages written from now on. (Messages whose
	// transaction was still open at that moment may or may not be
	// included.)
	StartNow StartFrom = iota + 1
	// StartBeginning: every message still retained, and everything new.
	StartBeginning
)

// String returns the word outboxctl uses.
func (f StartFrom) String() string {
	switch f {
	case StartNow:
		return "now"
	case StartBeginning:
		return "beginning"
	}
	return fmt.Sprintf("StartFrom(%d)", int(f))
}

// ConsumerInfo describes a registered named consumer.
type ConsumerInfo struct {
	Name string
	// StartSeq is the first message (Record.Seq) the consumer gets
	// without backfill.
	StartSeq int64
	// Backfilling reports that older messages are still being handed
	// over; BackfillAt is the last Seq handed over so far.
	Backfilling bool
	BackfillAt  int64
	// CreatedAt is when it was added (UTC, the store's clock).
	CreatedAt time.Time
	// Removing reports a removal that started and has not finished (run
	// RemoveConsumer again to finish it). Such a consumer gets nothing.
	Removing bool
}

// Outbox is one outbox (a table, for store/mysql) as operators see it:
// the default consumer's Queue, and its named consumers.
type Outbox interface {
	Queue
	// Name names the outbox (the table's name).
	Name() string
	// LastSeq returns the Seq of the last message written (0 for none):
	// its growth is the rate of writes.
	LastSeq(ctx context.Context) (int64, error)
	// Consumers lists the named consumers, by name. A store without named
	// consumers returns none.
	Consumers(ctx context.Context) ([]ConsumerInfo, error)
	// AddConsumer registers a named consumer, starting from now or from
	// the beginning. It returns an error wrapping ErrConsumerExists if the
	// name is taken, and ErrNoConsumers from a store without them.
	AddConsumer(ctx context.Context, name string, from StartFrom) error
	// RemoveConsumer drops a named consumer and its delivery state, and
	// returns how many of its records it deleted; ErrUnknownConsumer if
	// there is none of that name.
	RemoveConsumer(ctx context.Context, name string) (int, error)
	// ConsumerQueue returns the Queue of the named consumer; "" is the
	// default consumer (the Outbox itself). It checks the name, not the
	// registry: calls on an unregistered consumer's Queue return
	// ErrUnknownConsumer.
	ConsumerQueue(name string) (Queue, error)
}
