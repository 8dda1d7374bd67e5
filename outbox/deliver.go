package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// path tells the two ways a record is delivered apart: they differ in what
// a failure means and in which context bounds a publish.
type path int

const (
	// workerPath: a round of the background worker. A failure is an
	// attempt (counted, scheduled by the retry policy); cancelling the
	// round's context does not cut a publish in flight.
	workerPath path = iota
	// afterCommitPath: PublishNow. A failure is not counted and the record
	// is released for the worker; the caller's context bounds the publish.
	afterCommitPath
)

func (p path) String() string {
	if p == afterCommitPath {
		return "after_commit"
	}
	return "worker"
}

// settlement is a batch's outcomes on their way to the store, with what
// to report once they are recorded.
type settlement struct {
	path     path
	token    string
	outcomes []Outcome
	dead     []deadLetter
	// errs are the failed publishes, for PublishNow's error.
	errs []error
}

// deliver runs one round: it claims a batch (recording carry, the previous
// batch's outcomes, in the same transaction), publishes it, and settles the
// outcomes. With deferFull, the outcomes of a full batch that made progress
// are not settled but returned, for the next claim to record: one commit
// per batch while there is a backlog.
func (w *Worker) deliver(ctx context.Context, p path, params ClaimParams, carry *settlement, deferFull bool) (BatchResult, *settlement, error) {
	start := time.Now()
	if carry != nil {
		params.Settle = &Settlement{Token: carry.token, Outcomes: carry.outcomes}
	}
	batch, err := w.claim(ctx, params)
	if carry != nil {
		if err != nil {
			// The claim and the outcomes it was to record failed together
			// (say, one outcome could not be written): record the outcomes
			// alone (fenced, so harmless if the claim's commit did land),
			// then claim again without them.
			_, _ = w.settle(ctx, carry)
			params.Settle = nil
			batch, err = w.claim(ctx, params)
		} else {
			w.settled(ctx, carry, batch.Settled)
		}
	}
	if err != nil {
		w.log.ErrorContext(ctx, "outbox claim failed", slog.String("path", p.String()), slog.Any("error", err))
		w.observe(ctx, Event{Kind: EventClaimFailed, Path: p.String(), Err: err})
		return BatchResult{}, nil, fmt.Errorf("outbox: claim: %w", err)
	}
	res := BatchResult{Claimed: batch.Len()}
	if p == afterCommitPath && res.Claimed < len(params.IDs) {
		w.log.DebugContext(ctx, "outbox after-commit publish skipped messages that are not pending or are leased by a worker",
			slog.Int("requested", len(params.IDs)), slog.Int("claimed", res.Claimed))
	}
	if res.Claimed == 0 {
		return res, nil, nil
	}

	s := w.publishBatch(ctx, p, batch, start)
	for _, o := range s.outcomes {
		res.count(o.Kind)
	}
	if deferFull && ctx.Err() == nil && w.moreWork(res) {
		return res, s, nil
	}
	settled, err := w.settle(ctx, s)
	res.Stale, res.Dead = settled.Stale, len(settled.Dead)
	if err != nil {
		return res, nil, fmt.Errorf("outbox: settle: %w", err)
	}
	if p == afterCommitPath {
		return res, nil, errors.Join(s.errs...)
	}
	return res, nil, nil
}

// claim runs one claim, bounded by StoreTimeout.
func (w *Worker) claim(ctx context.Context, params ClaimParams) (Batch, error) {
	claimCtx, cancel := context.WithTimeout(ctx, w.opts.StoreTimeout)
	defer cancel()
	return w.store.Claim(claimCtx, params)
}

// settle records a settlement in the store on its own, and reports what
// it recorded, even when some of it could not be.
func (w *Worker) settle(ctx context.Context, s *settlement) (SettleResult, error) {
	settleCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.StoreTimeout)
	res, err := w.store.Settle(settleCtx, s.token, s.outcomes)
	cancel()
	w.settled(ctx, s, res)
	if err != nil {
		w.log.ErrorContext(ctx, "outbox settle failed; unrecorded outcomes are retried after the lease expires",
			slog.String("path", s.path.String()), slog.Int("outcomes", len(s.outcomes)), slog.Int("recorded", res.Applied), slog.Any("error", err))
		w.observe(ctx, Event{Kind: EventSettleFailed, Path: s.path.String(), Err: err})
		return res, err
	}
	return res, nil
}

