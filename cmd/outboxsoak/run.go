package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// run is one soak run and what it holds.
type run struct {
	cfg      *config
	d        dialect
	logger   *slog.Logger
	progress io.Writer

	database string  // the run's database
	scratch  bool    // created by the run
	admin    *sql.DB // the DSN's database: creates and drops the scratch one
	db       *sql.DB // the writers' pool
	monitor  *sql.DB // the sampler's pool
	store    soakStore
	queues   map[string]backend.Queue
	server   string // the server's version

	ledger    *ledger
	recv      *receiver
	sup       *supervisor
	sampler   *sampler
	load      *load
	proxy     *proxy // between the worker processes and the server, when there are faults
	injector  *injector
	writerLog *os.File

	started, writingEnded, drained, ended time.Time
}

// soak runs the soak cfg describes and writes its report. It returns the
// summary, whose Pass says whether the run met its criteria; an error
// means the run could not be made.
func soak(ctx context.Context, cfg *config, logger *slog.Logger, progress io.Writer) (*summary, error) {
	d, err := newDialect(cfg.Driver, cfg.DSN)
	if err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, d: d, logger: logger, progress: progress}
	defer r.cleanup()
	if err := r.prepare(ctx); err != nil {
		return nil, d.redact(err)
	}
	if err := r.startProcesses(ctx); err != nil {
		r.stopProcesses()
		return nil, d.redact(err)
	}
	r.write(ctx)
	r.drain()
	r.stopProcesses()
	sum, err := r.summarize()
	if err != nil {
		return nil, d.redact(err)
	}
	if err := writeReport(cfg.ReportDir, sum); err != nil {
		return sum, fmt.Errorf("write the report: %w", err)
	}
	return sum, nil
}

// prepare makes the report directory and the database: the tables, the
// store, its schema and the named consumer.
func (r *run) prepare(ctx context.Context) error {
	if err := makeReportDir(r.cfg.ReportDir); err != nil {
		return err
	}
	if err := r.openDatabase(ctx); err != nil {
		return err
	}
	r.cfg.Target = r.d.describe(r.database)
	var err error
	if r.server, err = r.d.version(ctx, r.db); err != nil {
		return fmt.Errorf("reach %s: %w", r.cfg.Target, err)
	}
	if err := createBusinessTables(ctx, r.db, r.d, r.cfg.Rooms); err != nil {
		return err
	}
	if r.store, err = r.d.newStore(r.db, r.cfg.Table, r.cfg.NotifyInterval); err != nil {
		return err
	}
	if err := r.store.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	r.queues = map[string]backend.Queue{defaultConsumer: r.store}
	if r.cfg.Consumer != "" {
		if err := r.store.AddConsumer(ctx, r.cfg.Consumer, backend.StartNow); err != nil {
			return fmt.Errorf("add consumer %q: %w", r.cfg.Consumer, err)
		}
		if r.queues[r.cfg.Consumer], err = r.store.ConsumerQueue(r.cfg.Consumer); err != nil {
			return err
		}
	}
	r.logger.Info("the database is ready", slog.String("target", r.cfg.Target), slog.Bool("scratch", r.scratch), slog.String("server", r.server))
	return nil
}

// openDatabase creates the scratch database, or checks that the DSN's
// has none of the run's tables, and opens the pools.
func (r *run) openDatabase(ctx context.Context) error {
	var err error
	if r.cfg.UseDSNDatabase {
		if r.database = r.d.dsnDatabase(); r.database == "" {
			return errors.New("--use-dsn-database: the DSN names no database")
		}
	} else {
		if r.admin, err = r.d.open("", ""); err != nil {
			return err
		}
		r.database = fmt.Sprintf("outboxsoak_%s_%04x", time.Now().UTC().Format("20060102_150405"), rand.IntN(1<<16))
		if err := r.d.createDatabase(ctx, r.admin, r.database); err != nil {
			return fmt.Errorf("create the scratch database %s: %w", r.database, err)
		}
		r.scratch = true
	}
	if r.db, err = r.d.open(r.database, ""); err != nil {
		return err
	}
	r.db.SetMaxOpenConns(r.cfg.Writers + 4)
	r.db.SetMaxIdleConns(r.cfg.Writers + 4)
	if r.monitor, err = r.d.open(r.database, ""); err != nil {
		return err
	}
	r.monitor.SetMaxOpenConns(2)
	if !r.scratch {
		var one int
		// No error but no rows: the table is there. (Any other error, a
		// missing table, is for CREATE TABLE to report if it matters.)
		if err := r.db.QueryRowContext(ctx, "SELECT 1 FROM "+roomsTable+" WHERE 1 = 0").Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("--use-dsn-database: %s has a table %s (from an earlier run?): drop it, or use a scratch database", r.cfg.Target, roomsTable)
		}
	}
	return nil
}

