package outbox

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// nopSink and nopStore only let NewWorker be called; these tests never
// run the worker.
var nopSink = SinkFunc(func(context.Context, Message) error { return nil })

type nopStore struct{ backend.Store }

func (nopStore) Capabilities() backend.Capabilities { return backend.Capabilities{} }

func TestWorkerOptionsDefaults(t *testing.T) {
	host, _ := os.Hostname()
	wantNode := host + "-" + strconv.Itoa(os.Getpid())
	tests := []struct {
		name string
		in   WorkerOptions
	}{
		{"zero value", WorkerOptions{}},
		{"zero durations and sizes", WorkerOptions{PollInterval: 0, BatchSize: 0, PublishTimeout: 0, StoreTimeout: 0, LeaseTimeout: 0}},
		{"negative durations and sizes", WorkerOptions{PollInterval: -time.Second, BatchSize: -3, PublishTimeout: -1, StoreTimeout: -1, LeaseTimeout: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWorker(nopStore{}, nopSink, tc.in)
			require.NoError(t, err)
			got := w.Options()
			require.Equal(t, DefaultName, got.Name)
			require.Equal(t, wantNode, got.NodeID)
			require.Equal(t, time.Second, got.PollInterval, "seed: poll_interval 1s")
			require.Equal(t, 100, got.BatchSize, "seed: batch_size 100")
			require.Equal(t, 3*time.Second, got.PublishTimeout, "seed: publish_timeout 3s")
			require.Equal(t, DefaultStoreTimeout, got.StoreTimeout)
			require.Equal(t, DefaultLeaseTimeout, got.LeaseTimeout)
			require.Equal(t, FixedInterval{Interval: time.Second}, got.Retry, "seed: fixed interval, at the poll interval")
			require.Same(t, slog.Default(), got.Logger)
			require.Equal(t, DefaultKeyAttr, got.KeyAttr)
		})
	}
}

// TestDefaultHeadStartCoversThePublish: the default head start must
// outlast a publish and its settle at the default timeouts, or
// PublishNow claims (one more commit) before every after-commit publish.
func TestDefaultHeadStartCoversThePublish(t *testing.T) {
	require.GreaterOrEqual(t, DefaultHeadStart, DefaultPublishTimeout+DefaultStoreTimeout+time.Second)
	w, err := NewWorker(nopStore{}, nopSink, WorkerOptions{})
	require.NoError(t, err)
	require.Equal(t, DefaultHeadStart, w.HeadStart())
	w, err = NewWorker(nopStore{}, nopSink, WorkerOptions{PublishTimeout: 30 * time.Second, StoreTimeout: 4 * time.Second})
	require.NoError(t, err)
	require.Equal(t, 36*time.Second, w.HeadStart(), "longer timeouts need a longer head start")
}

func TestWorkerOptionsOverrides(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	tests := []struct {
		name  string
		in    WorkerOptions
		check func(t *testing.T, o WorkerOptions)
	}{
		{"name and node", WorkerOptions{Name: "room_outbox", NodeID: "node-a"}, func(t *testing.T, o WorkerOptions) {
			require.Equal(t, "room_outbox", o.Name)
			require.Equal(t, "node-a", o.NodeID)
		}},
		{"poll interval also sets the fixed retry interval", WorkerOptions{PollInterval: 250 * time.Millisecond}, func(t *testing.T, o WorkerOptions) {
			require.Equal(t, 250*time.Millisecond, o.PollInterval)
			require.Equal(t, FixedInterval{Interval: 250 * time.Millisecond}, o.Retry)
		}},
		{"batch size", WorkerOptions{BatchSize: 7}, func(t *testing.T, o WorkerOptions) { require.Equal(t, 7, o.BatchSize) }},
		{"publish timeout", WorkerOptions{PublishTimeout: time.Second}, func(t *testing.T, o WorkerOptions) {
			require.Equal(t, time.Second, o.PublishTimeout)
		}},
		{"long timeouts raise the default lease", WorkerOptions{PublishTimeout: 20 * time.Second, StoreTimeout: 10 * time.Second}, func(t *testing.T, o WorkerOptions) {
			require.Equal(t, 80*time.Second, o.LeaseTimeout, "twice publish + 2×store")
		}},
		{"explicit lease", WorkerOptions{LeaseTimeout: time.Minute}, func(t *testing.T, o WorkerOptions) { require.Equal(t, time.Minute, o.LeaseTimeout) }},
		{"explicit fixed interval", WorkerOptions{Retry: FixedInterval{Interval: 5 * time.Second}}, func(t *testing.T, o WorkerOptions) {
			require.Equal(t, FixedInterval{Interval: 5 * time.Second}, o.Retry)
		}},
		{"fixed interval pointer with zero interval", WorkerOptions{Retry: &FixedInterval{}, PollInterval: 2 * time.Second}, func(t *testing.T, o WorkerOptions) {
			require.Equal(t, FixedInterval{Interval: 2 * time.Second}, o.Retry)
		}},
		{"max attempts around a fixed interval gets the poll interval", WorkerOptions{PollInterval: 2 * time.Second, Retry: MaxAttempts{Policy: FixedInterval{}, Attempts: 5}}, func(t *testing.T, o WorkerOptions) {
			require.Equal(t, MaxAttempts{Policy: FixedInterval{Interval: 2 * time.Second}, Attempts: 5}, o.Retry)
		}},
		{"logger and key field", WorkerOptions{Logger: logger, KeyAttr: "room_id"}, func(t *testing.T, o WorkerOptions) {
			require.Same(t, logger, o.Logger)
			require.Equal(t, "room_id", o.KeyAttr)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWorker(nopStore{}, nopSink, tc.in)
			require.NoError(t, err)
			tc.check(t, w.Options())
		})
	}
}

