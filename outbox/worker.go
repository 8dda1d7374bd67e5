package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Worker delivers pending messages from a Store to a Sink.
//
// Run is the background loop; ProcessBatch is one round of it, for tests
// and tools; PublishNow is the after-commit fast path a writer calls right
// after committing its transaction. Several workers, in one process or in
// many, may share one store: each claim is a lease, so they do not deliver
// the same record at the same time.
//
// A Worker is safe for concurrent use, but Run runs at most once at a time.
// The store's database must stay open until Run has returned.
type Worker struct {
	store Store
	sink  Sink
	opts  WorkerOptions
	log   *slog.Logger

	running atomic.Bool
	wake    chan struct{}

	// breaker holds off a sink that keeps failing; lines bounds the
	// failure lines (see failurelog.go).
	breaker *breaker
	lines   lineLimiter
	// waiting are the keys of messages PublishNow left to the workers
	// because they were not their key's oldest pending message (with
	// Ordering): an outcome of their key wakes Run, so that the next one
	// goes out without waiting for PollInterval.
	waitingMu sync.Mutex
	waiting   map[string]struct{}
}

// NewWorker returns a worker that delivers from store to sink. It fills in
// the defaults of opts and returns an error naming the field when an option
// is invalid.
//
// store is where the messages are, such as a *mysql.Store
// (store/mysql); its contract is backend.Store.
func NewWorker(store Store, sink Sink, opts WorkerOptions) (*Worker, error) {
	if store == nil {
		return nil, errors.New("outbox: NewWorker: store is nil")
	}
	if sink == nil {
		return nil, errors.New("outbox: NewWorker: sink is nil")
	}
	if n, ok := store.(interface{ Name() string }); ok && opts.Name == "" {
		opts.Name = n.Name() // the outbox's name is given once, to the store
	}
	opts = opts.WithDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if _, ok := store.(backend.Purger); opts.Retention > 0 && !ok {
		return nil, fmt.Errorf("outbox: Retention %v: the store (%T) cannot purge: it does not implement backend.Purger", opts.Retention, store)
	}
	return &Worker{
		store:   store,
		sink:    sink,
		opts:    opts,
		log:     opts.Logger.With(slog.String("worker", opts.Name), slog.String("node_id", opts.NodeID)),
		wake:    make(chan struct{}, 1),
		breaker: newBreaker(opts.Breaker, opts.PollInterval),
		waiting: map[string]struct{}{},
	}, nil
}

// Options returns the options in effect, defaults filled in.
func (w *Worker) Options() WorkerOptions { return w.opts }

// HeadStart returns a head start (EnqueueOptions.HeadStart) under which
// PublishNow on this worker publishes without a claim of its own, on a
// store that leases messages to their writer (backend.HeadStartLeaser):
// DefaultHeadStart, or PublishTimeout plus StoreTimeout plus 2 s for the
// writer's commit, whichever is longer. Enqueue with it what the writer
// publishes with this worker's PublishNow.
func (w *Worker) HeadStart() time.Duration {
	return max(DefaultHeadStart, w.opts.PublishTimeout+w.opts.StoreTimeout+2*time.Second)
}