// startProcesses starts the receiver and the worker processes, and waits
// until every worker process reports.
func (r *run) startProcesses(ctx context.Context) error {
	r.ledger = newLedger(r.cfg.Rooms, r.cfg.consumers(), time.Time{})
	var err error
	if r.recv, err = startReceiver(r.ledger, r.logger); err != nil {
		return err
	}
	logs := filepath.Join(r.cfg.ReportDir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	writer, err := r.newWriter(logs) // before the processes: it checks their options
	if err != nil {
		return err
	}
	r.load = newLoad(r.d, writer, r.cfg, r.logger)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if len(r.cfg.Faults) > 0 {
		target, err := r.d.serverAddr()
		if err != nil {
			return fmt.Errorf("--faults: %w", err)
		}
		if r.proxy, err = startProxy(target); err != nil {
			return err
		}
	}
	base := workerConfig{Driver: r.cfg.Driver, Database: r.database, Table: r.cfg.Table, Consumer: r.cfg.Consumer,
		Receiver: r.recv.url(), Tuning: r.cfg.Tuning, Listener: r.cfg.Listener && r.cfg.Driver == "postgres",
		StatusEvery: min(time.Second, r.cfg.SampleEvery), LogLevel: r.cfg.WorkerLogLevel}
	if r.proxy != nil {
		base.Addr = r.proxy.addr()
	}
	r.sup = newSupervisor(exe, base, r.cfg.DSN, logs, r.cfg.Workers, r.logger)
	if err := r.sup.startAll(); err != nil {
		return err
	}
	return r.waitForWorkers(ctx, time.Minute)
}

// waitForWorkers waits until every slot's current process has reported.
func (r *run) waitForWorkers(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		pids, statuses := r.sup.pids(), r.recv.workerStatuses()
		ready := 0
		for slot, pid := range pids {
			if st, ok := statuses[slot]; ok && st.PID == pid {
				ready++
			}
		}
		if ready == len(pids) {
			return nil
		}
		if _, crashes := r.sup.counts(); crashes > 0 {
			return fmt.Errorf("a worker process exited at start: see the logs in %s", filepath.Join(r.cfg.ReportDir, "logs"))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d worker processes did not report within %v", len(pids)-ready, len(pids), within)
		}
		if !sleepUntil(ctx, time.Now().Add(100*time.Millisecond)) {
			return ctx.Err()
		}
	}
}

// newWriter returns the writers' outbox.Writer. Its worker never runs:
// it is the after-commit publish (PublishNow) of Writer.Do, with the
// options of the worker processes' default workers, so its head start
// is theirs. It logs to logs/writer.log, at the workers' level.
func (r *run) newWriter(logs string) (*outbox.Writer, error) {
	f, err := os.Create(filepath.Join(logs, "writer.log"))
	if err != nil {
		return nil, err
	}
	r.writerLog = f
	logger := slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: r.cfg.WorkerLogLevel}))
	nodeID := fmt.Sprintf("soak-writer-%d", os.Getpid())
	w, err := outbox.NewWorker(r.store, receiverSink(newReceiverClient(), r.recv.url(), defaultConsumer),
		r.cfg.Tuning.options(defaultConsumer, nodeID, logger))
	if err != nil {
		return nil, fmt.Errorf("the worker options: %w", err)
	}
	return outbox.NewWriter(r.store, w)
}

