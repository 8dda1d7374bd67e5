package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// round claims a batch and publishes it. With carry, the previous
// batch's outcomes, it records those first, in the claim's own
// transaction when the store is a backend.SettleClaimer. With holdOff,
// the records not yet attempted once a publish of the batch failed while
// the worker holds off the sink are released (see SinkBreaker). It returns the batch's outcomes,
// not yet recorded, or nil when nothing was claimed (or the claim failed:
// the error, already logged and observed).
func (w *Worker) round(ctx context.Context, p Path, params backend.ClaimParams, carry *settlement, holdOff bool) (*settlement, error) {
	start := time.Now()
	batch, err := w.claim(ctx, params, carry)
	if err != nil {
		w.log.ErrorContext(ctx, "outbox claim failed", slog.String("path", string(p)), slog.Any("error", err))
		w.observe(ctx, Event{Kind: EventClaimFailed, Path: p, Err: err})
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	if p == PathAfterCommit && batch.Len() < len(params.IDs) {
		w.log.DebugContext(ctx, "outbox after-commit publish skipped messages that are not pending or are leased by a worker",
			slog.Int("requested", len(params.IDs)), slog.Int("claimed", batch.Len()))
	}
	if batch.Len() == 0 {
		return nil, nil
	}
	return w.publishLeased(ctx, p, batch, start, w.opts.LeaseTimeout, holdOff), nil
}

// claim runs one claim, bounded by StoreTimeout, recording carry with it.
// If the store cannot record carry in the claim's transaction, or that
// fails (say, one outcome could not be written), carry is recorded alone
// (fenced, so harmless if a failed claim's commit did land) and the claim
// runs on its own.
func (w *Worker) claim(ctx context.Context, params backend.ClaimParams, carry *settlement) (backend.Batch, error) {
	if carry != nil {
		if sc, ok := w.store.(backend.SettleClaimer); ok {
			claimCtx, cancel := context.WithTimeout(ctx, w.opts.StoreTimeout)
			settled, batch, err := sc.SettleAndClaim(claimCtx, backend.Settlement{Token: carry.token, Outcomes: carry.outcomes}, params)
			cancel()
			if err == nil {
				w.settled(ctx, carry, settled)
				w.wakeForWaitingKeys(carry)
				return batch, nil
			}
		}
		_, _ = w.record(ctx, carry)
	}
	claimCtx, cancel := context.WithTimeout(ctx, w.opts.StoreTimeout)
	defer cancel()
	return w.store.Claim(claimCtx, params)
}

// publishLeased publishes a claimed batch whose lease lasts at least
// lease from start, up to Concurrency calls at once, and returns its
// outcomes. The records of one key stay in claim order, one at a time
// (records with an empty key are independent). A publish starts only if
// it and the settle after it fit in the lease, so that no other worker
// can take the record while it is in flight; the batch's first publish
// always starts (the minimum lease covers a claim, one publish and the
// settle), so every round makes progress. Records the store could not
// decode fail as permanent errors. With holdOff, once a publish of the
// batch has failed while the worker holds off the sink, the records not
// yet attempted are released instead (see SinkBreaker).
func (w *Worker) publishLeased(ctx context.Context, p Path, batch backend.Batch, start time.Time, lease time.Duration, holdOff bool) *settlement {
	b := &batchRun{
		w: w, p: p, records: batch.Records, holdOff: holdOff,
		lastStart: start.Add(lease - w.publishTimeout(p) - w.opts.StoreTimeout),
		s:         newSettlement(p, batch),
	}
	w.eachGroup(groupByKey(batch.Records), func(group []int) { b.publishGroup(ctx, group) })
	for _, inv := range batch.Invalid {
		b.failed(ctx, inv.Record, Permanent(fmt.Errorf("outbox: undecodable record: %w", inv.Err)), -1)
	}
	return b.s
}

// eachGroup runs fn for every group, on up to Concurrency goroutines, and
// returns when all are done.
func (w *Worker) eachGroup(groups [][]int, fn func(group []int)) {
	n := min(w.opts.Concurrency, len(groups))
	if n <= 1 {
		for _, g := range groups {
			fn(g)
		}
		return
	}
	jobs := make(chan []int)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for g := range jobs {
				fn(g)
			}
		})
	}
	for _, g := range groups {
		jobs <- g
	}
	close(jobs)
	wg.Wait()
}

