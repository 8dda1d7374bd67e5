package activityservice

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	inboxmysql "github.com/outboxrelay/outboxrelay/inbox/mysql"
	"github.com/outboxrelay/outboxrelay/internal/dsnsafe"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxprom"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// InboxConsumer is the inbox's consumer name: every instance of
// activity-service records its processed room events under it.
const InboxConsumer = "activity-service"

// App is activity-service: its MySQL database (activity tables, inbox,
// outbox), the durable consumer of room-service's stream, the outbox
// worker that publishes level-ups, and the HTTP listeners. Its
// svckit.Shell runs them (Start, Run) and stops them (Shutdown) in the
// shell's drain order: readiness fails, the drain delay passes, HTTP
// drains, the consumer (its message in hand finishes, its transaction
// and its ack; the rest of its batch goes back to JetStream), the outbox
// worker (its publish in flight is recorded) and the inbox's retention
// stop, and NATS (drained: acks in flight reach the server), then MySQL,
// close last.
type App struct {
	cfg Config
	log *slog.Logger
	db  *sql.DB
	js  *svckit.JetStream
	// natsClosed closes when the NATS connection has closed (after the
	// drain at shutdown).
	natsClosed chan struct{}
	inbox      *inboxmysql.Inbox
	store      *mysql.Store
	worker     *outbox.Worker
	consumer   *roomConsumer
	metrics    *prometheus.Registry
	// Shell runs the listeners and the background work, and drains.
	*svckit.Shell
}

// NewApp opens MySQL (waiting for it), migrates the activity tables, the
// inbox and the outbox, connects to NATS (waiting for room-service's
// stream), creates the durable consumer and the level-up stream, and
// builds the worker and the HTTP servers. Nothing runs yet.
func NewApp(ctx context.Context, cfg Config, logger *slog.Logger) (*App, error) {
	cfg = cfg.WithDefaults()
	if cfg.NodeID == "" {
		host, _ := os.Hostname()
		cfg.NodeID = host + "-" + strconv.Itoa(os.Getpid())
	}
	a := &App{cfg: cfg, log: logger, natsClosed: make(chan struct{})}
	a.Shell = svckit.NewShell(svckit.ShellOptions{Name: "activity-service", Logger: logger, HTTP: cfg.HTTP, ShutdownTimeout: cfg.ShutdownTimeout,
		WorkStopped: "consumer, outbox worker and inbox retention stopped", Closed: "nats and mysql closed", Close: a.closeResources})
	m := cfg.MySQL
	var err error
	if m.DSN, err = withLockWaitTimeout(m.DSN, lockWaitTimeout(cfg.Rooms)); err != nil {
		return nil, err
	}
	if err := a.Build(ctx, m, a.build); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *App) build(ctx context.Context, db *sql.DB) error {
	a.db = db
	if err := migrate(ctx, a.db); err != nil {
		return err
	}
	a.metrics = prometheus.NewRegistry()
	a.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	deliveries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "activity_deliveries_total",
		Help: "Room events delivered by JetStream, by outcome: processed, duplicate (absorbed by the inbox), ignored, unknown, malformed, failed, ack_failed.",
	}, []string{"outcome"})
	a.metrics.MustRegister(deliveries)
	inboxMetrics, err := outboxprom.NewInboxMetrics(a.metrics, outboxprom.InboxOptions{Consumers: []string{InboxConsumer}})
	if err != nil {
		return err
	}
	ib, err := inboxmysql.New(a.db, inboxmysql.Options{Consumer: InboxConsumer, Observer: inboxMetrics, Logger: a.log})
	if err != nil {
		return err
	}
	if err := ib.Migrate(ctx); err != nil {
		return err
	}
	store, err := mysql.New(a.db, mysql.Options{Table: a.cfg.Outbox.Table})
	if err != nil {
		return err
	}
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	a.inbox, a.store = ib, store
	if err := a.connectNATS(); err != nil {
		return err
	}
	cons, err := a.roomsConsumer(ctx)
	if err != nil {
		return err
	}
	if err := a.buildWorker(ctx); err != nil {
		return err
	}
	r := a.cfg.Rooms
	a.consumer = &roomConsumer{
		cons: cons, inbox: ib, publisher: a.worker, batch: r.FetchBatch, fetchWait: r.FetchWait, retryDelay: r.RetryDelay,
		handleTimeout: handleTimeout(r), deliveries: deliveries, log: a.log,
		proj: &projector{outbox: store, levels: a.cfg.Levels, headStart: a.worker.HeadStart(), now: time.Now},
	}
	a.Serve(a.publicHandler(), a.adminHandler(), slog.String("node_id", a.cfg.NodeID),
		slog.String("stream", r.Stream), slog.String("durable", r.Durable))
	a.Go(func(ctx context.Context) { _ = a.worker.Run(ctx) })
	a.Go(a.runInboxRetention)
	a.Go(a.consumer.run)
	return nil
}