// write runs the writers for the run's duration (or until ctx ends),
// with the sampler running.
func (r *run) write(ctx context.Context) {
	r.started = time.Now()
	r.ledger.setSteadyFrom(r.started.Add(r.cfg.Warmup))
	r.sampler = &sampler{start: r.started, warmup: r.cfg.Warmup, ledger: r.ledger, load: r.load, recv: r.recv, writeDB: r.db,
		monitor: r.monitor, d: r.d, database: r.database, table: r.cfg.Table, queues: statsReaders(r.queues),
		names: r.cfg.consumers(), progress: r.progress}
	r.sampler.writing.Store(true)
	r.sampler.startRun(r.cfg.SampleEvery)
	r.injector = &injector{r: r, start: r.started}
	r.ledger.setCause(r.injector.causeAt)
	faultsDone := make(chan struct{})
	go func() {
		defer close(faultsDone)
		r.injector.run(ctx, r.cfg.Faults)
	}()
	r.logger.Info("writing", slog.Float64("rate", r.cfg.Rate), slog.Duration("duration", r.cfg.Duration),
		slog.Int("workers", r.cfg.Workers), slog.Int("faults", len(r.cfg.Faults)))
	r.load.run(ctx, r.started, r.cfg.Duration)
	r.writingEnded = time.Now()
	r.sampler.writing.Store(false)
	<-faultsDone // the last fault, if it lasts past the writers, is over
}

func statsReaders(qs map[string]backend.Queue) map[string]backend.StatsReader {
	out := make(map[string]backend.StatsReader, len(qs))
	for name, q := range qs {
		out[name] = q
	}
	return out
}

// drain waits until every committed event has reached every consumer,
// or the drain time has passed.
func (r *run) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Drain)
	defer cancel()
	defer func() { r.drained = time.Now() }()
	for {
		places, err := committedPlaces(ctx, r.db, r.cfg.Rooms)
		if err == nil {
			var total int64
			for _, n := range places {
				total += n
			}
			done := true
			for _, n := range r.ledger.uniqueCounts() {
				done = done && n >= total
			}
			if done {
				r.logger.Info("every committed event has reached every consumer", slog.Int64("events", total),
					slog.Duration("drain", time.Since(r.writingEnded).Round(time.Millisecond)))
				return
			}
		}
		if !sleepUntil(ctx, time.Now().Add(250*time.Millisecond)) {
			r.logger.Warn("the drain time is over with events not delivered", slog.Duration("drain", r.cfg.Drain))
			return
		}
	}
}

// stopProcesses takes the last sample, stops the worker processes, then
// the receiver.
func (r *run) stopProcesses() {
	if r.sampler != nil {
		r.sampler.stopRun()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r.sup != nil {
		if n := r.sup.stop(ctx); n > 0 {
			r.logger.Warn("worker processes did not stop on SIGTERM and were killed", slog.Int("killed", n))
		}
	}
	if r.proxy != nil {
		r.proxy.close()
	}
	if r.recv != nil {
		if err := r.recv.close(ctx); err != nil {
			r.logger.Warn("stop the receiver", slog.String("error", err.Error()))
		}
	}
	r.ended = time.Now()
}

// cleanup closes the pools and drops the scratch database (or the run's
// tables), unless asked to keep them.
func (r *run) cleanup() {
	if r.writerLog != nil {
		r.writerLog.Close()
	}
	for _, db := range []*sql.DB{r.db, r.monitor} {
		if db != nil {
			db.Close()
		}
	}
	if r.admin == nil {
		return // --use-dsn-database: the run's tables stay (see docs/endurance.md)
	}
	defer r.admin.Close()
	if !r.scratch || r.cfg.KeepDatabase {
		if r.scratch {
			r.logger.Info("the scratch database is kept", slog.String("database", r.database))
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.d.dropDatabase(ctx, r.admin, r.database); err != nil {
		r.logger.Warn("drop the scratch database", slog.String("database", r.database), slog.String("error", err.Error()))
	}
}
