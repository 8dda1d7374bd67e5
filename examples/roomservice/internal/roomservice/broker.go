package roomservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxprom"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// NATSConfig is the nats block: room-service's events relayed into NATS
// JetStream as well, for other services (activity-service) to consume.
// The Tencent IM path is unchanged: the broker is a named consumer of
// room_outbox (Store.AddConsumer) with a worker and a status of its own,
// so that neither channel's failures hold up the other. Its worker runs
// with the outbox_worker block's settings (and not when it is disabled);
// an event reaches the stream a few seconds after its command (the
// outbox's head start for the after-commit path, then a poll_interval).
type NATSConfig struct {
	// JetStreamConfig is where the events go. An empty URL (the default):
	// no broker, the events go to the sink only. Its URL is given in
	// NATS_URL or the file NATS_URL_FILE names.
	JetStreamConfig `yaml:",inline"`
	// Consumer is the named consumer of room_outbox that delivers to
	// NATS. Defaults to "broker". It is registered at start-up, from then
	// on (mysql.StartNow): earlier events are not relayed. Once
	// registered, retention waits for it: when the broker is switched
	// off for good, remove it (outboxctl consumers remove).
	Consumer string `yaml:"consumer"`
}

// DefaultNATSConsumer is the nats block's default consumer name.
const DefaultNATSConsumer = "broker"

// Enabled reports whether the events are relayed to NATS.
func (c NATSConfig) Enabled() bool { return c.URL != "" }

func (c NATSConfig) withDefaults() NATSConfig {
	c.JetStreamConfig = c.JetStreamConfig.withDefaults()
	svckit.OrDefault(&c.Consumer, DefaultNATSConsumer)
	return c
}

func (c NATSConfig) validate() error {
	if !c.Enabled() {
		return nil
	}
	errs := []error{c.JetStreamConfig.validate("nats")}
	// Store.Consumer checks the name without touching a database.
	if _, err := (&mysql.Store{}).Consumer(c.Consumer); err != nil {
		errs = append(errs, fmt.Errorf("config: nats.consumer: %w", err))
	}
	return errors.Join(errs...)
}

// newBroker connects to NATS (waiting up to startup_timeout), makes sure
// the stream exists, registers the named consumer and builds its worker
// from the outbox_worker block, observed under the consumer's label. The
// connection closes with the App's resources.
func (a *App) newBroker(ctx context.Context, store *mysql.Store, opts outbox.WorkerOptions) (*outbox.Worker, error) {
	sink, nc, err := a.jetStreamSink(ctx, a.cfg.NATS.JetStreamConfig)
	if err != nil {
		return nil, err
	}
	w, err := a.brokerWorker(ctx, sink, store, opts)
	if err != nil {
		nc.Close()
		return nil, err
	}
	a.closers = append(a.closers, nc.Close)
	return w, nil
}

// brokerWorker registers the named consumer and builds its worker.
func (a *App) brokerWorker(ctx context.Context, sink outbox.Sink, store *mysql.Store, opts outbox.WorkerOptions) (*outbox.Worker, error) {
	c := a.cfg.NATS
	if err := store.AddConsumer(ctx, c.Consumer, mysql.StartNow); err != nil && !errors.Is(err, mysql.ErrConsumerExists) {
		return nil, err
	}
	cs, err := store.Consumer(c.Consumer)
	if err != nil {
		return nil, err
	}
	observer, err := outboxprom.New(a.metrics, outboxprom.Options{Name: opts.Name, Consumer: c.Consumer, Stats: cs, StatsInterval: a.cfg.MetricsStatsInterval})
	if err != nil {
		return nil, err
	}
	// Retention is the table's (the default worker's), and waits for this
	// consumer.
	opts.Observer, opts.Retention = observer, 0
	return outbox.NewWorker(cs, sink, opts)
}

// runBroker runs the broker's worker until ctx ends.
func (a *App) runBroker(ctx context.Context) {
	a.log.Info("relaying events to NATS JetStream", slog.String("nats", svckit.RedactNATSURL(a.cfg.NATS.URL)),
		slog.String("stream", a.cfg.NATS.Stream), slog.String("subjects", a.cfg.NATS.SubjectPrefix+".>"), slog.String("consumer", a.cfg.NATS.Consumer))
	_ = a.broker.Run(ctx)
}
