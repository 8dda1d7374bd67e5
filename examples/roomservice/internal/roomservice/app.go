package roomservice

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxprom"
	"github.com/outboxrelay/outboxrelay/sink/tencentim"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// state is where the App is in its life.
type state int32

const (
	stateStarting state = iota
	stateServing
	stateDraining
	stateStopped
)

func (s state) String() string {
	return [...]string{"starting", "serving", "draining", "stopped"}[s]
}

// App is room-service: MySQL, the outbox store and worker, the Tencent IM
// sink, the public API and the admin listener, stopped in the order
// Shutdown documents.
type App struct {
	cfg    Config
	log    *slog.Logger
	db     *sql.DB
	store  *mysql.Store
	worker *outbox.Worker
	// broker relays the events to NATS JetStream (nil without nats.url).
	broker *broker
	svc    *Service
	// server is the public API's; admin serves /metrics and the probes
	// on the admin listener.
	server *http.Server
	admin  *http.Server
	// outboxUICloser stops the outbox dashboard's sampler (http.go).
	outboxUICloser interface{ Close() error }
	// metrics is the registry /metrics serves.
	metrics *prometheus.Registry

	state        atomic.Int32
	listener     net.Listener
	adminLn      net.Listener
	workerCancel context.CancelFunc
	workerDone   chan struct{}
	// brokerDone closes when the broker's worker has stopped (at once
	// without a broker).
	brokerDone chan struct{}
	// retentionDone closes when the command log's retention has stopped;
	// it runs beside the worker and stops with it.
	retentionDone chan struct{}
	serveDone     chan error
	stopOnce      sync.Once
	stopErr       error

	mu        sync.Mutex
	lifecycle []string
}

// NewApp opens MySQL (waiting for it to answer), migrates, and builds the
// sink, the store, the worker and the HTTP servers. Nothing serves yet.
// Zero values in cfg get their defaults (Config.WithDefaults).
func NewApp(ctx context.Context, cfg Config, logger *slog.Logger) (*App, error) {
	cfg = cfg.WithDefaults()
	a := &App{cfg: cfg, log: logger, workerDone: make(chan struct{}), brokerDone: make(chan struct{}), retentionDone: make(chan struct{}), serveDone: make(chan error, 2)}
	db, err := openMySQL(ctx, cfg.MySQL)
	if err != nil {
		return nil, err
	}
	a.db = db
	if err := a.build(ctx); err != nil {
		a.closeResources()
		return nil, err
	}
	return a, nil
}

func (a *App) build(ctx context.Context) error {
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
	sink, err := a.newSink()
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
	a.server = a.newServer(a.publicHandler())
	admin, err := a.adminHandler()
	if err != nil {
		return err
	}
	a.admin = a.newServer(admin)
	return nil
}

// newServer is an http.Server with the http block's limits, so that a
// slow or idle client is cut off instead of holding a goroutine and a
// file descriptor for as long as it likes.
func (a *App) newServer(h http.Handler) *http.Server {
	c := a.cfg.HTTP
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    c.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
}

// newSink builds the Tencent IM sink. There is no fake in here: the demo
// command and the tests start one and put its address in base_url.
func (a *App) newSink() (*tencentim.Sink, error) {
	im := a.cfg.TencentIM
	return tencentim.New(tencentim.Config{
		BaseURL: im.BaseURL, SDKAppID: im.SDKAppID, SecretKey: im.SecretKey, AdminIdentifier: im.AdminIdentifier,
		SkipTypes: noIMTypes, Logger: a.log,
	})
}

// Start listens on the public and the admin address, marks the App
// serving, starts the worker (if enabled) and serves in the background.
func (a *App) Start() error {
	ln, err := net.Listen("tcp", a.cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", a.cfg.HTTP.Addr, err)
	}
	adminLn, err := net.Listen("tcp", a.cfg.HTTP.AdminAddr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("listen %s (http.admin_addr): %w", a.cfg.HTTP.AdminAddr, err)
	}
	a.listener = newLimitListener(ln, a.cfg.HTTP.MaxConnections)
	a.adminLn = adminLn
	a.state.Store(int32(stateServing))
	workerCtx, cancel := context.WithCancel(context.Background())
	a.workerCancel = cancel
	if a.cfg.OutboxWorker.WorkerEnabled() {
		go func() {
			defer close(a.workerDone)
			_ = a.worker.Run(workerCtx)
		}()
	} else {
		close(a.workerDone)
		a.log.Warn("outbox_worker.enabled is false: pending events wait until a worker runs")
	}
	a.startBroker(workerCtx)
	go func() {
		defer close(a.retentionDone)
		a.svc.RunCommandRetention(workerCtx, a.cfg.Commands)
	}()
	go func() { a.serveDone <- a.server.Serve(a.listener) }()
	go func() { a.serveDone <- a.admin.Serve(a.adminLn) }()
	a.log.Info("room-service serving", slog.String("addr", ln.Addr().String()),
		slog.String("admin_addr", adminLn.Addr().String()), slog.String("node_id", a.worker.Options().NodeID))
	return nil
}

