package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// logLines is a worker's log as JSON lines, for tests that read them.
type logLines struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// lines returns the lines whose message contains msg.
func (l *logLines) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, raw := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		var line map[string]any
		require.NoError(t, json.Unmarshal([]byte(raw), &line), raw)
		if strings.Contains(line["msg"].(string), msg) {
			out = append(out, line)
		}
	}
	return out
}

func (l *logLines) count(t *testing.T, level, msg string) int {
	n := 0
	for _, line := range l.lines(t, msg) {
		if line["level"] == level {
			n++
		}
	}
	return n
}

// newLoggedWorker is a worker on an in-memory store whose log (debug and
// up) goes to the returned lines.
func newLoggedWorker(t *testing.T, s *outboxtest.Store, sink outbox.Sink, opts outbox.WorkerOptions) (*outbox.Worker, *logLines) {
	t.Helper()
	logs := &logLines{}
	opts.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w, err := outbox.NewWorker(s, sink, opts)
	require.NoError(t, err)
	return w, logs
}

func enqueue(t *testing.T, s *outboxtest.Store, opts *outbox.EnqueueOptions, ms ...outbox.Message) {
	t.Helper()
	tx := s.Begin()
	require.NoError(t, s.Enqueue(context.Background(), tx, opts, ms...))
	require.NoError(t, tx.Commit())
}

// TestLogsSayWhatHappened (issue 28, defect 12): a permanent error on
// the after-commit path is not followed by "the worker will deliver it",
// and the dead letter it becomes is put down to the sink, not to a retry
// policy that gave up (963872d logged both).
func TestLogsSayWhatHappened(t *testing.T) {
	ctx := context.Background()
	s := outboxtest.NewStore()
	sink := outbox.SinkFunc(func(context.Context, outbox.Message) error {
		return outbox.Permanent(errors.New("no such group"))
	})
	w, logs := newLoggedWorker(t, s, sink, outbox.WorkerOptions{})
	m := outbox.Message{ID: "p-1", Type: "T"}
	enqueue(t, s, &outbox.EnqueueOptions{HeadStart: time.Hour}, m)
	require.ErrorIs(t, w.PublishNow(ctx, m), outbox.ErrLeftToWorker)
	res, err := w.ProcessBatch(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Dead)

	require.Empty(t, logs.lines(t, "the worker will deliver it"))
	require.Len(t, logs.lines(t, "after-commit publish failed with a permanent error"), 1)
	require.Empty(t, logs.lines(t, "retry policy gave up"))
	dead := logs.lines(t, "outbox message dead: the sink reported a permanent error")
	require.Len(t, dead, 1)
	require.Equal(t, "ERROR", dead[0]["level"])

	// A policy that gives up says so.
	s2 := outboxtest.NewStore()
	w2, logs2 := newLoggedWorker(t, s2, outbox.SinkFunc(func(context.Context, outbox.Message) error { return errors.New("timeout") }),
		outbox.WorkerOptions{Retry: outbox.MaxAttempts{Policy: outbox.FixedInterval{}, Attempts: 1}})
	enqueue(t, s2, nil, outbox.Message{ID: "q-1", Type: "T"})
	_, err = w2.ProcessBatch(ctx)
	require.NoError(t, err)
	require.Len(t, logs2.lines(t, "outbox message dead: the retry policy gave up"), 1)
}

// TestRepeatedFailuresLogFewLines (issue 28, defect 12): a message that
// keeps failing is logged at Warn on its first attempt and on attempts
// that are powers of two, the others at Debug (963872d: a warning per
// attempt, 90 in 30 s for three messages at the default policy).
func TestRepeatedFailuresLogFewLines(t *testing.T) {
	ctx := context.Background()
	s := outboxtest.NewStore()
	sink := outbox.SinkFunc(func(context.Context, outbox.Message) error { return errors.New("upstream 503") })
	w, logs := newLoggedWorker(t, s, sink, outbox.WorkerOptions{Retry: outbox.FixedInterval{Interval: time.Nanosecond}, Breaker: outbox.SinkBreaker{Off: true}})
	enqueue(t, s, nil, outbox.Message{ID: "a", Type: "T"}, outbox.Message{ID: "b", Type: "T"}, outbox.Message{ID: "c", Type: "T"})
	for range 16 {
		outboxtest.Eventually(t, "the three to be due again", func() bool {
			for _, id := range []string{"a", "b", "c"} {
				r, err := s.Get(ctx, id)
				require.NoError(t, err)
				if r.NextAttemptAt.After(time.Now()) {
					return false
				}
			}
			return true
		})
		res, err := w.ProcessBatch(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, res.Retried)
	}
	require.Equal(t, 3*5, logs.count(t, "WARN", "outbox publish failed; will retry"), "attempts 1, 2, 4, 8 and 16 of each")
	require.Equal(t, 3*11, logs.count(t, "DEBUG", "outbox publish failed; will retry"))
}