// batchRun is a batch being published: the outcome of record i goes to
// s.outcomes[i].
type batchRun struct {
	w         *Worker
	p         Path
	records   []Record
	holdOff   bool
	lastStart time.Time
	started   atomic.Bool
	failedAny atomic.Bool

	mu sync.Mutex // guards s.dead, s.errs and outcomes appended past the records
	s  *settlement
}

// publishGroup publishes the records of one key (or one unkeyed record)
// in order. In ordering mode a failure holds back the rest of its key: they
// are released, not attempted.
func (b *batchRun) publishGroup(ctx context.Context, group []int) {
	held := false
	for _, i := range group {
		rec := b.records[i]
		first := b.started.CompareAndSwap(false, true)
		if held || ctx.Err() != nil || (!first && time.Now().After(b.lastStart)) || b.holdOff && b.failedAny.Load() && b.w.breaker.heldOff() {
			b.s.outcomes[i] = backend.Outcome{ID: rec.ID, Seq: rec.Seq, Kind: backend.OutcomeRelease}
			continue
		}
		began := time.Now()
		err := b.w.publish(ctx, b.p, rec.Message)
		latency := time.Since(began)
		b.w.noteOutcome(ctx, err)
		if err != nil {
			b.failedAny.Store(true)
			b.w.observe(ctx, Event{Kind: EventPublishFailed, Path: b.p, Record: rec, Latency: latency, Err: err})
			b.failed(ctx, rec, err, i)
			held = b.w.opts.Ordering && rec.Key != ""
			continue
		}
		b.w.observe(ctx, Event{Kind: EventPublished, Path: b.p, Record: rec, Latency: latency})
		b.s.outcomes[i] = backend.Outcome{ID: rec.ID, Seq: rec.Seq, Kind: backend.OutcomePublished}
		if b.w.log.Enabled(ctx, slog.LevelDebug) { // spares building the fields of every record
			b.w.log.DebugContext(ctx, "outbox message published", b.w.recordAttrs(b.p, rec, StatusPublished)...)
		}
	}
}

// failed records a failed publish of rec, the i-th record of the batch (or
// -1 for an undecodable one, whose outcome is appended).
func (b *batchRun) failed(ctx context.Context, rec Record, err error, i int) {
	o := b.w.failed(ctx, b.p, rec, err)
	b.mu.Lock()
	defer b.mu.Unlock()
	if i < 0 {
		b.s.outcomes = append(b.s.outcomes, o)
	} else {
		b.s.outcomes[i] = o
	}
	b.s.errs = append(b.s.errs, fmt.Errorf("outbox: publish %q: %w", rec.ID, err))
	if o.Kind == backend.OutcomeDead {
		b.s.dead = append(b.s.dead, deadLetter{rec: rec, err: err})
	}
}

