package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// The after-commit publish (Worker.PublishNow): the writer publishes what
// it has just committed, under the head start its transaction took, or a
// claim; what it does not publish it leaves to the workers, due at once.

// PublishNow is the after-commit fast path: call it right after committing
// the transaction that enqueued msgs (ideally with
// EnqueueOptions.HeadStart), with the same messages. It works whether or
// not Run is running. It is best effort, and built to cost the caller
// little: each sink call is bounded by AfterCommitTimeout (500 ms by
// default, against the worker's PublishTimeout), and while the worker
// holds off a failing sink (see SinkBreaker) it calls no sink, but for a
// probe now and then. Its whole cost is not bounded by one timeout: it
// publishes msgs one after another (up to Concurrency at once, one key's
// messages in order), each sink call within AfterCommitTimeout, and each
// of its store calls (reading the writer's lease or claiming, settling,
// ending the head start of what it leaves) takes up to StoreTimeout. In
// the normal case that is a read, the sink calls and a write. A request
// handler can call it inline and ignore its error.
//
// It leases the messages first, so it never races a worker: a message a
// worker has already claimed, or that is no longer pending, is left alone.
// When the store leased them to this process in the writer's transaction
// (backend.HeadStartLeaser: store/mysql and store/postgres do, given a
// HeadStart of at least PublishTimeout plus StoreTimeout), that lease is
// used and no claim is committed first (with Ordering, when the store
// keeps per-key order in that read too: store/postgres does): the sink is called one read
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
	g := gateHeld
	switch adm, _ := w.breaker.admit(time.Now()); adm {
	case refused:
		return w.leaveToWorker(ctx, msgs, ids, ErrSinkHeldOff)
	case probe:
		g = gateProbe
	}
	s, err := w.publishCommitted(ctx, ids, g)
	if g == gateProbe {
		w.breaker.endProbe()
	}
	if err != nil {
		// Nothing claimed: a worker delivers them once their head
		// start ends (the store is failing; so would ending it).
		return fmt.Errorf("%w: %d message(s), after the claim failed: %w", ErrLeftToWorker, len(ids), err)
	}
	return w.finishNow(ctx, msgs, ids, s)
}

// publishCommitted publishes the messages ids names under the lease their
// writer's transaction took, or else under a claim of their own, and
// returns the outcomes (nil when nothing was claimed), not yet recorded.
// It fails only when the claim does.
func (w *Worker) publishCommitted(ctx context.Context, ids []string, g gate) (*settlement, error) {
	if s, ok := w.publishHeadStarted(ctx, ids, g); ok {
		return s, nil
	}
	return w.round(ctx, PathAfterCommit, backend.ClaimParams{
		Owner:    w.opts.NodeID,
		Limit:    len(ids),
		LeaseFor: w.opts.LeaseTimeout,
		IDs:      ids,
		Ordered:  w.opts.Ordering,
	}, nil, g)
}

// publishHeadStarted publishes the messages ids names under the lease the
// writer's transaction took for them, when the store keeps such leases
// and holds one on every one of them for at least a publish and its
// settle; ok is false when it did not (the caller claims them instead).
//
// With Ordering, the store must keep per-key order in that read
// (backend.OrderedHeadStartLeaser); then a batch that leaves some
// messages out is published all the same (ok), and the others are left to
// the workers: an older message of their key is still to be delivered,
// or their head start is (nearly) over.
func (w *Worker) publishHeadStarted(ctx context.Context, ids []string, g gate) (s *settlement, ok bool) {
	var read func(context.Context, []string, time.Duration) (backend.Batch, time.Duration, error)
	switch {
	case w.opts.Ordering && w.caps.OrderedHeadStart != nil:
		read = w.caps.OrderedHeadStart.OrderedHeadStartBatch
	case !w.opts.Ordering && w.caps.HeadStart != nil:
		read = w.caps.HeadStart.HeadStartBatch
	default:
		return nil, false
	}
	start := time.Now()
	readCtx, cancel := context.WithTimeout(ctx, w.opts.StoreTimeout)
	batch, left, err := read(readCtx, ids, w.opts.AfterCommitTimeout+w.opts.StoreTimeout)
	cancel()
	switch {
	case err != nil:
		return nil, false
	case w.opts.Ordering && batch.Len() == 0:
		return nil, true
	case !w.opts.Ordering && batch.Len() != len(ids):
		return nil, false
	}
	// left was measured at the read, after start: counted from start, it
	// ends no later than the lease does.
	return w.publishLeased(ctx, PathAfterCommit, batch, start, left, g), true
}

// finishNow records the outcomes of an after-commit publish (s, nil when
// nothing was claimed), leaves what it did not publish to the workers,
// and returns PublishNow's error.
func (w *Worker) finishNow(ctx context.Context, msgs []Message, ids []string, s *settlement) error {
	var errs []error
	settled := map[string]bool{}
	if s != nil {
		res, err := w.settle(ctx, s)
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
	if hs := w.caps.EndHeadStart; hs != nil {
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

func (e *leftError) Unwrap() error { return e.cause }

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
