package outbox

import (
	"context"
	"log/slog"
	"math/bits"
	"sync"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// How many failure lines a worker writes: at most failureLines per
// failureWindow (the rest at Debug, counted, and the count logged with
// the next line or by the next round of Run), so that an outage does not
// multiply log volume by the backlog. A record's repeated failures are
// logged at Warn on its first attempt and on attempts that are powers of
// two, so that one message failing every second writes 5 lines in half a
// minute, not 30.
const (
	failureLines  = 20
	failureWindow = 10 * time.Second
)

// lineLimiter counts the failure lines of a window.
type lineLimiter struct {
	mu      sync.Mutex
	start   time.Time
	n       int
	dropped int
}

// allow says whether a line may be written at now, and how many were
// dropped in the window that ended before it (to report first).
func (l *lineLimiter) allow(now time.Time) (ok bool, dropped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	dropped = l.roll(now)
	if l.n >= failureLines {
		l.dropped++
		return false, dropped
	}
	l.n++
	return true, dropped
}

// flush returns the lines dropped in a window that has ended by now.
func (l *lineLimiter) flush(now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.roll(now)
}

// roll starts a new window when the last one has ended, and returns what
// that one dropped.
func (l *lineLimiter) roll(now time.Time) int {
	if now.Sub(l.start) < failureWindow {
		return 0
	}
	dropped := l.dropped
	l.start, l.n, l.dropped = now, 0, 0
	return dropped
}

// logFailure writes a failure line at level, through the limiter; a
// line over the limit goes out at Debug.
func (w *Worker) logFailure(ctx context.Context, level slog.Level, msg string, attrs ...any) {
	if level > slog.LevelDebug {
		ok, dropped := w.lines.allow(time.Now())
		w.reportDropped(ctx, dropped)
		if !ok {
			level = slog.LevelDebug
		}
	}
	w.log.Log(ctx, level, msg, attrs...)
}

// flushFailureLines reports the failure lines a window that has ended
// dropped.
func (w *Worker) flushFailureLines(ctx context.Context) {
	w.reportDropped(ctx, w.lines.flush(time.Now()))
}

func (w *Worker) reportDropped(ctx context.Context, dropped int) {
	if dropped > 0 {
		w.log.WarnContext(ctx, "outbox failure lines left out: more failures than the log takes",
			slog.Int("left_out", dropped), slog.Duration("window", failureWindow), slog.Int("logged_per_window", failureLines))
	}
}

// retryLevel is the level of the line of a failed attempt that will be
// retried: Warn for a record's first attempt and its attempts that are
// powers of two, Debug for the others and while the sink is held off
// (the breaker's own lines say so then).
func (w *Worker) retryLevel(attempts int) slog.Level {
	if w.breaker.heldOff() || attempts > 1 && bits.OnesCount(uint(attempts)) != 1 {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

// noteOutcome feeds a publish's result to the breaker (probe: the call
// was the probe of a held-off sink), and logs and reports what that
// changed.
func (w *Worker) noteOutcome(ctx context.Context, err error, probe bool) {
	now := time.Now()
	var ch breakerChange
	switch {
	case err == nil:
		ch = w.breaker.succeeded(now)
	case IsUnavailable(err):
		ch = w.breaker.failed(now, true, probe)
	case IsPermanent(err):
		return // the message's fault, not the sink's
	default:
		ch = w.breaker.failed(now, false, probe)
	}
	text := ""
	if err != nil {
		text = backend.Truncate(err.Error(), backend.MaxLastErrorBytes)
	}
	switch {
	case ch.opened:
		w.log.ErrorContext(ctx, "outbox sink failing: holding it off; PublishNow leaves messages to the worker, and only a probe now and then calls the sink until one goes through",
			slog.Int("failures", ch.failures), slog.Bool("unavailable", IsUnavailable(err)), slog.Duration("probe_in", ch.probeIn), slog.String("error", text))
		w.observe(ctx, Event{Kind: EventSinkDown, Path: PathWorker, Count: ch.failures, Err: err})
	case ch.still:
		w.log.WarnContext(ctx, "outbox sink still failing: held off",
			slog.Duration("down_for", ch.downFor), slog.Int("failed_probes", ch.failures), slog.Duration("probe_in", ch.probeIn), slog.String("error", text))
	case ch.closed:
		w.log.InfoContext(ctx, "outbox sink is back: delivering again",
			slog.Duration("down_for", ch.downFor), slog.Int("failed_probes", ch.failures))
		w.observe(ctx, Event{Kind: EventSinkUp, Path: PathWorker, Count: ch.failures, Latency: ch.downFor})
		w.Notify() // Run waits for a probe no more: full rounds resume
	}
}