// settled reports what follows from recorded outcomes: a lost lease, and
// the dead letters the store recorded (and only those).
func (w *Worker) settled(ctx context.Context, s *settlement, res SettleResult) {
	if res.Stale > 0 {
		w.log.WarnContext(ctx, "outbox lease lost before settle; another worker owns those records",
			slog.String("path", s.path.String()), slog.Int("stale", res.Stale))
	}
	if len(res.Dead) == 0 {
		return
	}
	recorded := make([]deadLetter, 0, len(res.Dead))
	for _, d := range s.dead {
		if _, ok := slices.BinarySearch(res.Dead, d.rec.ID); ok {
			recorded = append(recorded, d)
		}
	}
	w.notifyDead(ctx, recorded)
}

// publishBatch publishes a claimed batch, up to Concurrency calls at once.
// The records of one key stay in claim order, one at a time (records with
// an empty key are independent). A publish starts only if it and the
// settle after it fit in the lease, so that no other worker can take the
// record while it is in flight; the batch's first publish always starts
// (the minimum lease covers a claim, one publish and the settle), so every
// round makes progress.
func (w *Worker) publishBatch(ctx context.Context, p path, batch Batch, start time.Time) *settlement {
	s := &settlement{path: p, token: batch.Token}
	lastStart := start.Add(w.opts.LeaseTimeout - w.opts.PublishTimeout - w.opts.StoreTimeout)
	outcomes := make([]Outcome, len(batch.Records))
	var (
		mu      sync.Mutex // guards s.dead and s.errs
		started atomic.Bool
	)
	publishGroup := func(group []int) {
		held := false // in ordering mode, a failure holds back the rest of its key
		for _, i := range group {
			rec := batch.Records[i]
			first := started.CompareAndSwap(false, true)
			if held || ctx.Err() != nil || (!first && time.Now().After(lastStart)) {
				outcomes[i] = Outcome{ID: rec.ID, Kind: OutcomeRelease}
				continue
			}
			began := time.Now()
			err := w.publish(ctx, p, rec.Message)
			latency := time.Since(began)
			if err == nil {
				w.observe(ctx, Event{Kind: EventPublished, Path: p.String(), Record: rec, Latency: latency})
				outcomes[i] = Outcome{ID: rec.ID, Kind: OutcomePublished}
				if w.log.Enabled(ctx, slog.LevelDebug) { // spares building the fields of every record
					w.log.DebugContext(ctx, "outbox message published", w.recordAttrs(p, rec, StatusPublished)...)
				}
				continue
			}
			w.observe(ctx, Event{Kind: EventPublishFailed, Path: p.String(), Record: rec, Latency: latency, Err: err})
			outcomes[i] = w.failed(ctx, p, rec, err)
			held = w.opts.Ordering && rec.Key != ""
			mu.Lock()
			s.errs = append(s.errs, fmt.Errorf("outbox: publish %q: %w", rec.ID, err))
			if outcomes[i].Kind == OutcomeDead {
				s.dead = append(s.dead, deadLetter{rec: rec, err: err})
			}
			mu.Unlock()
		}
	}
	groups := groupByKey(batch.Records)
	if n := min(w.opts.Concurrency, len(groups)); n <= 1 {
		for _, g := range groups {
			publishGroup(g)
		}
	} else {
		jobs := make(chan []int)
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for g := range jobs {
					publishGroup(g)
				}
			}()
		}
		for _, g := range groups {
			jobs <- g
		}
		close(jobs)
		wg.Wait()
	}
	s.outcomes = outcomes
	for _, inv := range batch.Invalid {
		err := Permanent(fmt.Errorf("outbox: undecodable record: %w", inv.Err))
		o := w.failed(ctx, p, inv.Record, err)
		s.outcomes = append(s.outcomes, o)
		if o.Kind == OutcomeDead {
			s.dead = append(s.dead, deadLetter{rec: inv.Record, err: err})
		}
	}
	return s
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

