package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// settlement is a batch's outcomes on their way to the store, with what
// to report once they are recorded.
type settlement struct {
	path     Path
	token    string
	outcomes []backend.Outcome
	dead     []deadLetter
	// errs are the failed publishes, for PublishNow's error.
	errs []error
}

type deadLetter struct {
	rec Record
	err error
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

// record settles s in the store on its own, reports what it recorded (even
// when some of it could not be), and returns what the round did.
func (w *Worker) record(ctx context.Context, s *settlement) (BatchResult, error) {
	res := s.result()
	settleCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.StoreTimeout)
	settled, err := w.store.Settle(settleCtx, s.token, s.outcomes)
	cancel()
	w.settled(ctx, s, settled)
	res.Stale, res.Dead = settled.Stale, len(settled.Dead)
	if err != nil {
		w.log.ErrorContext(ctx, "outbox settle failed; unrecorded outcomes are retried after the lease expires",
			slog.String("path", string(s.path)), slog.Int("outcomes", len(s.outcomes)), slog.Int("recorded", settled.Applied), slog.Any("error", err))
		w.observe(ctx, Event{Kind: EventSettleFailed, Path: s.path, Err: err})
		return res, fmt.Errorf("outbox: settle: %w", err)
	}
	return res, nil
}

// settled reports what follows from recorded outcomes: a lost lease, and
// the dead letters the store recorded (and only those).
func (w *Worker) settled(ctx context.Context, s *settlement, res backend.SettleResult) {
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