// Run processes one batch at once, then one whenever PollInterval has
// passed (or at once again while there is a full batch of work), until ctx
// is cancelled. It returns nil on a clean stop and ErrWorkerRunning if the
// worker is already running.
//
// A failed round (say, the database is unreachable) is logged and the next
// round tries again; Run does not return because of it. When ctx is
// cancelled Run claims nothing more; the publish in flight finishes
// (bounded by PublishTimeout), records not yet attempted are released, and
// the outcomes are recorded before Run returns. So: cancel, wait for Run to
// return, and only then close the database.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return ErrWorkerRunning
	}
	defer w.running.Store(false)

	w.log.InfoContext(ctx, "outbox worker started",
		slog.Duration("poll_interval", w.opts.PollInterval),
		slog.Int("batch_size", w.opts.BatchSize),
		slog.Duration("publish_timeout", w.opts.PublishTimeout),
		slog.Duration("lease_timeout", w.opts.LeaseTimeout))
	defer w.log.InfoContext(context.WithoutCancel(ctx), "outbox worker stopped")

	if p, ok := w.store.(backend.Purger); ok && w.opts.Retention > 0 {
		done := make(chan struct{})
		defer func() { <-done }() // no goroutine outlives Run
		go func() {
			defer close(done)
			w.retain(ctx, p)
		}()
	}

	// carry holds a full batch's outcomes, for the next claim to record
	// (with a SettleClaimer, in its own transaction); whatever is left is
	// recorded on the way out.
	var carry *settlement
	defer func() {
		if carry != nil {
			_, _ = w.record(ctx, carry)
		}
	}()
	timer := time.NewTimer(w.opts.PollInterval)
	defer timer.Stop()
	for {
		s, err := w.round(ctx, PathWorker, w.claimParams(), carry, true)
		carry = nil
		if s != nil {
			if ctx.Err() == nil && w.moreWork(s.result()) {
				carry = s
				continue
			}
			_, err = w.record(ctx, s)
		}
		if ctx.Err() != nil {
			return nil
		}
		_ = err // logged and observed where it happened; the next round tries again
		w.flushFailureLines(ctx)
		timer.Reset(w.opts.PollInterval)
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-w.wake:
		}
	}
}

// Notify wakes a running worker for a round now rather than at the next
// PollInterval: call it after committing messages enqueued without a head
// start (or after a PublishNow that left work behind; PublishNow does it
// itself). It never blocks; wake-ups that come while the worker is busy
// collapse into one. It has no effect on other instances.
func (w *Worker) Notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Worker) claimParams() backend.ClaimParams {
	return backend.ClaimParams{Owner: w.opts.NodeID, Limit: w.opts.BatchSize, LeaseFor: w.opts.LeaseTimeout, Ordered: w.opts.Ordering}
}

// moreWork reports whether the next round should start at once: the batch
// was full, so more is probably due, and it made progress, so the sink is
// not simply down (then waiting out PollInterval spares it).
func (w *Worker) moreWork(res BatchResult) bool {
	return res.Claimed >= w.opts.BatchSize && res.Published+res.Dead > 0
}

// BatchResult counts what one round did.
type BatchResult struct {
	// Claimed is the number of records leased, decodable or not.
	Claimed int
	// Published is the number the sink accepted.
	Published int
	// Retried is the number of failed attempts scheduled for another try.
	Retried int
	// Dead is the number of dead letters: failed attempts the retry policy
	// gave up on and the store recorded as dead. (Run records a full
	// batch's outcomes with its next claim; until then this counts the
	// ones decided.)
	Dead int
	// Released is the number not attempted and handed back (the context
	// was cancelled, or there was no lease time left to publish them).
	Released int
	// Stale is the number of outcomes not recorded because the lease had
	// already been lost.
	Stale int
}

// ProcessBatch runs one round: it claims up to BatchSize due records,
// publishes each with its own PublishTimeout, and records the outcomes.
// A failing or panicking publish, or an undecodable record, fails alone;
// the rest of the batch goes on. It returns an error only when the store
// fails (claim or settle): the round ends, and records whose outcomes
// could not be written are delivered again after their lease expires.
//
// If ctx is cancelled during the round, the publish in flight still
// finishes and the records not yet attempted are released; the outcomes
// are recorded before ProcessBatch returns. It runs its round whether or
// not the worker holds off the sink (see SinkBreaker), and what the sink
// does in it counts for the breaker.
func (w *Worker) ProcessBatch(ctx context.Context) (BatchResult, error) {
	if err := ctx.Err(); err != nil {
		return BatchResult{}, err
	}
	s, err := w.round(ctx, PathWorker, w.claimParams(), nil, false)
	if s == nil {
		return BatchResult{}, err
	}
	return w.record(ctx, s)
}

