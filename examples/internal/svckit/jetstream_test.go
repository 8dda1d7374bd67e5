package svckit

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/examples/internal/natstest"
)

// TestJetStreamSink: Sink creates a missing stream with the prefix's
// subjects and the duplicate window, finds it the second time, and
// builds a sink that publishes into it.
func TestJetStreamSink(t *testing.T) {
	js := natstest.JetStream(t)
	s := Stream{Name: "SVCKIT_" + natstest.RunID(), SubjectPrefix: "svckit." + natstest.RunID(), Duplicates: 3 * time.Minute}
	natstest.DeleteStreamsAtCleanup(t, js, s.Name)
	j, err := ConnectJetStream(natstest.URL(), "svckit test", 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(j.Conn.Close)
	ctx := context.Background()
	for range 2 {
		sink, err := j.Sink(ctx, s, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		require.NotNil(t, sink)
	}
	info, err := js.Stream(ctx, s.Name)
	require.NoError(t, err)
	cfg := info.CachedInfo().Config
	require.Equal(t, []string{s.SubjectPrefix + ".>"}, cfg.Subjects)
	require.Equal(t, s.Duplicates, cfg.Duplicates)
}

// TestJetStreamNeverShowsTheCredentials: a server that never answers
// ends Sink and Wait with an error naming the servers and the stream,
// and none of the URL's credentials.
func TestJetStreamNeverShowsTheCredentials(t *testing.T) {
	for _, url := range []string{"nats://user:s3cretpw@127.0.0.1:1", "nats://t0kensecret@127.0.0.1:1"} {
		j, err := ConnectJetStream(url, "svckit test", 200*time.Millisecond)
		require.NoError(t, err, "it connects in the background")
		_, err = j.Sink(context.Background(), Stream{Name: "S", SubjectPrefix: "s"}, slog.New(slog.DiscardHandler))
		j.Conn.Close()
		require.ErrorContains(t, err, `nats nats://[redacted]@127.0.0.1:1: stream "S" not available within 200ms`)
		require.NotContains(t, err.Error(), "s3cret")
		require.NotContains(t, err.Error(), "t0ken")
	}
}
