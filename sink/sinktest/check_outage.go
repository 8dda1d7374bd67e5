package sinktest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// Sizes of the Outage check.
const (
	outageKeys   = 3
	outageBefore = 12 // messages enqueued before the peer goes away
	outageDuring = 18 // … and while it is away
)

// outageDeadline is the deadline of the calls made while the peer is
// away, and the worker's PublishTimeout: long enough for a client that
// connects and fetches metadata on its first publish on a loaded
// machine. The suite's own tests shorten it.
var outageDeadline = 5 * time.Second

// checkOutage runs a worker on an in-memory store with the sink, takes
// the peer away while messages are in flight, calls the sink directly
// while it is away, and brings it back: every message must end published
// and held, none dead.
func checkOutage(t *testing.T, s *suite) error {
	tg := s.newTarget(t)
	store := outboxtest.NewStore()
	var logs outboxtest.LogBuffer
	w, err := outbox.NewWorker(store, tg.Sink, outbox.WorkerOptions{
		Name: "sinktest", NodeID: "sinktest", PollInterval: 20 * time.Millisecond, BatchSize: 10, Concurrency: 4,
		PublishTimeout: outageDeadline, Retry: outbox.FixedInterval{Interval: 50 * time.Millisecond},
		Breaker: outbox.SinkBreaker{MaxProbeInterval: 200 * time.Millisecond}, Ordering: s.Ordered,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		return fmt.Errorf("sinktest: the worker: %w", err)
	}
	var sent []outbox.Message
	enqueue := func(from, n int) error {
		var ms []outbox.Message
		for i := from; i < from+n; i++ {
			ms = append(ms, s.message("outage", i, fmt.Sprintf("outage-%d", i%outageKeys)))
		}
		sent = append(sent, ms...)
		tx := store.Begin()
		if err := store.Enqueue(context.Background(), tx, nil, ms...); err != nil {
			return fmt.Errorf("sinktest: enqueue: %w", err)
		}
		return tx.Commit()
	}
	if err := enqueue(0, outageBefore); err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	var (
		halted sync.Once
		runErr error
	)
	halt := func() error {
		halted.Do(func() {
			stop()
			runErr = <-ran
		})
		return runErr
	}
	defer func() { _ = halt() }()

	// Some messages go through before the peer goes away.
	if !poll(waitTimeout, func() bool { return countStatus(store, sent, outbox.StatusPublished) >= outageKeys }) {
		return fmt.Errorf("before the outage: after %v only %d of %d messages were published on a working peer; last errors: %s",
			waitTimeout, countStatus(store, sent, outbox.StatusPublished), len(sent), lastErrors(store, sent))
	}
	s.Stop(t)
	away := true
	defer func() {
		if away { // the check failed while the peer was away
			s.Start(t)
		}
	}()
	if err := enqueue(outageBefore, outageDuring); err != nil {
		return err
	}
	tried, delivered, err := s.callDuringOutage(t, tg.Sink)
	if err != nil {
		return err
	}
	// The worker meets the outage (or says it published while the peer
	// was away, which the peer must then hold).
	if !poll(waitTimeout, func() bool {
		return failedAttempts(store, sent) > 0 || countStatus(store, sent, outbox.StatusPublished) == len(sent)
	}) {
		return fmt.Errorf("during the outage: after %v no publish of the worker has failed (%d of %d published)",
			waitTimeout, countStatus(store, sent, outbox.StatusPublished), len(sent))
	}
	t.Logf("while the peer was away: %d failed attempts of the worker; last errors: %s",
		failedAttempts(store, sent), lastErrors(store, sent))
	s.Start(t)
	away = false

	// Every message ends published and held; none dead.
	done := poll(waitTimeout, func() bool {
		return countStatus(store, sent, outbox.StatusDead) > 0 || countStatus(store, sent, outbox.StatusPublished) == len(sent)
	})
	if dead := countStatus(store, sent, outbox.StatusDead); dead > 0 {
		return fmt.Errorf("the outage dead-lettered %d messages (an outage must give errors the worker retries); last errors: %s",
			dead, lastErrors(store, sent))
	}
	if !done {
		return fmt.Errorf("after the peer came back: after %v only %d of %d messages are published; last errors: %s",
			waitTimeout, countStatus(store, sent, outbox.StatusPublished), len(sent), lastErrors(store, sent))
	}
	if err := halt(); err != nil {
		return fmt.Errorf("sinktest: the worker's Run: %w", err)
	}
	ds, err := waitHeld(tg, append(slices.Clone(sent), delivered...))
	if err != nil {
		return fmt.Errorf("the worker published every message, but %w", err)
	}
	if err := s.checkHeld(ds, sent, tried); err != nil {
		return err
	}
	if s.DedupesByID {
		if err := checkOnce(ds, sent); err != nil {
			return err
		}
	}
	if s.Ordered {
		if err := checkOrder(ds, sent); err != nil {
			return fmt.Errorf("through a worker with Ordering, across the outage: %w", err)
		}
	}
	if err := s.noSecretIn("the worker's logs", logs.String()); err != nil {
		return err
	}
	for _, m := range sent {
		rec, _ := store.Get(context.Background(), m.ID)
		if err := s.noSecretIn(fmt.Sprintf("the last error stored for %s", quote(m.ID)), rec.LastError); err != nil {
			return err
		}
	}
	return nil
}

// callDuringOutage calls the sink while the peer is away, with a
// deadline and with a cancellation: each call must return, with an
// error the worker retries. It returns the messages it tried, and those
// of them it was told were delivered.
func (s *suite) callDuringOutage(t *testing.T, sink outbox.Sink) (tried, delivered []outbox.Message, err error) {
	deadline := s.message("outage-call", 0, "outage-call")
	ctx, cancel := context.WithTimeout(context.Background(), outageDeadline)
	defer cancel()
	err = publish(ctx, sink, deadline)
	t.Logf("while the peer is away, with a deadline: %s %q", class(err), errText(err))
	if err := wantRetryable("while the peer is away, with a deadline", deadline, err, &delivered); err != nil {
		return nil, nil, err
	}
	if err := s.noSecrets("the error while the peer is away", err); err != nil {
		return nil, nil, err
	}
	// Cancelled while it waits, if it waits (a peer that refuses at once
	// has answered before).
	cancelled := s.message("outage-call", 1, "outage-call")
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(outageDeadline/4, cancel)
	err = publish(ctx, sink, cancelled)
	cancel()
	t.Logf("while the peer is away, cancelled: %s %q", class(err), errText(err))
	if err := wantRetryable("while the peer is away, cancelled", cancelled, err, &delivered); err != nil {
		return nil, nil, err
	}
	if err := s.noSecrets("the error while the peer is away", err); err != nil {
		return nil, nil, err
	}
	return []outbox.Message{deadline, cancelled}, delivered, nil
}

func countStatus(store *outboxtest.Store, ms []outbox.Message, status outbox.Status) int {
	n := 0
	for _, m := range ms {
		if rec, err := store.Get(context.Background(), m.ID); err == nil && rec.Status == status {
			n++
		}
	}
	return n
}

func failedAttempts(store *outboxtest.Store, ms []outbox.Message) int {
	n := 0
	for _, m := range ms {
		if rec, err := store.Get(context.Background(), m.ID); err == nil {
			n += rec.Attempts
		}
	}
	return n
}

// lastErrors lists the distinct last errors of ms, a few of them.
func lastErrors(store *outboxtest.Store, ms []outbox.Message) string {
	var texts []string
	for _, m := range ms {
		if rec, err := store.Get(context.Background(), m.ID); err == nil && rec.LastError != "" && !slices.Contains(texts, rec.LastError) {
			texts = append(texts, rec.LastError)
		}
	}
	return quoteSome(texts)
}