// buildWorker builds the outbox worker that publishes level-ups to the
// level-up stream (created when missing) through sink/natsjs.
func (a *App) buildWorker(ctx context.Context) error {
	o := a.cfg.Outbox
	sink, err := a.js.Sink(ctx, o.stream(), a.log)
	if err != nil {
		return err
	}
	opts, err := o.workerOptions()
	if err != nil {
		return err
	}
	observer, err := outboxprom.New(a.metrics, outboxprom.Options{Name: opts.Name, Stats: a.store})
	if err != nil {
		return err
	}
	opts.NodeID, opts.Logger, opts.Observer = a.cfg.NodeID, a.log, observer
	a.worker, err = outbox.NewWorker(a.store, sink, opts)
	return err
}

// connectNATS connects, reconnecting for ever once connected; start-up
// waits up to rooms.startup_timeout for the streams.
func (a *App) connectNATS() error {
	r := a.cfg.Rooms
	js, err := svckit.ConnectJetStream(r.NATSURL, "activity-service "+a.cfg.NodeID, r.StartupTimeout,
		nats.ClosedHandler(func(*nats.Conn) { close(a.natsClosed) }))
	if err != nil {
		return err
	}
	a.js = js
	return nil
}

// roomsConsumer waits for room-service's stream and creates (or updates)
// the durable consumer on it.
func (a *App) roomsConsumer(ctx context.Context) (jetstream.Consumer, error) {
	r := a.cfg.Rooms
	var cons jetstream.Consumer
	err := a.js.Wait(ctx, fmt.Sprintf("stream %q (room-service creates it)", r.Stream), func(ctx context.Context) error {
		var err error
		cons, err = a.js.JS.CreateOrUpdateConsumer(ctx, r.Stream, consumerConfig(r))
		return err
	})
	return cons, err
}

// natsCloseWait bounds the wait for the NATS connection to close: its
// drain timeout, and a margin.
const natsCloseWait = nats.DefaultDrainTimeout + 5*time.Second

// closeResources drains NATS (acks in flight reach the server) and
// closes MySQL.
func (a *App) closeResources() error {
	if a.js != nil {
		if err := a.js.Conn.Drain(); err != nil {
			a.js.Conn.Close()
		}
		// The drain ends at nats.go's DrainTimeout (30s) at the latest.
		select {
		case <-a.natsClosed:
		case <-time.After(natsCloseWait):
			a.log.Warn("nats: connection not closed in time; going on")
		}
	}
	return a.db.Close()
}

// runInboxRetention deletes processed IDs older than inbox.retention,
// right away and then every inbox.retention_interval, until ctx ends.
func (a *App) runInboxRetention(ctx context.Context) {
	a.cfg.Inbox.Run(ctx, a.log, "inbox", func(ctx context.Context, age time.Duration, batch int) (int64, error) {
		n, err := a.inbox.Purge(ctx, age, batch)
		return int64(n), err
	})
}

// handleTimeout bounds the processing of one message: well within
// AckWait, so that JetStream does not deliver it again while it is in
// hand.
func handleTimeout(r RoomsConfig) time.Duration { return r.AckWait * 3 / 4 }

// lockWaitTimeout is the sessions' innodb_lock_wait_timeout: half the
// handle timeout, in whole seconds (at least 1). The server then ends a
// transaction's lock wait itself (the inbox retries it) before the
// handler's context does: a context that ends mid-statement closes the
// connection, and the server would keep its transaction waiting, locks
// and all, until its own timeout (50s by default), holding up the
// message's redelivery.
func lockWaitTimeout(r RoomsConfig) int { return max(1, int(handleTimeout(r)/2/time.Second)) }

// withLockWaitTimeout sets innodb_lock_wait_timeout on every session of
// dsn, unless dsn sets it already.
func withLockWaitTimeout(dsn string, seconds int) (string, error) {
	cfg, err := dsnsafe.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("mysql: dsn: %w", err)
	}
	if _, ok := cfg.Params["innodb_lock_wait_timeout"]; ok {
		return dsn, nil
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["innodb_lock_wait_timeout"] = strconv.Itoa(seconds)
	return cfg.FormatDSN(), nil
}