type deadLetter struct {
	rec Record
	err error
}

// notifyDead reports each recorded dead letter to the Observer and OnDead.
func (w *Worker) notifyDead(ctx context.Context, dead []deadLetter) {
	for _, d := range dead {
		d.rec.Attempts++
		d.rec.Status = StatusDead
		d.rec.LastError = Truncate(d.err.Error(), MaxLastErrorBytes)
		w.observe(ctx, Event{Kind: EventDead, Path: workerPath.String(), Record: d.rec, Err: d.err})
		if w.opts.OnDead == nil {
			continue
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					w.log.ErrorContext(ctx, "outbox OnDead hook panicked", slog.String("event_id", d.rec.ID),
						slog.String("panic", Truncate(fmt.Sprint(r), MaxLastErrorBytes)))
				}
			}()
			w.opts.OnDead(ctx, d.rec, d.err)
		}()
	}
}

func (r *BatchResult) count(k OutcomeKind) {
	switch k {
	case OutcomePublished:
		r.Published++
	case OutcomeRetry:
		r.Retried++
	case OutcomeDead:
		r.Dead++
	case OutcomeRelease:
		r.Released++
	}
}

// publish calls the sink with its own timeout, turning a panic into an
// error. On the worker path the publish is not cut short by cancelling ctx:
// a message in flight finishes within PublishTimeout.
func (w *Worker) publish(ctx context.Context, p path, msg Message) (err error) {
	if p == workerPath {
		ctx = context.WithoutCancel(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, w.opts.PublishTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("outbox: sink panicked: %v", r)
			w.log.ErrorContext(ctx, "outbox sink panicked",
				slog.String("event_id", msg.ID), slog.String("panic", Truncate(fmt.Sprint(r), MaxLastErrorBytes)),
				slog.String("stack", Truncate(string(debug.Stack()), 4096)))
		}
	}()
	return w.sink.Publish(ctx, msg)
}

// failed turns a failed publish into an outcome and logs it. On the worker
// path it is an attempt that the retry policy schedules; on the after-commit
// path the record is only released.
func (w *Worker) failed(ctx context.Context, p path, rec Record, err error) Outcome {
	text := Truncate(err.Error(), MaxLastErrorBytes)
	if p == afterCommitPath {
		w.log.WarnContext(ctx, "outbox after-commit publish failed; the worker will deliver it",
			append(w.recordAttrs(p, rec, StatusPending), slog.String("error", text))...)
		return Outcome{ID: rec.ID, Kind: OutcomeRelease}
	}
	rec.Attempts++
	delay, retry := w.opts.Retry.NextRetry(rec.Attempts, err)
	if !retry {
		w.log.ErrorContext(ctx, "outbox message dead: the retry policy gave up",
			append(w.recordAttrs(p, rec, StatusDead), slog.String("error", text))...)
		return Outcome{ID: rec.ID, Kind: OutcomeDead, Error: text}
	}
	delay = max(delay, 0)
	w.log.WarnContext(ctx, "outbox publish failed; will retry",
		append(w.recordAttrs(p, rec, StatusPending), slog.Duration("retry_in", delay), slog.String("error", text))...)
	return Outcome{ID: rec.ID, Kind: OutcomeRetry, RetryIn: delay, Error: text}
}

// recordAttrs are the seed's structured log fields for one record (worker
// and node_id come from the worker's logger), and the W3C traceparent of
// the request that wrote it, when it has one.
func (w *Worker) recordAttrs(p path, rec Record, status Status) []any {
	attrs := []any{
		slog.String("event_id", rec.ID),
		slog.String("event_type", rec.Type),
		slog.String(w.opts.KeyAttr, rec.Key),
		slog.Int("retry_count", rec.Attempts),
		slog.String("status", string(status)),
		slog.String("path", p.String()),
	}
	if tp := rec.Headers[HeaderTraceParent]; tp != "" {
		attrs = append(attrs, slog.String(HeaderTraceParent, tp))
	}
	return attrs
}
