package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// workerCommand is the hidden subcommand a worker process runs: the
// program started again by itself (os.Executable), once per slot.
const workerCommand = "worker"

// envDSN carries the DSN to worker processes (and may carry it to run):
// the environment, unlike the command line, is not shown by ps.
const envDSN = "OUTBOXSOAK_DSN"

// defaultConsumer names the default consumer (the table's own delivery
// state) in the ledger and the report.
const defaultConsumer = "default"

// tuning is the part of outbox.WorkerOptions the operator sets; zero
// fields mean the library's defaults, which is what a soak should
// measure unless told otherwise.
type tuning struct {
	Ordering     bool          `json:"ordering"`
	PollInterval time.Duration `json:"poll_interval"`
	BatchSize    int           `json:"batch_size"`
	Concurrency  int           `json:"concurrency"`
	// Retention is given to the default consumer's workers only: it
	// deletes what every consumer has finished with.
	Retention time.Duration `json:"retention"`
}

// options returns the worker options of a worker called name.
func (t tuning) options(name, nodeID string, logger *slog.Logger) outbox.WorkerOptions {
	return outbox.WorkerOptions{Name: name, NodeID: nodeID, Logger: logger, Ordering: t.Ordering,
		PollInterval: t.PollInterval, BatchSize: t.BatchSize, Concurrency: t.Concurrency}
}

// workerConfig is what a worker process is told, as JSON in its
// --config flag (the DSN comes in envDSN).
type workerConfig struct {
	Slot     int    `json:"slot"`
	Driver   string `json:"driver"`
	Database string `json:"database"`
	// Addr, when set, replaces the DSN's host:port (the fault proxy).
	Addr     string `json:"addr,omitempty"`
	Table    string `json:"table"`
	Consumer string `json:"consumer"` // "" for the default consumer only
	Receiver string `json:"receiver"`
	Tuning   tuning `json:"tuning"`
	// Listener runs a postgres.Listener that wakes both workers.
	Listener    bool          `json:"listener"`
	StatusEvery time.Duration `json:"status_every"`
	LogLevel    slog.Level    `json:"log_level"`
}

// workerMain is main() of a worker process. It returns the exit code.
func workerMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(workerCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	raw := fs.String("config", "", "the worker's configuration, as JSON")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	var cfg workerConfig
	if err := json.Unmarshal([]byte(*raw), &cfg); err != nil {
		fmt.Fprintf(stderr, "outboxsoak worker: --config: %v\n", err)
		return exitUsage
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel})).With(slog.Int("slot", cfg.Slot))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go stopWithParent(ctx, stop, time.Second)
	if err := runWorkers(ctx, cfg, os.Getenv(envDSN), logger); err != nil {
		logger.Error("the worker process failed", slog.String("error", err.Error()))
		return exitFailed
	}
	return exitOK
}

// stopWithParent calls stop when the process that started this one has
// gone (killed, say, before it could stop its workers), checking every
// interval until ctx ends: a worker process never outlives its run.
func stopWithParent(ctx context.Context, stop func(), every time.Duration) {
	parent := os.Getppid()
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if os.Getppid() != parent {
				stop()
				return
			}
		}
	}
}

// runWorkers runs the workers of one process until ctx ends: one for the
// default consumer and, with a named consumer, one for it, each with a
// sink that posts to the receiver; on PostgreSQL with a Listener that
// wakes both. It returns once every worker has stopped.
func runWorkers(ctx context.Context, cfg workerConfig, dsn string, logger *slog.Logger) error {
	d, err := newDialect(cfg.Driver, dsn)
	if err != nil {
		return err
	}
	db, err := d.open(cfg.Database, cfg.Addr)
	if err != nil {
		return err
	}
	defer db.Close() // after every worker has returned
	store, err := d.newStore(db, cfg.Table, 0)
	if err != nil {
		return err
	}
	client := newReceiverClient()
	nodeID := "soak-" + strconv.Itoa(cfg.Slot) + "-" + strconv.Itoa(os.Getpid())
	opts := cfg.Tuning.options(defaultConsumer, nodeID, logger)
	opts.Retention = cfg.Tuning.Retention
	workers := []*outbox.Worker{}
	w, err := outbox.NewWorker(store, receiverSink(client, cfg.Receiver, defaultConsumer), opts)
	if err != nil {
		return err
	}
	workers = append(workers, w)
	if cfg.Consumer != "" {
		queue, err := store.ConsumerQueue(cfg.Consumer)
		if err != nil {
			return err
		}
		w, err := outbox.NewWorker(queue, receiverSink(client, cfg.Receiver, cfg.Consumer), cfg.Tuning.options(cfg.Consumer, nodeID, logger))
		if err != nil {
			return err
		}
		workers = append(workers, w)
	}
	return d.redact(serveWorkers(ctx, cfg, d, db, client, workers, logger))
}

// serveWorkers runs the workers, the Listener and the status reports
// until ctx ends.
func serveWorkers(ctx context.Context, cfg workerConfig, d dialect, db *sql.DB, client *http.Client, workers []*outbox.Worker, logger *slog.Logger) error {
	var listen func(context.Context, func()) error
	if cfg.Listener {
		var err error
		if listen, err = d.listen(cfg.Database, cfg.Addr, cfg.Table, logger); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(workers)+1)
	for _, w := range workers {
		wg.Go(func() { errs <- w.Run(ctx) })
	}
	if listen != nil {
		wg.Go(func() {
			errs <- listen(ctx, func() {
				for _, w := range workers {
					w.Notify()
				}
			})
		})
	}
	wg.Go(func() { reportStatus(ctx, client, cfg.Receiver, cfg.Slot, db, cfg.StatusEvery) })
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}
