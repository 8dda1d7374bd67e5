package roomservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	"github.com/outboxrelay/outboxrelay/internal/dsnsafe"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxprom"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
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
	// URL is the NATS server, or several separated by commas, e.g.
	// "nats://nats:4222". It may hold credentials (user:password@ or
	// token@), so give it in NATS_URL or the file NATS_URL_FILE names; the
	// environment wins. It is never printed with them. Empty (the
	// default): no broker, the events go to Tencent IM only.
	URL string `yaml:"url"`
	// Stream is the JetStream stream the events go to. Defaults to
	// "ROOMS". Start-up creates it, with subjects SubjectPrefix.> and the
	// Duplicates window, when it does not exist; an existing stream is
	// the operator's and is left as it is.
	Stream string `yaml:"stream"`
	// SubjectPrefix starts every subject: an event goes to
	// <prefix>.<event_type>.<room_id> (sink/natsjs's default mapping).
	// Defaults to "rooms".
	SubjectPrefix string `yaml:"subject_prefix"`
	// Consumer is the named consumer of room_outbox that delivers to
	// NATS. Defaults to "broker". It is registered at start-up, from then
	// on (mysql.StartNow): earlier events are not relayed. Once
	// registered, retention waits for it: when the broker is switched
	// off for good, remove it (outboxctl consumers remove).
	Consumer string `yaml:"consumer"`
	// Duplicates is the duplicate window of a stream start-up creates:
	// a redelivery (a worker that died between the stream's
	// acknowledgement and recording it) within it is discarded by event
	// ID. Defaults to 10m.
	Duplicates time.Duration `yaml:"duplicates"`
	// StartupTimeout is how long start-up waits for NATS and the stream.
	// Defaults to 1m.
	StartupTimeout time.Duration `yaml:"startup_timeout"`
}

// The nats block's defaults.
const (
	DefaultNATSStream         = "ROOMS"
	DefaultNATSSubjectPrefix  = "rooms"
	DefaultNATSConsumer       = "broker"
	DefaultNATSDuplicates     = 10 * time.Minute
	DefaultNATSStartupTimeout = time.Minute
)

// Enabled reports whether the events are relayed to NATS.
func (c NATSConfig) Enabled() bool { return c.URL != "" }

func (c NATSConfig) withDefaults() NATSConfig {
	svckit.OrDefault(&c.Stream, DefaultNATSStream)
	svckit.OrDefault(&c.SubjectPrefix, DefaultNATSSubjectPrefix)
	svckit.OrDefault(&c.Consumer, DefaultNATSConsumer)
	svckit.OrDefault(&c.Duplicates, DefaultNATSDuplicates)
	svckit.OrDefault(&c.StartupTimeout, DefaultNATSStartupTimeout)
	return c
}

func (c NATSConfig) validate() error {
	if !c.Enabled() {
		return nil
	}
	var errs []error
	if _, err := svckit.NATSURLs(c.URL); err != nil {
		errs = append(errs, fmt.Errorf("config: nats.url: %w", err))
	}
	if strings.ContainsAny(c.Stream, " \t.*>/\\") || strings.ContainsFunc(c.Stream, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		errs = append(errs, fmt.Errorf("config: nats.stream %q: must be a stream name (no spaces, control characters, '.', '*', '>', '/' or '\\')", c.Stream))
	}
	// natsjs.New checks the prefix, with nothing to connect to.
	if _, err := natsjs.New(natsjs.Config{JetStream: noJetStream{}, Prefix: c.SubjectPrefix}); err != nil {
		errs = append(errs, fmt.Errorf("config: nats.subject_prefix: %w", err))
	}
	// Store.Consumer checks the name without touching a database.
	if _, err := (&mysql.Store{}).Consumer(c.Consumer); err != nil {
		errs = append(errs, fmt.Errorf("config: nats.consumer: %w", err))
	}
	if c.Duplicates < 0 || c.StartupTimeout < 0 {
		errs = append(errs, fmt.Errorf("config: nats.duplicates %v, startup_timeout %v: must not be negative", c.Duplicates, c.StartupTimeout))
	}
	return errors.Join(errs...)
}

// noJetStream stands in for a connection when only a sink's
// configuration is checked; it is never called.
type noJetStream struct{ jetstream.JetStream }

