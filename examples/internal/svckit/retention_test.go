package svckit

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetentionWithDefaults(t *testing.T) {
	require.Equal(t, Retention{Retention: time.Hour, RetentionInterval: DefaultRetentionInterval, RetentionBatch: DefaultRetentionBatch},
		Retention{}.WithDefaults(time.Hour))
	set := Retention{Retention: 2 * time.Hour, RetentionInterval: time.Second, RetentionBatch: 5}
	require.Equal(t, set, set.WithDefaults(time.Hour))
}

// TestRetentionRun purges right away, again on its interval with the
// block's age and batch, logs a failed round and returns when ctx ends.
func TestRetentionRun(t *testing.T) {
	r := Retention{Retention: time.Hour, RetentionInterval: time.Millisecond, RetentionBatch: 7}
	var log bytes.Buffer // written by Run's goroutine only, read after it returns
	ctx, cancel := context.WithCancel(context.Background())
	var rounds atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, slog.New(slog.NewTextHandler(&log, nil)), "test log", func(_ context.Context, age time.Duration, batch int) (int64, error) {
			if age != time.Hour || batch != 7 {
				return 0, errors.New("wrong age or batch")
			}
			if rounds.Add(1) == 1 {
				return 2, errors.New("db down")
			}
			if rounds.Load() >= 3 {
				cancel()
			}
			return 1, nil
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("Run did not return after its context ended")
	}
	require.GreaterOrEqual(t, rounds.Load(), int32(3))
	require.Contains(t, log.String(), `msg="test log retention failed; trying again later" deleted=2`)
	require.Contains(t, log.String(), `msg="test log retention" deleted=1`)
	require.NotContains(t, log.String(), "wrong age or batch")
}