// Store is the room_outbox store, for tools that look at an event's
// record (the demo narrates them).
func (a *App) Store() *mysql.Store { return a.store }

// Addr is the address the public API listens on.
func (a *App) Addr() string { return a.listener.Addr().String() }

// AdminAddr is the address the admin listener (/metrics) listens on.
func (a *App) AdminAddr() string { return a.adminLn.Addr().String() }

// State reports where the App is in its life.
func (a *App) State() state { return state(a.state.Load()) }

// Run starts the App and stops it when ctx is done (SIGINT/SIGTERM in
// main) or the server fails.
func (a *App) Run(ctx context.Context) error {
	if err := a.Start(); err != nil {
		a.closeResources()
		return err
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-a.serveDone:
	}
	// shutdown_timeout bounds what follows the drain delay.
	stopCtx, cancel := context.WithTimeout(context.Background(), a.cfg.HTTP.DrainDelayOrDefault()+a.cfg.ShutdownTimeout)
	defer cancel()
	return errors.Join(serveErr, a.Shutdown(stopCtx))
}

// The shutdown steps, in order, as Lifecycle reports them.
const (
	stepDraining    = "draining: /readyz answers 503"
	stepDrainDelay  = "drain delay over"
	stepHTTPStopped = "http server stopped"
	stepWorker      = "outbox worker stopped"
	stepMySQL       = "mysql closed"
)

// Shutdown stops the App, in this order:
//
//  1. Mark draining: /readyz answers 503, and keep-alive connections are
//     closed after their next response, while new requests are still
//     served.
//  2. Wait http.drain_delay, so that load balancers (Kubernetes
//     endpoints) stop sending before the listener closes. ctx ending cuts
//     the wait short.
//  3. Shut HTTP down gracefully: in-flight commands finish and commit.
//     If ctx ends first, the remaining connections are closed.
//  4. Stop the worker from claiming and wait for its in-flight publish
//     to be recorded (it ends at publish_timeout at the latest). The
//     worker keeps delivering while HTTP drains. The NATS broker's
//     worker, if any, stops with it.
//  5. Close NATS and MySQL last, when nothing uses them.
//
// Only the first call does the work; every call returns its result.
func (a *App) Shutdown(ctx context.Context) error {
	a.stopOnce.Do(func() {
		a.state.Store(int32(stateDraining))
		a.server.SetKeepAlivesEnabled(false)
		a.step(stepDraining)
		a.waitDrainDelay(ctx)
		httpErr := a.stopHTTP(ctx)
		a.stopWorker()
		a.stopErr = errors.Join(httpErr, a.closeResources())
		a.state.Store(int32(stateStopped))
	})
	return a.stopErr
}

// waitDrainDelay waits http.drain_delay, or until ctx ends.
func (a *App) waitDrainDelay(ctx context.Context) {
	t := time.NewTimer(a.cfg.HTTP.DrainDelayOrDefault())
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		a.log.WarnContext(ctx, "drain delay cut short", slog.Any("error", ctx.Err()))
	}
	a.step(stepDrainDelay)
}

// stopHTTP shuts both servers down gracefully, and closes what is left
// when ctx ends first.
func (a *App) stopHTTP(ctx context.Context) error {
	var errs []error
	for _, s := range []*http.Server{a.server, a.admin} {
		if err := s.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err), s.Close())
		}
	}
	if a.outboxUICloser != nil {
		errs = append(errs, a.outboxUICloser.Close())
	}
	a.step(stepHTTPStopped)
	return errors.Join(errs...)
}

// stopWorker stops the worker and waits until its in-flight publish is
// recorded, and stops the command log's retention.
func (a *App) stopWorker() {
	a.workerCancel()
	<-a.workerDone
	<-a.brokerDone
	<-a.retentionDone
	a.step(stepWorker)
}

func (a *App) closeResources() error {
	if a.broker != nil {
		a.broker.nc.Close()
	}
	err := a.db.Close()
	a.step(stepMySQL)
	return err
}

// step records and logs a lifecycle step.
func (a *App) step(what string) {
	a.mu.Lock()
	a.lifecycle = append(a.lifecycle, what)
	a.mu.Unlock()
	a.log.Info("lifecycle: " + what)
}

// Lifecycle returns the shutdown steps taken so far, in order.
func (a *App) Lifecycle() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.lifecycle...)
}