// PublishNow is the after-commit fast path: call it right after committing
// the transaction that enqueued msgs (ideally with
// EnqueueOptions.HeadStart), with the same messages. It works whether or
// not Run is running. It is best effort, and built to cost the caller
// little: each sink call is bounded by AfterCommitTimeout (500 ms by
// default, against the worker's PublishTimeout), and while the worker
// holds off a failing sink (see SinkBreaker) it calls no sink at all. A
// request handler can call it inline and ignore its error.
//
// It leases the messages first, so it never races a worker: a message a
// worker has already claimed, or that is no longer pending, is left alone.
// When the store leased them to this process in the writer's transaction
// (backend.HeadStartLeaser: store/mysql does, given a HeadStart of at
// least PublishTimeout plus StoreTimeout) and ordering is off, that lease
// is used and no claim is committed first: the sink is called one read
// after the writer's commit. Under such a lease, messages after the first
// start only while their publish and settle fit in the lease from the
// call; the others are left due for the worker at once.
// Then it publishes each, bounded by AfterCommitTimeout and by ctx. On
// success it marks the message published (best effort: if that fails, a
// worker may deliver it once more). Every message it does not publish
// (the sink failed, the sink is held off, a worker holds it, or, with
// Ordering, an older message of its key is still pending) stays pending
// with its attempt count unchanged and due for the workers at once (its
// head start, if any, is ended), and the workers of this process are
// woken for it.
//
// It returns nil when it published every message. Otherwise its error
// wraps ErrLeftToWorker and says which messages it left and why (and
// wraps the sink's errors, ErrSinkHeldOff, or the store's). The error is
// for callers that count or test; the worker has logged what went wrong
// already, and the messages are stored, so a worker delivers them.
func (w *Worker) PublishNow(ctx context.Context, msgs ...Message) error {
	if len(msgs) == 0 {
		return nil
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	if !w.breaker.tryProbe(time.Now()) {
		return w.leaveToWorker(ctx, msgs, ids, ErrSinkHeldOff)
	}
	s, ok := w.publishHeadStarted(ctx, ids)
	if !ok {
		var err error
		s, err = w.round(ctx, PathAfterCommit, backend.ClaimParams{
			Owner:    w.opts.NodeID,
			Limit:    len(ids),
			LeaseFor: w.opts.LeaseTimeout,
			IDs:      ids,
			Ordered:  w.opts.Ordering,
		}, nil, true)
		if err != nil {
			// Nothing claimed: a worker delivers them once their head
			// start ends (the store is failing; so would ending it).
			return fmt.Errorf("%w: %d message(s), after the claim failed: %w", ErrLeftToWorker, len(ids), err)
		}
	}
	return w.finishNow(ctx, msgs, ids, s)
}

// finishNow records the outcomes of an after-commit publish (s, nil when
// nothing was claimed), leaves what it did not publish to the workers,
// and returns PublishNow's error.
func (w *Worker) finishNow(ctx context.Context, msgs []Message, ids []string, s *settlement) error {
	var errs []error
	settled := map[string]bool{}
	if s != nil {
		res, err := w.record(ctx, s)
		if err != nil {
			errs = append(errs, err)
		}
		if res.Released > 0 {
			w.Notify() // what the fast path could not do is due at once
		}
		var released []string
		for _, o := range s.outcomes {
			settled[o.ID] = true
			if o.Kind == backend.OutcomeRelease {
				released = append(released, o.ID)
			}
		}
		if len(s.errs) > 0 {
			errs = append(errs, &leftError{ids: released, why: "the sink failed", cause: errors.Join(s.errs...)})
		} else if len(released) > 0 {
			errs = append(errs, &leftError{ids: released, why: "not attempted: the sink is held off, or no lease time was left"})
		}
	}
	var unclaimed []Message
	for _, m := range msgs {
		if !settled[m.ID] {
			unclaimed = append(unclaimed, m)
		}
	}
	pending, err := w.stillPending(ctx, unclaimed)
	if err != nil {
		errs = append(errs, err)
	}
	if len(pending) > 0 {
		why := "not claimed: held by a worker's claim"
		if w.opts.Ordering {
			why = "not claimed: an older message of its key is still pending, or a worker's claim holds it"
		}
		errs = append(errs, w.leaveToWorker(ctx, pending, idsOf(pending), errors.New(why)))
	}
	return errors.Join(errs...)
}

// stillPending returns those of msgs, which PublishNow did not claim,
// that are still pending: a worker holds them, or (with Ordering) an
// older message of their key is pending. A message published meanwhile
// needs nothing more; one that is dead, or not stored (its transaction
// rolled back), is an error.
func (w *Worker) stillPending(ctx context.Context, msgs []Message) ([]Message, error) {
	var (
		pending []Message
		errs    []error
	)
	for _, m := range msgs {
		getCtx, cancel := context.WithTimeout(ctx, w.opts.StoreTimeout)
		rec, err := w.store.Get(getCtx, m.ID)
		cancel()
		switch {
		case err != nil && !errors.Is(err, ErrNotFound):
			pending = append(pending, m) // it may well be: leave it to the worker
		case err != nil:
			errs = append(errs, fmt.Errorf("outbox: publish now %q: not stored (did its transaction commit?): %w", m.ID, err))
		case rec.Status == StatusPending:
			pending = append(pending, m)
		case rec.Status == StatusDead:
			errs = append(errs, fmt.Errorf("outbox: publish now %q: the message is dead (a worker dead-lettered it)", m.ID))
		}
	}
	return pending, errors.Join(errs...)
}

// leaveToWorker leaves msgs (with ids) to the workers, due at once, for
// the reason why: it ends their head start, notes the keys they wait
// behind, and wakes this process's workers. It returns PublishNow's error
// for them.
func (w *Worker) leaveToWorker(ctx context.Context, msgs []Message, ids []string, why error) error {
	left := &leftError{ids: ids, why: why.Error(), cause: why}
	if hs, ok := w.store.(backend.HeadStartEnder); ok {
		endCtx, cancel := context.WithTimeout(ctx, w.opts.StoreTimeout)
		_, err := hs.EndHeadStart(endCtx, ids)
		cancel()
		if err != nil {
			w.logFailure(ctx, slog.LevelWarn, "outbox after-commit publish could not end the head start of the messages it left to the worker; they are due when it ends",
				slog.Int("messages", len(ids)), slog.Any("error", err))
			left.cause = errors.Join(why, err)
		}
	}
	if w.opts.Ordering {
		var keys []string
		for _, m := range msgs {
			if m.Key != "" {
				keys = append(keys, m.Key)
			}
		}
		w.waitFor(keys)
	}
	w.Notify()
	w.log.DebugContext(ctx, "outbox after-commit publish left messages to the worker, due now",
		slog.Int("messages", len(ids)), slog.String("why", left.why))
	return left
}

// leftError is PublishNow's error for messages it left to the workers.
type leftError struct {
	ids   []string
	why   string
	cause error
}

func (e *leftError) Error() string {
	const shown = 5
	list := strings.Join(quoteAll(e.ids[:min(len(e.ids), shown)]), ", ")
	if len(e.ids) > shown {
		list += fmt.Sprintf(" and %d more", len(e.ids)-shown)
	}
	text := fmt.Sprintf("outbox: %d message(s) left to the worker, due now (%s): %s", len(e.ids), e.why, list)
	if e.cause != nil && e.cause.Error() != e.why {
		text += ": " + e.cause.Error()
	}
	return text
}

func (e *leftError) Is(target error) bool { return target == ErrLeftToWorker }
func (e *leftError) Unwrap() error        { return e.cause }

func quoteAll(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.Quote(id)
	}
	return out
}

func idsOf(msgs []Message) []string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

// publishHeadStarted publishes the messages ids names under the lease the
// writer's transaction took for them, when the store keeps such leases
// and holds one on every one of them for at least a publish and its
// settle; ok is false when it did not (the caller claims them instead).
func (w *Worker) publishHeadStarted(ctx context.Context, ids []string) (s *settlement, ok bool) {
	hs, can := w.store.(backend.HeadStartLeaser)
	if !can || w.opts.Ordering {
		return nil, false
	}
	start := time.Now()
	readCtx, cancel := context.WithTimeout(ctx, w.opts.StoreTimeout)
	batch, left, err := hs.HeadStartBatch(readCtx, ids, w.opts.AfterCommitTimeout+w.opts.StoreTimeout)
	cancel()
	if err != nil || batch.Len() != len(ids) {
		return nil, false
	}
	// left was measured at the read, after start: counted from start, it
	// ends no later than the lease does.
	return w.publishLeased(ctx, PathAfterCommit, batch, start, left, true), true
}