func (c NATSConfig) redacted() NATSConfig {
	c.URL = svckit.RedactNATSURL(c.URL)
	return c
}

// broker relays room_outbox to NATS JetStream: a connection, and the
// worker of the named consumer that publishes through sink/natsjs.
type broker struct {
	nc     *nats.Conn
	worker *outbox.Worker
}

// newBroker connects to NATS (waiting up to startup_timeout), makes sure
// the stream exists, registers the named consumer and builds its worker
// from the outbox_worker block, observed under the consumer's label.
func (a *App) newBroker(ctx context.Context, store *mysql.Store, opts outbox.WorkerOptions) (*broker, error) {
	c := a.cfg.NATS
	nc, err := nats.Connect(c.URL, nats.Name("room-service "+a.cfg.NodeID), nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true), nats.ReconnectWait(time.Second))
	if err != nil {
		return nil, a.natsErr("connect", err)
	}
	b := &broker{nc: nc}
	if err := a.buildBroker(ctx, b, store, opts); err != nil {
		nc.Close()
		return nil, err
	}
	return b, nil
}

func (a *App) buildBroker(ctx context.Context, b *broker, store *mysql.Store, opts outbox.WorkerOptions) error {
	c := a.cfg.NATS
	js, err := jetstream.New(b.nc)
	if err != nil {
		return a.natsErr("jetstream", err)
	}
	if err := a.ensureStream(ctx, js); err != nil {
		return err
	}
	sink, err := natsjs.New(natsjs.Config{JetStream: js, Prefix: c.SubjectPrefix, ExpectStream: c.Stream, Logger: a.log})
	if err != nil {
		return err
	}
	if err := store.AddConsumer(ctx, c.Consumer, mysql.StartNow); err != nil && !errors.Is(err, mysql.ErrConsumerExists) {
		return err
	}
	cs, err := store.Consumer(c.Consumer)
	if err != nil {
		return err
	}
	observer, err := outboxprom.New(a.metrics, outboxprom.Options{Name: opts.Name, Consumer: c.Consumer, Stats: cs, StatsInterval: a.cfg.MetricsStatsInterval})
	if err != nil {
		return err
	}
	// Retention is the table's (the default worker's), and waits for this
	// consumer.
	opts.Observer, opts.Retention = observer, 0
	b.worker, err = outbox.NewWorker(cs, sink, opts)
	return err
}

// ensureStream waits up to nats.startup_timeout for JetStream to answer,
// and creates the stream when it does not exist.
func (a *App) ensureStream(ctx context.Context, js jetstream.JetStream) error {
	c := a.cfg.NATS
	err := svckit.WaitFor(ctx, c.StartupTimeout, func(ctx context.Context) error {
		_, err := js.Stream(ctx, c.Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = js.CreateStream(ctx, natsjs.StreamConfig(c.Stream, c.SubjectPrefix, c.Duplicates))
			if err == nil {
				a.log.InfoContext(ctx, "nats: stream created", slog.String("stream", c.Stream), slog.String("subjects", c.SubjectPrefix+".>"))
			}
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				err = nil // another instance created it
			}
		}
		return err
	})
	if err != nil {
		return a.natsErr(fmt.Sprintf("stream %q not available within %v", c.Stream, c.StartupTimeout), err)
	}
	return nil
}

// natsErr wraps a NATS error with the server list, credentials redacted.
func (a *App) natsErr(what string, err error) error {
	for _, s := range svckit.NATSSecrets(a.cfg.NATS.URL) {
		err = dsnsafe.Err(err, s)
	}
	return fmt.Errorf("nats %s: %s: %w", svckit.RedactNATSURL(a.cfg.NATS.URL), what, err)
}

// runBroker runs the broker's worker until ctx ends.
func (a *App) runBroker(ctx context.Context) {
	a.log.Info("relaying events to NATS JetStream", slog.String("nats", svckit.RedactNATSURL(a.cfg.NATS.URL)),
		slog.String("stream", a.cfg.NATS.Stream), slog.String("subjects", a.cfg.NATS.SubjectPrefix+".>"), slog.String("consumer", a.cfg.NATS.Consumer))
	_ = a.broker.worker.Run(ctx)
}
