package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
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

// deliver claims a batch, publishes it and settles the outcomes.
func (w *Worker) deliver(ctx context.Context, p path, params ClaimParams) (BatchResult, error) {
	start := time.Now()
	claimCtx, cancel := context.WithTimeout(ctx, w.opts.StoreTimeout)
	batch, err := w.store.Claim(claimCtx, params)
	cancel()
	if err != nil {
		w.log.ErrorContext(ctx, "outbox claim failed", slog.String("path", p.String()), slog.Any("error", err))
		w.observe(ctx, Event{Kind: EventClaimFailed, Path: p.String(), Err: err})
		return BatchResult{}, fmt.Errorf("outbox: claim: %w", err)
	}
	res := BatchResult{Claimed: batch.Len()}
	if p == afterCommitPath && res.Claimed < len(params.IDs) {
		w.log.DebugContext(ctx, "outbox after-commit publish skipped messages that are not pending or are leased by a worker",
			slog.Int("requested", len(params.IDs)), slog.Int("claimed", res.Claimed))
	}
	if res.Claimed == 0 {
		return res, nil
	}

	// A publish starts only if it and the settle after it fit in the lease,
	// so that no other worker can take the record while it is in flight.
	// The first record is always attempted (the minimum lease covers the
	// claim, one publish and the settle), so every round makes progress.
	lastStart := start.Add(w.opts.LeaseTimeout - w.opts.PublishTimeout - w.opts.StoreTimeout)
	outcomes := make([]Outcome, 0, res.Claimed)
	var (
		failures []error
		dead     []deadLetter
		// held are keys with a failed record in this batch: in ordering
		// mode their later records wait for it.
		held = map[string]bool{}
	)
	fail := func(rec Record, err error) {
		o := w.failed(ctx, p, rec, err)
		outcomes = append(outcomes, o)
		if o.Kind == OutcomeDead {
			dead = append(dead, deadLetter{rec: rec, err: err})
		}
		if rec.Key != "" {
			held[rec.Key] = true
		}
	}
	for _, inv := range batch.Invalid {
		fail(inv.Record, Permanent(fmt.Errorf("outbox: undecodable record: %w", inv.Err)))
	}
	for i, rec := range batch.Records {
		if ctx.Err() != nil || (i > 0 && time.Now().After(lastStart)) || (w.opts.Ordering && held[rec.Key]) {
			outcomes = append(outcomes, Outcome{ID: rec.ID, Kind: OutcomeRelease})
			continue
		}
		began := time.Now()
		err := w.publish(ctx, p, rec.Message)
		latency := time.Since(began)
		if err != nil {
			w.observe(ctx, Event{Kind: EventPublishFailed, Path: p.String(), Record: rec, Latency: latency, Err: err})
			failures = append(failures, fmt.Errorf("outbox: publish %q: %w", rec.ID, err))
			fail(rec, err)
			continue
		}
		w.observe(ctx, Event{Kind: EventPublished, Path: p.String(), Record: rec, Latency: latency})
		outcomes = append(outcomes, Outcome{ID: rec.ID, Kind: OutcomePublished})
		w.log.DebugContext(ctx, "outbox message published", w.recordAttrs(p, rec, StatusPublished)...)
	}
	for _, o := range outcomes {
		res.count(o.Kind)
	}

	settleCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.StoreTimeout)
	settled, err := w.store.Settle(settleCtx, batch.Token, outcomes)
	cancel()
	res.Stale = settled.Stale
	if err != nil {
		w.log.ErrorContext(ctx, "outbox settle failed; unrecorded outcomes are retried after the lease expires",
			slog.String("path", p.String()), slog.Int("outcomes", len(outcomes)), slog.Any("error", err))
		w.observe(ctx, Event{Kind: EventSettleFailed, Path: p.String(), Err: err})
		return res, fmt.Errorf("outbox: settle: %w", err)
	}
	if settled.Stale > 0 {
		w.log.WarnContext(ctx, "outbox lease lost before settle; another worker owns those records",
			slog.String("path", p.String()), slog.Int("stale", settled.Stale))
	}
	w.notifyDead(ctx, dead)
	if p == afterCommitPath {
		return res, errors.Join(failures...)
	}
	return res, nil
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