// groupByKey groups record indexes by key, in order of first appearance,
// each group in claim order; records without a key are groups of one.
func groupByKey(recs []Record) [][]int {
	var groups [][]int
	byKey := map[string]int{}
	for i, r := range recs {
		if r.Key == "" {
			groups = append(groups, []int{i})
			continue
		}
		g, ok := byKey[r.Key]
		if !ok {
			g = len(groups)
			byKey[r.Key] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// publishTimeout bounds a sink call on path p.
func (w *Worker) publishTimeout(p Path) time.Duration {
	if p == PathAfterCommit {
		return w.opts.AfterCommitTimeout
	}
	return w.opts.PublishTimeout
}

// publish calls the sink with its own timeout (AfterCommitTimeout for
// PublishNow, PublishTimeout for the worker), turning a panic into an
// error. On the worker path the publish is not cut short by cancelling
// ctx: a message in flight finishes within PublishTimeout.
func (w *Worker) publish(ctx context.Context, p Path, msg Message) (err error) {
	if p == PathWorker {
		ctx = context.WithoutCancel(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, w.publishTimeout(p))
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("outbox: sink panicked: %v", r)
			w.log.ErrorContext(ctx, "outbox sink panicked",
				slog.String("event_id", msg.ID), slog.String("panic", backend.Truncate(fmt.Sprint(r), backend.MaxLastErrorBytes)),
				slog.String("stack", backend.Truncate(string(debug.Stack()), 4096)))
		}
	}()
	return w.sink.Publish(ctx, msg)
}

// failed turns a failed publish into an outcome and logs it, saying what
// happens next. On the worker path it is an attempt that the retry policy
// schedules (an Unavailable error is retried whatever the policy, unless
// DeadLetterUnavailable); on the after-commit path the record is only
// released, due for the worker at once.
func (w *Worker) failed(ctx context.Context, p Path, rec Record, err error) backend.Outcome {
	text := backend.Truncate(err.Error(), backend.MaxLastErrorBytes)
	unavailable := IsUnavailable(err)
	if p == PathAfterCommit {
		msg := "outbox after-commit publish failed; left to the worker, due now"
		switch {
		case unavailable:
			msg = "outbox after-commit publish failed: the sink is unavailable; left to the worker, which retries it once the sink answers"
		case IsPermanent(err):
			msg = "outbox after-commit publish failed with a permanent error; left to the worker, whose attempt dead-letters it if it fails the same way"
		}
		w.logFailure(ctx, slog.LevelWarn, msg, append(w.recordAttrs(p, rec, StatusPending), slog.String("error", text))...)
		return backend.Outcome{ID: rec.ID, Seq: rec.Seq, Kind: backend.OutcomeRelease}
	}
	rec.Attempts++
	var (
		delay time.Duration
		retry bool
		why   string
	)
	switch {
	case unavailable && w.opts.DeadLetterUnavailable:
		why = "outbox message dead: the sink is unavailable, and DeadLetterUnavailable is set"
	case unavailable:
		delay, retry = w.opts.Retry.NextRetry(rec.Attempts, err)
		if !retry { // no policy dead-letters an Unavailable error: the next probe decides
			delay, retry = w.opts.PollInterval, true
		}
	default:
		delay, retry = w.opts.Retry.NextRetry(rec.Attempts, err)
		why = "outbox message dead: the retry policy gave up"
		if IsPermanent(err) {
			why = "outbox message dead: the sink reported a permanent error"
		}
	}
	if !retry {
		w.logFailure(ctx, slog.LevelError, why, append(w.recordAttrs(p, rec, StatusDead), slog.String("error", text))...)
		return backend.Outcome{ID: rec.ID, Seq: rec.Seq, Kind: backend.OutcomeDead, Error: text}
	}
	delay = max(delay, 0)
	msg := "outbox publish failed; will retry"
	if unavailable {
		msg = "outbox publish failed: the sink is unavailable; will retry once it answers"
	}
	w.logFailure(ctx, w.retryLevel(rec.Attempts), msg,
		append(w.recordAttrs(p, rec, StatusPending), slog.Duration("retry_in", delay), slog.String("error", text))...)
	return backend.Outcome{ID: rec.ID, Seq: rec.Seq, Kind: backend.OutcomeRetry, RetryIn: delay, Error: text}
}

// recordAttrs are the structured log fields of one record (worker and
// node_id come from the worker's logger), and the W3C traceparent of the
// request that wrote it, when it has one.
func (w *Worker) recordAttrs(p Path, rec Record, status Status) []any {
	attrs := []any{
		slog.String("event_id", rec.ID),
		slog.String("event_type", rec.Type),
		slog.String(w.opts.KeyAttr, rec.Key),
		slog.Int("retry_count", rec.Attempts),
		slog.String("status", string(status)),
		slog.String("path", string(p)),
	}
	if tp := rec.Headers[HeaderTraceParent]; tp != "" {
		attrs = append(attrs, slog.String(HeaderTraceParent, tp))
	}
	return attrs
}