func TestWorkerOptionsValidation(t *testing.T) {
	tests := []struct {
		name string
		in   WorkerOptions
		want string
	}{
		{"poll interval below minimum", WorkerOptions{PollInterval: time.Millisecond}, "outbox: PollInterval 1ms: must be at least 10ms"},
		{"batch size above maximum", WorkerOptions{BatchSize: MaxBatchSize + 1}, "outbox: BatchSize 10001: must be at most 10000"},
		{"lease shorter than a round", WorkerOptions{LeaseTimeout: 5 * time.Second}, "outbox: LeaseTimeout 5s: must be at least PublishTimeout+2×StoreTimeout (13s)"},
		{"negative fixed interval", WorkerOptions{Retry: FixedInterval{Interval: -time.Second}}, "outbox: Retry: FixedInterval{-1s}: interval must not be negative"},
		{"nil fixed interval pointer", WorkerOptions{Retry: (*FixedInterval)(nil)}, "outbox: Retry: (*FixedInterval)(nil)"},
		{"zero max attempts", WorkerOptions{Retry: MaxAttempts{Policy: FixedInterval{}, Attempts: 0}}, "outbox: Retry: MaxAttempts{0}: must allow at least 1 attempt"},
		{"max attempts without policy", WorkerOptions{Retry: MaxAttempts{Attempts: 3}}, "outbox: Retry: MaxAttempts: Policy is nil"},
		{"exponential multiplier below 1", WorkerOptions{Retry: Exponential{Multiplier: 0.5}}, "outbox: Retry: Exponential: multiplier 0.5: must be at least 1"},
		{"exponential jitter above 1", WorkerOptions{Retry: Exponential{Jitter: 1.5}}, "outbox: Retry: Exponential: jitter 1.5: must be 0 to 1"},
		{"exponential cap below start", WorkerOptions{Retry: Exponential{Initial: time.Minute, Max: time.Second}}, "max interval 1s: must be at least the initial interval 1m0s"},
		{"node ID too long", WorkerOptions{NodeID: strings.Repeat("n", MaxNodeIDLength+1)}, "outbox: NodeID"},
		{"node ID not UTF-8", WorkerOptions{NodeID: "\xff"}, `outbox: NodeID "\xff"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewWorker(nopStore{}, nopSink, tc.in)
			require.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("all problems at once", func(t *testing.T) {
		_, err := NewWorker(nopStore{}, nopSink, WorkerOptions{PollInterval: time.Nanosecond, BatchSize: 1 << 20})
		require.ErrorContains(t, err, "PollInterval")
		require.ErrorContains(t, err, "BatchSize")
	})
	t.Run("nil store or sink", func(t *testing.T) {
		_, err := NewWorker(nil, nopSink, WorkerOptions{})
		require.ErrorContains(t, err, "store is nil")
		_, err = NewWorker(nopStore{}, nil, WorkerOptions{})
		require.ErrorContains(t, err, "sink is nil")
	})
}
