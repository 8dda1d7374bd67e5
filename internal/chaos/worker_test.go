//go:build chaos

package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Environment of a worker process (the test binary run again).
const (
	envRole   = "CHAOS_ROLE"
	envTarget = "CHAOS_TARGET"
	envDSN    = "CHAOS_DSN"
	envLog    = "CHAOS_LOG"
	envSeed   = "CHAOS_SEED"
	envIndex  = "CHAOS_INDEX"
)

// Worker settings: short timeouts so that faults show and heal quickly.
const (
	publishTimeout = 200 * time.Millisecond
	storeTimeout   = time.Second
	leaseTimeout   = 3 * time.Second
	failRate       = 0.20 // the sink fails this share of calls
	hangRate       = 0.03 // and hangs past the publish timeout on this share
)

// runWorkerProcess is main() of a worker process: an ordered outbox worker
// whose sink fails and hangs at random, and which appends every delivery,
// injected fault and settle to its own log, one write per line, so that a
// SIGKILL never leaves half a line.
func runWorkerProcess() int {
	seed, _ := strconv.ParseUint(os.Getenv(envSeed), 10, 64)
	logFile, err := os.OpenFile(os.Getenv(envLog), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer logFile.Close()
	ev := &eventLog{f: logFile, pid: os.Getpid()}

	tg := targetNamed(os.Getenv(envTarget))
	if tg == nil {
		fmt.Fprintf(os.Stderr, "no chaos target %q\n", os.Getenv(envTarget))
		return 2
	}
	db, err := sql.Open(tg.driver, os.Getenv(envDSN))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer db.Close()
	store, err := tg.newStore(db)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	sink := &chaosSink{log: ev, rng: rand.New(rand.NewPCG(seed, uint64(os.Getpid())))}
	worker, err := outbox.NewWorker(&loggedStore{Store: store, log: ev}, sink, outbox.WorkerOptions{
		Name: "chaos", NodeID: "chaos-" + os.Getenv(envIndex) + "-" + strconv.Itoa(os.Getpid()),
		PollInterval: 20 * time.Millisecond, BatchSize: 50,
		PublishTimeout: publishTimeout, StoreTimeout: storeTimeout, LeaseTimeout: leaseTimeout,
		Retry:    outbox.FixedInterval{Interval: 50 * time.Millisecond},
		Ordering: true,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	// From here on SIGTERM stops the worker cleanly; before, it would kill
	// the process. The test waits for this file before it sends one.
	if err := os.WriteFile(readyFile(os.Getenv(envLog)), nil, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := worker.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// readyFile is the file a worker process creates once SIGTERM stops it
// cleanly, next to its log.
func readyFile(log string) string { return log + ".ready" }

// eventLog appends lines to the process's log file.
type eventLog struct {
	mu  sync.Mutex
	f   *os.File
	pid int
}

// write appends one line: kind, pid, wall-clock nanoseconds, fields.
func (l *eventLog) write(kind string, fields ...string) {
	line := kind + " " + strconv.Itoa(l.pid) + " " + strconv.FormatInt(time.Now().UnixNano(), 10) + " " + strings.Join(fields, " ") + "\n"
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.WriteString(line) // one write(2)
}

// chaosSink delivers by logging, after failing or hanging at random.
type chaosSink struct {
	log *eventLog
	mu  sync.Mutex
	rng *rand.Rand
}

func (s *chaosSink) Publish(ctx context.Context, m outbox.Message) error {
	s.mu.Lock()
	r := s.rng.Float64()
	s.mu.Unlock()
	switch {
	case r < failRate:
		s.log.write("F", m.ID)
		return errors.New("chaos: injected sink failure")
	case r < failRate+hangRate:
		s.log.write("H", m.ID)
		<-ctx.Done()
		return fmt.Errorf("chaos: injected hang: %w", ctx.Err())
	}
	s.log.write("D", m.ID, m.Key)
	return nil
}

// loggedStore records every claim (its token, when the call began, and
// its records) and every settle (its token, whether it was written, how
// many outcomes were stale, and which records it published).
type loggedStore struct {
	backend.Store
	log *eventLog
}

// Capabilities has none of the store's fast paths: the log has every
// claim and every settle.
func (s *loggedStore) Capabilities() backend.Capabilities { return backend.Capabilities{} }

func (s *loggedStore) Claim(ctx context.Context, p backend.ClaimParams) (backend.Batch, error) {
	// The lease starts after this, on the same machine's clock: verify
	// tells a re-claim after the lease ran out from one before by it.
	began := time.Now().UnixNano()
	b, err := s.Store.Claim(ctx, p)
	if err == nil && b.Len() > 0 {
		fields := []string{b.Token, strconv.FormatInt(began, 10)}
		for _, r := range b.Records {
			fields = append(fields, r.ID)
		}
		s.log.write("C", fields...)
	}
	return b, err
}

func (s *loggedStore) Settle(ctx context.Context, token string, outcomes []backend.Outcome) (backend.SettleResult, error) {
	res, err := s.Store.Settle(ctx, token, outcomes)
	status := "ok"
	if err != nil {
		status = "fail"
	}
	fields := []string{token, status, strconv.Itoa(res.Stale)}
	for _, o := range outcomes {
		if o.Kind == backend.OutcomePublished {
			fields = append(fields, o.ID)
		}
	}
	s.log.write("S", fields...)
	return res, err
}
