package webhook_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/webhook"
)

// The figures in README.md come from
//
//	cd sink/webhook && go test -run '^$' -bench . -benchmem
//
// The payload is 256 bytes of JSON, with a trace context header.

func benchMessage(i int) outbox.Message {
	return outbox.Message{
		ID: fmt.Sprintf("evt-%08d", i), Key: fmt.Sprintf("order-%d", i%100), Type: "OrderPlaced",
		Payload: []byte(`{"order":` + fmt.Sprint(i) + `,"note":"` + strings.Repeat("x", 230) + `"}`),
		Headers: map[string]string{outbox.HeaderTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
}

// benchReceiver answers every POST 204 after reading its body and
// waiting latency (an endpoint's own work and the network's round trip),
// and closes done once it has taken want requests.
func benchReceiver(b *testing.B, want int64, latency time.Duration) (*httptest.Server, <-chan struct{}) {
	var n atomic.Int64
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if latency > 0 {
			time.Sleep(latency)
		}
		w.WriteHeader(http.StatusNoContent)
		if n.Add(1) == want {
			close(done)
		}
	}))
	b.Cleanup(srv.Close)
	return srv, done
}

func benchSink(b *testing.B, url string) *webhook.Sink {
	s, err := webhook.New(webhook.Config{URL: url + "/hooks", Secrets: []string{secret}, AllowNetworks: loopback})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkRequest is the sink's own work per event, without the
// network: the endpoint, the headers checked and encoded, the signature.
func BenchmarkRequest(b *testing.B) {
	s := benchSink(b, "https://hooks.example.com")
	m := benchMessage(1)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Request(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublish is one event per POST, one at a time, to a server on
// loopback that answers 204: the sink, net/http's client and server, and
// the loopback round trip, on the same cores.
func BenchmarkPublish(b *testing.B) {
	srv, _ := benchReceiver(b, -1, 0)
	s := benchSink(b, srv.URL)
	m := benchMessage(1)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Publish(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWorker is events per second through an outbox.Worker on the
// in-memory store (outboxtest.NewStore, so that no database counts),
// publishing to a server on loopback, at Concurrency 1 and 8: against a
// server that answers at once (what the sink, net/http and the worker
// cost, client and server on the same cores), and one that takes 2ms
// per request (an endpoint's own work and a network's round trip).
func BenchmarkWorker(b *testing.B) {
	for _, latency := range []time.Duration{0, 2 * time.Millisecond} {
		for _, concurrency := range []int{1, 8} {
			b.Run(fmt.Sprintf("Latency=%v/Concurrency=%d", latency, concurrency), func(b *testing.B) {
				benchWorker(b, latency, concurrency)
			})
		}
	}
}

func benchWorker(b *testing.B, latency time.Duration, concurrency int) {
	srv, done := benchReceiver(b, int64(b.N), latency)
	s := benchSink(b, srv.URL)
	store := outboxtest.NewStore()
	tx := store.Begin()
	for i := range b.N {
		if err := store.Enqueue(context.Background(), tx, nil, benchMessage(i)); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	w, err := outbox.NewWorker(store, s, outbox.WorkerOptions{Concurrency: concurrency, BatchSize: 100,
		PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	b.ResetTimer()
	go func() { ran <- w.Run(ctx) }()
	<-done
	b.StopTimer()
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
