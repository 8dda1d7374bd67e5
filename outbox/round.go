package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// A round of the worker, top to bottom: claim a batch (claim), publish its
// records (publishLeased, publishGroup, publish), decide each failed
// one's outcome (outcomeOf), settle the outcomes in the store (settle),
// and report what was recorded (report). Run repeats rounds, ProcessBatch
// runs one, and PublishNow (aftercommit.go) runs the publish and settle
// steps on the messages its caller just committed.

// gate says how a round treats a sink the worker holds off (see
// SinkBreaker).
type gate int

const (
	// gateHeld: while the sink is held off, the records not yet
	// published are released untried.
	gateHeld gate = iota
	// gateProbe: as gateHeld, but the round holds the probe: its first
	// call may go to the held-off sink.
	gateProbe
	// gateOpen: every record is tried, held off or not (ProcessBatch).
	gateOpen
)

// round claims a batch and publishes it. With carry, the previous
// batch's outcomes, it records those first, in the claim's own
// transaction when the store is a backend.SettleClaimer. g says what it
// does while the worker holds off the sink. It returns the batch's
// outcomes, not yet recorded, or nil when nothing was claimed (or the
// claim failed: the error, already logged and observed).
func (w *Worker) round(ctx context.Context, p Path, params backend.ClaimParams, carry *settlement, g gate) (*settlement, error) {
	start := time.Now()
	batch, err := w.claim(ctx, params, carry)
	if err != nil && ctx.Err() != nil {
		// The worker is stopping (or the caller gave up): not a failure
		// of the store, and nothing was claimed.
		w.log.DebugContext(ctx, "outbox claim interrupted", slog.String("path", string(p)), slog.Any("error", err))
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	if err != nil {
		w.logStoreFailure(ctx, opClaim, p, err, "outbox claim failed")
		w.observe(ctx, Event{Kind: EventClaimFailed, Path: p, Err: err})
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	w.noteStoreSuccess(ctx, opClaim, p)
	if p == PathAfterCommit && batch.Len() < len(params.IDs) {
		w.log.DebugContext(ctx, "outbox after-commit publish skipped messages that are not pending or are leased by a worker",
			slog.Int("requested", len(params.IDs)), slog.Int("claimed", batch.Len()))
	}
	if batch.Len() == 0 {
		if p == PathWorker {
			w.retryAfter.Store(int64(batch.RetryAfter))
		}
		return nil, nil
	}
	s := w.publishLeased(ctx, p, batch, start, w.opts.LeaseTimeout, g)
	s.more = batch.More
	return s, nil
}

// claim runs one claim, bounded by StoreTimeout, recording carry with it.
// If the store cannot record carry in the claim's transaction, or that
// fails (say, one outcome could not be written), carry is recorded alone
// (fenced, so harmless if a failed claim's commit did land) and the claim
// runs on its own.
func (w *Worker) claim(ctx context.Context, params backend.ClaimParams, carry *settlement) (backend.Batch, error) {
	if carry != nil {
		if sc := w.caps.SettleAndClaim; sc != nil {
			claimCtx, cancel := context.WithTimeout(ctx, w.opts.StoreTimeout)
			settled, batch, err := sc.SettleAndClaim(claimCtx, backend.Settlement{Token: carry.token, Outcomes: carry.outcomes}, params)
			cancel()
			if err == nil {
				w.noteStoreSuccess(ctx, opSettle, carry.path)
				w.report(ctx, carry, settled)
				w.wakeForWaitingKeys(carry)
				return batch, nil
			}
		}
		_, _ = w.settle(ctx, carry)
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
// decode fail as permanent errors. Unless g is gateOpen, records are
// released untried while the worker holds off the sink, but for the
// probe's one call with gateProbe (see SinkBreaker).
func (w *Worker) publishLeased(ctx context.Context, p Path, batch backend.Batch, start time.Time, lease time.Duration, g gate) *settlement {
	b := &batchRun{
		w: w, p: p, records: batch.Records, gate: g,
		lastStart: start.Add(lease - w.publishTimeout(p) - w.opts.StoreTimeout),
		s:         newSettlement(p, batch),
	}
	b.probe.Store(g == gateProbe)
	w.eachGroup(groupByKey(batch.Records), func(group []int) { b.publishGroup(ctx, group) })
	for _, inv := range batch.Invalid {
		b.fail(ctx, inv.Record, Permanent(fmt.Errorf("outbox: undecodable record: %w", inv.Err)), -1)
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
	gate      gate
	lastStart time.Time
	started   atomic.Bool
	// probe says the round still holds the probe of a held-off sink:
	// one call it may make.
	probe atomic.Bool

	mu sync.Mutex // guards s.dead, s.errs and outcomes appended past the records
	s  *settlement
}

// publishGroup publishes the records of one key (or one unkeyed record)
// in order. In ordering mode a record that is not published holds back
// the rest of its key: after a failure, or a release (the lease running
// short, the worker stopping, the sink held off), they are released, not
// attempted. (A release for a held-off sink is not final: another
// group's probe may bring the sink back meanwhile, and the key's next
// record would then have gone out before the one released.)
func (b *batchRun) publishGroup(ctx context.Context, group []int) {
	held := false
	holdsKey := func(rec Record) bool { return b.w.opts.Ordering && rec.Key != "" }
	for _, i := range group {
		rec := b.records[i]
		if b.w.beforeDecide != nil {
			b.w.beforeDecide(rec)
		}
		first := b.started.CompareAndSwap(false, true)
		release := held || ctx.Err() != nil || (!first && time.Now().After(b.lastStart))
		probe := false
		if !release && b.gate != gateOpen && b.w.breaker.heldOff() {
			probe = b.probe.CompareAndSwap(true, false)
			release = !probe // held off: only the probe calls the sink
		}
		if release {
			b.s.outcomes[i] = backend.Outcome{ID: rec.ID, Seq: rec.Seq, Kind: backend.OutcomeRelease}
			held = holdsKey(rec)
			continue
		}
		began := time.Now()
		err := b.w.publish(ctx, b.p, rec.Message)
		latency := time.Since(began)
		b.w.noteOutcome(ctx, err, probe)
		if err != nil {
			b.w.observe(ctx, Event{Kind: EventPublishFailed, Path: b.p, Record: rec, Latency: latency, Err: err})
			b.fail(ctx, rec, err, i)
			held = holdsKey(rec)
			continue
		}
		b.w.observe(ctx, Event{Kind: EventPublished, Path: b.p, Record: rec, Latency: latency})
		b.s.outcomes[i] = backend.Outcome{ID: rec.ID, Seq: rec.Seq, Kind: backend.OutcomePublished}
		if b.w.log.Enabled(ctx, slog.LevelDebug) { // spares building the fields of every record
			b.w.log.DebugContext(ctx, "outbox message published", b.w.recordAttrs(b.p, rec, StatusPublished)...)
		}
	}
}

// fail keeps the outcome of a failed publish of rec, the i-th record of
// the batch (or -1 for an undecodable one, whose outcome is appended).
func (b *batchRun) fail(ctx context.Context, rec Record, err error, i int) {
	o := b.w.outcomeOf(ctx, b.p, rec, err)
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

// outcomeOf turns a failed publish into an outcome and logs it, saying what
// happens next. On the worker path it is an attempt that the retry policy
// schedules (an Unavailable error is retried whatever the policy, unless
// DeadLetterUnavailable); on the after-commit path the record is only
// released, due for the worker at once.
func (w *Worker) outcomeOf(ctx context.Context, p Path, rec Record, err error) backend.Outcome {
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

// settlement is a batch's outcomes on their way to the store, with what
// to report once they are recorded.
type settlement struct {
	path     Path
	token    string
	outcomes []backend.Outcome
	// keys are the records' keys, one per outcome of a decodable record.
	keys []string
	dead []deadLetter
	// errs are the failed publishes, for PublishNow's error.
	errs []error
	// more: the claim left due work it could not take (backend.Batch.More).
	more bool
}

type deadLetter struct {
	rec Record
	err error
}

// newSettlement is the settlement of a claimed batch, its outcomes to be
// filled in.
func newSettlement(p Path, batch backend.Batch) *settlement {
	s := &settlement{path: p, token: batch.Token, outcomes: make([]backend.Outcome, len(batch.Records)), keys: make([]string, len(batch.Records))}
	for i, r := range batch.Records {
		s.keys[i] = r.Key
	}
	return s
}

// result counts the outcomes, before they are recorded.
func (s *settlement) result() BatchResult {
	res := BatchResult{Claimed: len(s.outcomes)}
	for _, o := range s.outcomes {
		switch o.Kind {
		case backend.OutcomePublished:
			res.Published++
		case backend.OutcomeRetry:
			res.Retried++
		case backend.OutcomeDead:
			res.Dead++
		case backend.OutcomeRelease:
			res.Released++
		}
	}
	return res
}

// settle records s in the store on its own, reports what it recorded (even
// when some of it could not be), and returns what the round did.
func (w *Worker) settle(ctx context.Context, s *settlement) (BatchResult, error) {
	res := s.result()
	settleCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.StoreTimeout)
	settled, err := w.store.Settle(settleCtx, s.token, s.outcomes)
	cancel()
	w.report(ctx, s, settled)
	w.wakeForWaitingKeys(s)
	res.Stale, res.Dead = settled.Stale, len(settled.Dead)
	if err != nil {
		w.logStoreFailure(ctx, opSettle, s.path, err, "outbox settle failed; unrecorded outcomes are retried after the lease expires",
			slog.Int("outcomes", len(s.outcomes)), slog.Int("recorded", settled.Applied))
		w.observe(ctx, Event{Kind: EventSettleFailed, Path: s.path, Err: err})
		return res, fmt.Errorf("outbox: settle: %w", err)
	}
	w.noteStoreSuccess(ctx, opSettle, s.path)
	return res, nil
}

// report reports what follows from recorded outcomes: a lost lease, and
// the dead letters the store recorded (and only those).
func (w *Worker) report(ctx context.Context, s *settlement, res backend.SettleResult) {
	if res.Stale > 0 {
		w.log.WarnContext(ctx, "outbox lease lost before settle; another worker owns those records",
			slog.String("path", string(s.path)), slog.Int("stale", res.Stale))
		w.observe(ctx, Event{Kind: EventLeaseLost, Path: s.path, Count: res.Stale})
	}
	for _, d := range s.dead {
		if _, ok := slices.BinarySearch(res.Dead, d.rec.ID); ok {
			w.notifyDead(ctx, d)
		}
	}
}

// notifyDead reports a recorded dead letter to the Observer and OnDead.
func (w *Worker) notifyDead(ctx context.Context, d deadLetter) {
	d.rec.Attempts++
	d.rec.Status = StatusDead
	d.rec.LastError = backend.Truncate(d.err.Error(), backend.MaxLastErrorBytes)
	w.observe(ctx, Event{Kind: EventDead, Path: PathWorker, Record: d.rec, Err: d.err})
	if w.opts.OnDead == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			w.log.ErrorContext(ctx, "outbox OnDead hook panicked", slog.String("event_id", d.rec.ID),
				slog.String("panic", backend.Truncate(fmt.Sprint(r), backend.MaxLastErrorBytes)))
		}
	}()
	w.opts.OnDead(ctx, d.rec, d.err)
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
