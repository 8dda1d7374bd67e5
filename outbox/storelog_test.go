package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// brokenClaims is a store whose claims fail with the error it is given
// (nil: they work). It hides the in-memory store's capabilities,
// so that every publish claims.
type brokenClaims struct {
	backend.Store
	mu  sync.Mutex
	err error
}

// Capabilities has none of the in-memory store's: every publish claims.
func (s *brokenClaims) Capabilities() backend.Capabilities { return backend.Capabilities{} }

func (s *brokenClaims) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *brokenClaims) Claim(ctx context.Context, p backend.ClaimParams) (backend.Batch, error) {
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return backend.Batch{}, err
	}
	return s.Store.Claim(ctx, p)
}

// intAttr is a log line's integer field.
func intAttr(t *testing.T, line map[string]any, name string) int {
	t.Helper()
	v, ok := line[name].(float64)
	require.True(t, ok, "field %s in %v", name, line)
	return int(v)
}

// TestAClaimThatKeepsFailingIsSummarised (issue 37, defect 9): a claim
// that fails every round the same way (the outbox table dropped under a
// running worker) is logged at Error once, then summarised once a
// minute with the count of the failures left out; a change of error is
// logged at once; the first claim that works again says how many failed,
// and how many of those were not logged. The after-commit path's claims
// are summarised alike. (d72aedb: an Error line per failed claim, every
// PollInterval, without end.)
func TestAClaimThatKeepsFailingIsSummarised(t *testing.T) {
	ctx := context.Background()
	mem := outboxtest.NewStore()
	s := &brokenClaims{Store: mem}
	var failed atomic.Int64
	obs := outbox.ObserverFunc(func(_ context.Context, e outbox.Event) {
		if e.Kind == outbox.EventClaimFailed {
			failed.Add(1)
		}
	})
	logs := &logLines{}
	rec := outboxtest.NewRecorder()
	w, err := outbox.NewWorker(s, rec, outbox.WorkerOptions{
		PollInterval: 10 * time.Millisecond, Observer: obs,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)

	dropped := errors.New(`Error 1146 (42S02): Table 'app.outbox' doesn't exist`)
	s.fail(dropped)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	defer func() {
		stop()
		require.NoError(t, <-done)
	}()
	start := time.Now()
	outboxtest.Eventually(t, "30 failed claims", func() bool { return failed.Load() >= 30 })
	s.fail(errors.New("dial tcp 127.0.0.1:3306: connect: connection refused"))
	n := failed.Load()
	outboxtest.Eventually(t, "30 more failed claims", func() bool { return failed.Load() >= n+30 })
	s.fail(nil)
	enqueue(t, mem, nil, outbox.Message{ID: "after", Type: "T"})
	outboxtest.Eventually(t, "a claim that works again", func() bool { return rec.Len() == 1 })
	elapsed := time.Since(start)
	total := int(failed.Load())

	logged := logs.lines(t, "outbox claim failed")
	var errorLines []map[string]any
	for _, l := range logged {
		if l["level"] == "ERROR" {
			errorLines = append(errorLines, l)
		}
	}
	require.Equal(t, 2, len(errorLines), "Error lines: the first failure and the change of error, at once")
	require.Equal(t, dropped.Error(), errorLines[0]["error"])
	require.Contains(t, errorLines[1]["error"], "connection refused")
	still := logs.lines(t, "outbox claim still failing")
	require.LessOrEqual(t, len(still), 1+int(elapsed/time.Minute), "a summary a minute at most")
	back := logs.lines(t, "outbox claim works again")
	require.Len(t, back, 1)
	require.Equal(t, "INFO", back[0]["level"])
	require.Equal(t, total, intAttr(t, back[0], "failures"), "the recovery line counts every failure")
	// Every failure is either a line at Error or counted as left out by
	// the next line that is.
	leftOut := intAttr(t, errorLines[1], "left_out") + intAttr(t, back[0], "left_out")
	for _, l := range still {
		leftOut += intAttr(t, l, "left_out")
	}
	require.Equal(t, total, len(errorLines)+len(still)+leftOut)
	require.Equal(t, total-len(errorLines)-len(still), logs.count(t, "DEBUG", "outbox claim failed"), "the rest at Debug")

	// The after-commit path's claims are summarised alike.
	s.fail(dropped)
	for i := range 20 {
		m := outbox.Message{ID: fmt.Sprintf("ac-%d", i), Type: "T"}
		tx := mem.Begin()
		require.NoError(t, mem.Enqueue(ctx, tx, &outbox.EnqueueOptions{HeadStart: time.Hour}, m))
		require.NoError(t, tx.Commit())
		require.ErrorIs(t, w.PublishNow(ctx, m), outbox.ErrLeftToWorker)
	}
	afterCommit := 0
	for _, l := range logs.lines(t, "outbox claim failed") {
		if l["level"] == "ERROR" && l["path"] == string(outbox.PathAfterCommit) {
			afterCommit++
		}
	}
	require.Equal(t, 1, afterCommit, "20 failed after-commit claims, one line")
}
