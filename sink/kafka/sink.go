package kafka

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// Sink produces messages to Kafka. It is safe for concurrent use: the
// worker calls Publish from up to WorkerOptions.Concurrency goroutines
// at once, and the records of calls that overlap go out in one produce
// request.
type Sink struct {
	cl             *kgo.Client
	owned          bool // the sink made cl and closes it
	topic          string
	topicFor       func(outbox.Message) (string, error)
	maxRecordBytes int
	log            *slog.Logger
	password       string // scrubbed from error texts; "" with a caller's client

	// The client that takes a record alone, made on first use (see
	// Publish).
	aloneOpts []kgo.Opt
	aloneSem  chan struct{} // one record at a time
	mu        sync.Mutex    // guards alone and closed
	alone     *kgo.Client
	closed    atomic.Bool

	watch connWatch // of the clients the sink made
}

var _ outbox.Sink = (*Sink)(nil)

// New validates cfg and returns a sink. With Config.Seeds it makes a
// client of its own, which connects on first use, with these settings:
// the brokers' acknowledgement from every in-sync replica (acks=all) and
// idempotent production, franz-go's defaults, so that a record retried
// by the client is written once and the records of one partition stay
// in order; no lingering (ProducerLinger(0)), so that a record goes out
// as soon as the connection is free, and the records that the worker's
// other goroutines produce meanwhile make the next batch; batches of at
// most MaxRecordBytes; the default partitioner, which hashes a key with
// murmur2 as the Java client does, so that one key always maps to one
// partition (while the topic's partition count stays the same). It does
// not touch the brokers.
func New(cfg Config) (*Sink, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Sink{
		topic: cfg.Topic, topicFor: cfg.TopicFor, maxRecordBytes: cfg.MaxRecordBytes, log: cfg.Logger,
		password: string(cfg.SASL.Password), aloneSem: make(chan struct{}, 1),
	}
	if cfg.Client != nil {
		checkCallerClient(cfg.Client, cfg.Logger)
		s.cl = cfg.Client
		s.aloneOpts = append(withoutConsumerOpts(cfg.Client.Opts()), kgo.ProducerLinger(0))
		return s, nil
	}
	opts, err := cfg.clientOpts()
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.WithHooks(&s.watch))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, errors.New(s.scrub("kafka: making the client: " + err.Error()))
	}
	s.cl, s.owned, s.aloneOpts = cl, true, opts
	return s, nil
}

// Publish produces msg as Record makes it and waits for the brokers'
// acknowledgement (acks=all), bounded by ctx (the worker's
// PublishTimeout). Errors are classified as the package documentation
// says.
//
// When the broker refuses the record itself (too large for the topic,
// invalid, corrupt), it refuses its whole batch, and franz-go fails every
// record then buffered for the partition: records of other Publish calls
// share the error. So Publish sends such a record once more, alone,
// through a second client that takes one record at a time: if that is
// refused too, the error is permanent; if it goes through, Publish
// returns nil.
//
// When ctx ends first, Publish returns at once; the record may still be
// written (the client does not cancel a request already sent), which the
// worker's next attempt then duplicates: consumers deduplicate by
// HeaderEventID. When the deadline passed and the sink's own client
// failed to connect, the error is that of the connection: Unavailable
// for refused credentials or a certificate that does not verify.
func (s *Sink) Publish(ctx context.Context, msg outbox.Message) error {
	rec, err := s.Record(msg)
	if err != nil {
		return err
	}
	if s.closed.Load() {
		return s.classify(ctx, msg.ID, rec.Topic, ErrClosed, false)
	}
	if dropped := reservedIn(msg.Headers); len(dropped) > 0 {
		s.log.DebugContext(ctx, "kafka: reserved headers not forwarded; the message is sent without them",
			slog.String("event_id", msg.ID), slog.Any("headers", dropped))
	}
	err = produce(ctx, s.cl, rec)
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) && ctx.Err() == nil {
		if class, _ := Code(ke.Code); class == Permanent {
			alone := &kgo.Record{Topic: rec.Topic, Key: rec.Key, Value: rec.Value, Headers: rec.Headers}
			aerr := s.produceAlone(ctx, alone)
			if aerr == nil {
				s.log.InfoContext(ctx, "kafka: a record the broker refused in a batch went through alone",
					slog.String("event_id", msg.ID), slog.String("topic", rec.Topic), slog.String("batch_error", ke.Message))
				return nil
			}
			return s.classify(ctx, msg.ID, rec.Topic, aerr, true)
		}
	}
	return s.classify(ctx, msg.ID, rec.Topic, err, false)
}

// produce produces rec through cl and waits for its promise or the end
// of ctx, whichever comes first.
func produce(ctx context.Context, cl *kgo.Client, rec *kgo.Record) error {
	done := make(chan error, 1)
	cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done:
			return err
		default:
			return ctx.Err()
		}
	}
}

// produceAlone produces rec through the client that takes one record at
// a time, so that the record is a batch of its own.
func (s *Sink) produceAlone(ctx context.Context, rec *kgo.Record) error {
	select {
	case s.aloneSem <- struct{}{}:
		defer func() { <-s.aloneSem }()
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return ErrClosed
	}
	if s.alone == nil {
		cl, err := kgo.NewClient(s.aloneOpts...)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		s.alone = cl
	}
	cl := s.alone
	s.mu.Unlock()
	return produce(ctx, cl, rec)
}

// connWatch keeps the error of the last connection a client of the
// sink's failed to set up, until one succeeds: franz-go retries a
// produce whatever the connection's trouble, so a refused SASL login or
// certificate shows only here (a kgo.HookBrokerConnect, which sees the
// dial, TLS handshake and SASL authentication).
type connWatch struct{ last atomic.Pointer[error] }

var _ kgo.HookBrokerConnect = (*connWatch)(nil)

// OnBrokerConnect records err, or forgets the last one when nil.
func (w *connWatch) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		w.last.Store(nil)
		return
	}
	w.last.Store(&err)
}

// lastErr is the error of the last failed connection, or nil.
func (w *connWatch) lastErr() error {
	if p := w.last.Load(); p != nil {
		return *p
	}
	return nil
}

// Close closes the clients the sink made: the one made from Config.Seeds
// and the one that takes records alone. It never closes a Config.Client.
// Records not yet acknowledged fail (Publish calls in progress return a
// retryable error), and so does every later Publish. Close is safe to
// call more than once and concurrently with Publish.
func (s *Sink) Close() {
	s.mu.Lock()
	if s.closed.Swap(true) {
		s.mu.Unlock()
		return
	}
	alone := s.alone
	s.mu.Unlock()
	if alone != nil {
		alone.Close()
	}
	if s.owned {
		s.cl.Close()
	}
}
