package outbox

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// How a worker logs a store call that keeps failing the same way (the
// outbox table dropped under a running worker, a database that refuses
// writes): the first failure and each change of error at once, at Error;
// repeats of the same error at Debug, counted, and summarised at Error
// once per storeFailureReportEvery with that count; and the first call
// that works again at Info, with the totals. The Observer still sees
// every failure (EventClaimFailed, EventSettleFailed). Each path's claims
// and settles keep a streak of their own (storeStreaks), so that one
// that works does not hide, nor restart, another that fails.

// storeFailureReportEvery is how often a store call that keeps failing
// the same way is logged.
const storeFailureReportEvery = time.Minute

// failureStreak is the failures in a row of one kind of store call. It
// is safe for concurrent use.
type failureStreak struct {
	mu       sync.Mutex
	failures int       // in a row; 0 while the call works
	since    time.Time // of the first
	text     string    // the error of the last line logged
	left     int       // failures since that line, not logged
	reported time.Time // when that line was logged
}

// streakNote is what one failure, or the success that ends a streak,
// is to be logged as.
type streakNote int

const (
	streakQuiet   streakNote = iota // a repeat: Debug
	streakFirst                     // the first failure
	streakChanged                   // another error than the last line's
	streakStill                     // a repeat, summarised
)

// streakCounts are the figures a line of a streak gives.
type streakCounts struct {
	failures int           // in a row, this one included
	left     int           // not logged since the previous line
	failing  time.Duration // since the first
}

// failed records a failure with text at now, and says how to log it.
func (f *failureStreak) failed(now time.Time, text string) (streakNote, streakCounts) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures++
	var note streakNote
	switch {
	case f.failures == 1:
		f.since, note = now, streakFirst
	case text != f.text:
		note = streakChanged
	case now.Sub(f.reported) >= storeFailureReportEvery:
		note = streakStill
	default:
		f.left++
		return streakQuiet, streakCounts{}
	}
	c := streakCounts{failures: f.failures, left: f.left, failing: now.Sub(f.since)}
	f.text, f.left, f.reported = text, 0, now
	return note, c
}

// succeeded records a call that worked at now; ended says it ended a
// streak, whose counts it returns.
func (f *failureStreak) succeeded(now time.Time) (c streakCounts, ended bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures == 0 {
		return streakCounts{}, false
	}
	c = streakCounts{failures: f.failures, left: f.left, failing: now.Sub(f.since)}
	f.failures, f.left, f.text = 0, 0, ""
	return c, true
}

// storeStreaks are a worker's streaks of store calls: claims and
// settles, of each path.
type storeStreaks struct {
	claim, settle [2]failureStreak // [0]: PathWorker, [1]: PathAfterCommit
}

// storeOp is a kind of store call whose failures are summarised.
type storeOp string

const (
	opClaim  storeOp = "claim"
	opSettle storeOp = "settle"
)

func (w *Worker) streak(op storeOp, p Path) *failureStreak {
	s := &w.streaks.claim
	if op == opSettle {
		s = &w.streaks.settle
	}
	if p == PathAfterCommit {
		return &s[1]
	}
	return &s[0]
}

// logStoreFailure logs a failed store call op on path p: msg with attrs
// and the error when it starts a streak or changes its error, a summary
// once per storeFailureReportEvery, and at Debug otherwise.
func (w *Worker) logStoreFailure(ctx context.Context, op storeOp, p Path, err error, msg string, attrs ...any) {
	note, c := w.streak(op, p).failed(time.Now(), err.Error())
	attrs = append(attrs, slog.String("path", string(p)), slog.Any("error", err))
	switch note {
	case streakQuiet:
		w.log.DebugContext(ctx, msg, attrs...)
		return
	case streakStill:
		msg = "outbox " + string(op) + " still failing"
	}
	if note != streakFirst {
		attrs = append(attrs, slog.Int("failures", c.failures), slog.Int("left_out", c.left), slog.Duration("failing_for", c.failing))
	}
	w.log.ErrorContext(ctx, msg, attrs...)
}

// noteStoreSuccess logs, at Info, a store call op on path p that works
// again after failures.
func (w *Worker) noteStoreSuccess(ctx context.Context, op storeOp, p Path) {
	c, ended := w.streak(op, p).succeeded(time.Now())
	if !ended {
		return
	}
	w.log.InfoContext(ctx, "outbox "+string(op)+" works again", slog.String("path", string(p)),
		slog.Int("failures", c.failures), slog.Int("left_out", c.left), slog.Duration("failed_for", c.failing))
}
