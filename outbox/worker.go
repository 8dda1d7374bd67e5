package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// caps is what the store can do beyond Store (backend.CapabilitiesOf).
	caps backend.Capabilities
	sink Sink
	opts WorkerOptions
	log  *slog.Logger

	running atomic.Bool
	wake    chan struct{}
	// retryAfter is the last empty claim's Batch.RetryAfter (nanoseconds).
	retryAfter atomic.Int64

	// breaker holds off a sink that keeps failing; lines bounds the
	// failure lines (see failurelog.go).
	breaker *breaker
	lines   lineLimiter
	// streaks summarise store calls that keep failing (storelog.go).
	streaks storeStreaks
	// waiting are the keys of messages PublishNow left to the workers
	// because they were not their key's oldest pending message (with
	// Ordering): an outcome of their key wakes Run, so that the next one
	// goes out without waiting for PollInterval.
	waitingMu sync.Mutex
	waiting   map[string]struct{}

	// beforeDecide, when set (by tests only), runs before a round decides
	// whether to call the sink for a record or to release it.
	beforeDecide func(Record)
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
	caps := backend.CapabilitiesOf(store)
	if opts.Name == "" { // the outbox's name is given once, to the store
		opts.Name = cmp.Or(caps.Consumer, caps.Outbox)
	}
	opts = opts.WithDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Retention > 0 && caps.Purge == nil {
		return nil, fmt.Errorf("outbox: Retention %v: the store (%T) cannot purge: its Capabilities have no Purge", opts.Retention, store)
	}
	return &Worker{
		store:   store,
		caps:    caps,
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
// passed (or at once again after a full batch, or a claim that said it
// left due work behind: backend.Batch.More), until ctx is cancelled.
// While it holds off a failing sink, it claims one record only when a
// probe is due (see SinkBreaker). It returns nil on a clean stop and ErrWorkerRunning if the
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

	if p := w.caps.Purge; p != nil && w.opts.Retention > 0 {
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
			_, _ = w.settle(ctx, carry)
		}
	}()
	timer := time.NewTimer(w.opts.PollInterval)
	defer timer.Stop()
	for {
		params, g, wait := w.nextRound()
		if wait > 0 { // the sink is held off until its next probe (holdoff.go)
			if !w.awaitProbe(ctx, timer, &carry, wait) {
				return nil
			}
			continue
		}
		s, err := w.round(ctx, PathWorker, params, carry, g)
		if g == gateProbe {
			w.breaker.endProbe()
		}
		carry = nil
		if s != nil {
			if ctx.Err() == nil && w.moreWork(s) {
				carry = s
				continue
			}
			_, err = w.settle(ctx, s)
		}
		if ctx.Err() != nil {
			return nil
		}
		_ = err // logged and observed where it happened; the next round tries again
		w.flushFailureLines(ctx)
		timer.Reset(w.nextPoll())
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-w.wake:
		}
	}
}

// nextPoll is how long Run waits for its next round: PollInterval, or
// less when the last claim said when to come back (Batch.RetryAfter).
func (w *Worker) nextPoll() time.Duration {
	if d := time.Duration(w.retryAfter.Swap(0)); d > 0 && d < w.opts.PollInterval {
		return d
	}
	return w.opts.PollInterval
}

// Notify wakes a running worker for a round now rather than at the next
// PollInterval: call it after committing messages enqueued without a head
// start (or after a PublishNow that left work behind; PublishNow does it
// itself). It never blocks; wake-ups that come while the worker is busy
// collapse into one. It has no effect on other instances, nor while the
// worker holds off a failing sink: then a round waits for its probe (see
// SinkBreaker).
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
// was full, or the claim said it left due work (say, ordered, records
// behind the heads it took), and it made progress, so the sink is not
// simply down (then waiting out PollInterval spares it).
func (w *Worker) moreWork(s *settlement) bool {
	res := s.result()
	return (res.Claimed >= w.opts.BatchSize || s.more) && res.Published+res.Dead > 0
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
// not the worker holds off the sink (see SinkBreaker); a publish of it
// that goes through ends a hold-off, and failures count towards one
// (while the sink is held off, they are not probes: they do not delay
// the next).
func (w *Worker) ProcessBatch(ctx context.Context) (BatchResult, error) {
	if err := ctx.Err(); err != nil {
		return BatchResult{}, err
	}
	s, err := w.round(ctx, PathWorker, w.claimParams(), nil, gateOpen)
	if s == nil {
		return BatchResult{}, err
	}
	return w.settle(ctx, s)
}
