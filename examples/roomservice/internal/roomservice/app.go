package roomservice

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxprom"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// App is room-service: MySQL, the outbox store and worker, the sink
// (Tencent IM, NATS JetStream, Kafka, a webhook or Watermill), the NATS broker
// (optional) and the HTTP API. Its svckit.Shell
// runs them (Start, Run) and stops them (Shutdown) in the shell's drain
// order: readiness fails, the drain delay passes, HTTP drains (commands
// in flight commit; the outbox dashboard's sampler stops), the worker,
// the broker's worker and the command log's retention stop (a publish
// in flight is recorded), and NATS and MySQL close last.
type App struct {
	cfg    Config
	log    *slog.Logger
	db     *sql.DB
	store  *mysql.Store
	worker *outbox.Worker
	// broker relays the events to NATS JetStream: the worker of its
	// named consumer (nil without nats.url).
	broker *outbox.Worker
	svc    *Service
	// closers release the sink's and the broker's connections, after
	// the workers have stopped and before MySQL closes.
	closers []func()
	// metrics is the registry /metrics serves.
	metrics *prometheus.Registry
	// Shell runs the listeners and the background work, and drains.
	*svckit.Shell
}

// NewApp opens MySQL (waiting for it to answer), migrates, and builds the
// sink, the store, the worker and the HTTP servers. Nothing serves yet.
// Zero values in cfg get their defaults (Config.WithDefaults).
func NewApp(ctx context.Context, cfg Config, logger *slog.Logger) (*App, error) {
	cfg = cfg.WithDefaults()
	a := &App{cfg: cfg, log: logger}
	a.Shell = svckit.NewShell(svckit.ShellOptions{Name: "room-service", Logger: logger, HTTP: cfg.HTTP.HTTP,
		ShutdownTimeout: cfg.ShutdownTimeout, WorkStopped: stepWorker, Closed: stepMySQL, Close: a.closeResources})
	if err := a.Build(ctx, cfg.MySQL, a.build); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *App) build(ctx context.Context, db *sql.DB) error {
	a.db = db
	if err := migrateRoomTables(ctx, a.db); err != nil {
		return err
	}
	store, err := mysql.New(a.db, mysql.Options{Table: "room_outbox"})
	if err != nil {
		return err
	}
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	sink, err := a.newSink(ctx)
	if err != nil {
		return err
	}
	opts, err := a.cfg.OutboxWorker.WorkerOptions()
	if err != nil {
		return err
	}
	a.metrics = prometheus.NewRegistry()
	a.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	observer, err := outboxprom.New(a.metrics, outboxprom.Options{Name: opts.Name, Stats: store, StatsInterval: a.cfg.MetricsStatsInterval})
	if err != nil {
		return err
	}
	opts.NodeID, opts.Logger, opts.Observer = a.cfg.NodeID, a.log, observer
	worker, err := outbox.NewWorker(store, sink, opts)
	if err != nil {
		return err
	}
	a.store, a.worker = store, worker
	if a.cfg.NATS.Enabled() {
		if a.broker, err = a.newBroker(ctx, store, opts); err != nil {
			return err
		}
	}
	a.svc = &Service{db: a.db, store: store, publisher: worker, headStart: worker.HeadStart(), log: a.log, now: time.Now}
	admin, err := a.adminHandler()
	if err != nil {
		return err
	}
	a.Serve(a.publicHandler(), admin, slog.String("node_id", worker.Options().NodeID), slog.String("sink", a.cfg.Sink.kind()))
	a.background()
	return nil
}

// background hands the Shell the work that runs beside HTTP: the
// worker (unless disabled), the broker's worker and the command log's
// retention.
func (a *App) background() {
	if a.cfg.OutboxWorker.WorkerEnabled() {
		a.Go(func(ctx context.Context) { _ = a.worker.Run(ctx) })
		if a.broker != nil {
			a.Go(a.runBroker)
		}
	} else {
		a.log.Warn("outbox_worker.enabled is false: pending events wait until a worker runs")
	}
	a.Go(func(ctx context.Context) { a.svc.RunCommandRetention(ctx, a.cfg.Commands) })
}

// Store is the room_outbox store, for tools that look at an event's
// record (the demo narrates them).
func (a *App) Store() *mysql.Store { return a.store }

// The shutdown steps, in order, as Lifecycle reports them (the first
// three are every service's; see svckit.Shell.Shutdown).
const (
	stepDraining    = svckit.StepDraining
	stepDrainDelay  = svckit.StepDrainDelay
	stepHTTPStopped = svckit.StepHTTPStopped
	stepWorker      = "outbox worker stopped"
	stepMySQL       = "mysql closed"
)

// closeResources closes NATS and MySQL, when nothing uses them.
func (a *App) closeResources() error {
	for _, c := range a.closers {
		c()
	}
	return a.db.Close()
}
