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
	// keys are the records' keys, one per outcome of a decodable record.
	keys []string
	dead []deadLetter
	// errs are the failed publishes, for PublishNow's error.
	errs []error
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
	w.wakeForWaitingKeys(s)
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

// maxWaitingKeys bounds Worker.waiting.
const maxWaitingKeys = 10_000

// waitFor notes keys whose messages PublishNow left to the workers because
// an older record of the key was pending.
func (w *Worker) waitFor(keys []string) {
	w.waitingMu.Lock()
	defer w.waitingMu.Unlock()
	if len(w.waiting)+len(keys) > maxWaitingKeys {
		// Keys whose records another instance settles are never removed:
		// start over, and let those wait for PollInterval.
		clear(w.waiting)
	}
	for _, k := range keys {
		w.waiting[k] = struct{}{}
	}
}

// wakeForWaitingKeys wakes Run when s settled a record of a key that a
// message PublishNow left to the workers waits behind: it may be that
// key's oldest pending message now.
func (w *Worker) wakeForWaitingKeys(s *settlement) {
	w.waitingMu.Lock()
	defer w.waitingMu.Unlock()
	if len(w.waiting) == 0 {
		return
	}
	woke := false
	for _, k := range s.keys {
		if _, ok := w.waiting[k]; ok && k != "" {
			delete(w.waiting, k)
			woke = true
		}
	}
	if woke {
		w.Notify()
	}
}
