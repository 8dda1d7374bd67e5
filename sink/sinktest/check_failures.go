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

// checkUnacceptable: each of Peer.Unacceptable fails as Permanent, and
// the peer does not hold it.
func checkUnacceptable(t *testing.T, s *suite) error {
	tg := s.newTarget(t)
	for i, m := range s.Unacceptable {
		err := publishOK(tg.Sink, m)
		switch {
		case err == nil:
			return fmt.Errorf("Peer.Unacceptable[%d] (ID %s): Publish = nil; a message the peer can never accept must fail as Permanent", i, quote(m.ID))
		case !outbox.IsPermanent(err) || outbox.IsUnavailable(err):
			return fmt.Errorf("Peer.Unacceptable[%d] (ID %s): Publish = %s %q; a message the peer can never accept must fail as Permanent "+
				"(retrying it would hold up its key forever; Unavailable would hold off the whole sink)", i, quote(m.ID), class(err), cut(err.Error()))
		}
		if err := s.noSecrets(fmt.Sprintf("the error for Peer.Unacceptable[%d]", i), err); err != nil {
			return err
		}
	}
	after := s.message("unacceptable-after", 0, "key-0")
	if err := publishOK(tg.Sink, after); err != nil {
		return fmt.Errorf("after the unacceptable messages: %w", err)
	}
	ds, err := waitHeld(tg, []outbox.Message{after})
	if err != nil {
		return err
	}
	held := idSet(ds)
	for i, m := range s.Unacceptable {
		if held[m.ID] {
			return fmt.Errorf("Peer.Unacceptable[%d] (ID %s) failed as Permanent, yet the peer holds it", i, quote(m.ID))
		}
	}
	return nil
}

// checkMisconfigured: a sink whose destination is not set up fails an
// ordinary message as Unavailable.
func checkMisconfigured(t *testing.T, s *suite) error {
	sink := s.Misconfigured(t)
	if sink == nil {
		t.Fatal("sinktest: Peer.Misconfigured returned nil")
	}
	closeWhenDone(t, sink)
	m := s.message("misconfigured", 0, "key-0")
	err := publishOK(sink, m)
	switch {
	case err == nil:
		return fmt.Errorf("the sink of Peer.Misconfigured: Publish = nil; it must fail as Unavailable")
	case !outbox.IsUnavailable(err):
		return fmt.Errorf("the sink of Peer.Misconfigured: Publish = %s %q; a destination that is not set up or not authorised "+
			"must fail as Unavailable, so that the worker holds off the sink and alerts instead of dead-lettering the backlog "+
			"or retrying quietly", class(err), cut(err.Error()))
	}
	return s.noSecrets("the error of the sink of Peer.Misconfigured", err)
}

// checkContext: a call with a cancelled or expired context returns an
// error the worker retries (or delivers).
func checkContext(t *testing.T, s *suite) error {
	tg := s.newTarget(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	var delivered []outbox.Message
	for i, c := range []struct {
		what string
		ctx  context.Context
	}{{"a cancelled context", cancelled}, {"an expired deadline", expired}} {
		m := s.message("context", i, "key-0")
		got := publish(c.ctx, tg.Sink, m)
		if err := wantRetryable("with "+c.what, m, got, &delivered); err != nil {
			return err
		}
		if err := s.noSecrets("the error for "+c.what, got); err != nil {
			return err
		}
	}
	if len(delivered) == 0 {
		return nil
	}
	// A nil error says the message was delivered: the peer must hold it.
	ds, err := waitHeld(tg, delivered)
	if err != nil {
		return fmt.Errorf("the sink's Publish returned nil with a context that was done: %w", err)
	}
	return s.checkHeld(ds, delivered, nil)
}

// checkSecrets: the sinks print and log without their secrets.
func checkSecrets(t *testing.T, s *suite) error {
	sinks := map[string]outbox.Sink{"the sink of Peer.NewSink": s.newTarget(t).Sink}
	if s.Misconfigured != nil {
		m := s.Misconfigured(t)
		closeWhenDone(t, m)
		sinks["the sink of Peer.Misconfigured"] = m
	}
	for what, sink := range sinks {
		for _, text := range printed(sink) {
			if err := s.noSecretIn(what+" printed or logged", text); err != nil {
				return err
			}
		}
	}
	return nil
}