// TestAnOutageLogsBoundedLines (issue 28, defect 12): a hundred records
// failing in one round write at most 20 warnings per 10 s; the rest go
// to Debug and are counted.
func TestAnOutageLogsBoundedLines(t *testing.T) {
	ctx := context.Background()
	s := outboxtest.NewStore()
	sink := outbox.SinkFunc(func(context.Context, outbox.Message) error { return errors.New("connection refused") })
	w, logs := newLoggedWorker(t, s, sink, outbox.WorkerOptions{Breaker: outbox.SinkBreaker{Off: true}})
	var ms []outbox.Message
	for i := range 100 {
		ms = append(ms, outbox.Message{ID: fmt.Sprintf("m-%03d", i), Type: "T"})
	}
	enqueue(t, s, nil, ms...)
	start := time.Now()
	res, err := w.ProcessBatch(ctx)
	require.NoError(t, err)
	require.Equal(t, 100, res.Retried)
	windows := 1 + int(time.Since(start)/(10*time.Second)) // a slow machine may span windows
	warn := logs.count(t, "WARN", "outbox publish failed; will retry")
	require.LessOrEqual(t, warn, 20*windows)
	require.Equal(t, 100, warn+logs.count(t, "DEBUG", "outbox publish failed; will retry"))
}

// TestUnavailableNeverDeadLetters (issue 28, defect 13): an error the
// sink marks Unavailable (no stream for the subject: the
// infrastructure's, not the message's) is retried whatever the policy,
// holds the sink off at once and reports it; with DeadLetterUnavailable
// it dead-letters as a Permanent one does.
func TestUnavailableNeverDeadLetters(t *testing.T) {
	ctx := context.Background()
	noStream := outbox.Unavailable(errors.New("no stream captures the subject"))
	for _, tc := range []struct {
		name       string
		err        error
		deadLetter bool
	}{
		{"unavailable", noStream, false},
		{"unavailable and permanent", outbox.Permanent(noStream), false},
		{"unavailable, DeadLetterUnavailable", noStream, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := outboxtest.NewStore()
			var (
				mu     sync.Mutex
				events []outbox.EventKind
			)
			obs := outbox.ObserverFunc(func(_ context.Context, e outbox.Event) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, e.Kind)
			})
			w, logs := newLoggedWorker(t, s, outbox.SinkFunc(func(context.Context, outbox.Message) error { return tc.err }), outbox.WorkerOptions{
				Retry:                 outbox.MaxAttempts{Policy: outbox.FixedInterval{}, Attempts: 1},
				DeadLetterUnavailable: tc.deadLetter,
				Observer:              obs,
			})
			enqueue(t, s, nil, outbox.Message{ID: "e-1", Type: "T"})
			res, err := w.ProcessBatch(ctx)
			require.NoError(t, err)
			r, err := s.Get(ctx, "e-1")
			require.NoError(t, err)
			require.Equal(t, 1, r.Attempts)
			mu.Lock()
			defer mu.Unlock()
			require.Contains(t, events, outbox.EventSinkDown, "held off at once, and reported")
			require.Len(t, logs.lines(t, "outbox sink failing"), 1)
			if tc.deadLetter {
				require.Equal(t, 1, res.Dead)
				require.Len(t, logs.lines(t, "DeadLetterUnavailable is set"), 1)
				return
			}
			require.Equal(t, outbox.StatusPending, r.Status, "MaxAttempts{1} reached, yet not dead")
			require.Equal(t, 1, res.Retried)
			require.Contains(t, r.LastError, "no stream captures the subject")
		})
	}
}
