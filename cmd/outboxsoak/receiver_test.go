package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// eventually polls cond until it holds, failing t after a deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling, with a deadline
	}
}

// The receiver's fault modes, through the sink the workers use.
func TestReceiverFaults(t *testing.T) {
	l := newLedger(1, []string{"c"}, time.Time{})
	r, err := startReceiver(l, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.close(context.Background())
	sink := receiverSink(newReceiverClient(), r.url(), "c")
	seq := int64(0)
	publish := func(timeout time.Duration) error {
		seq++
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return sink.Publish(ctx, outbox.Message{ID: "id", Key: "room-000", Type: eventType, Payload: encodePayload(0, seq, time.Now())})
	}
	booked := func() int64 { return l.uniqueCounts()["c"] }

	if err := publish(30 * time.Second); err != nil || booked() != 1 {
		t.Fatalf("normal: %v, %d booked", err, booked())
	}

	r.refuse.Store(true)
	if err := publish(30 * time.Second); err == nil || booked() != 1 {
		t.Errorf("sink-503: %v, %d booked; want an error and nothing booked", err, booked())
	}
	r.refuse.Store(false)

	r.delay.Store(int64(time.Hour))
	if err := publish(200 * time.Millisecond); err == nil {
		t.Error("sink-slow: the sender did not give up")
	}
	eventually(t, "sink-slow: booked though answered late", func() bool { return booked() == 2 })
	r.delay.Store(0)

	if err := r.down(); err != nil {
		t.Fatal(err)
	}
	if err := publish(30 * time.Second); err == nil || booked() != 2 {
		t.Errorf("sink-down: %v, %d booked; want an error and nothing booked", err, booked())
	}
	if err := r.up(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := publish(30 * time.Second); err != nil || booked() != 3 {
		t.Errorf("up again: %v, %d booked", err, booked())
	}
}

// A delivery the receiver cannot book is refused permanently: retrying
// would not help, and the run counts the event as lost (dead).
func TestReceiverRefusesWhatItCannotBook(t *testing.T) {
	l := newLedger(1, []string{"c"}, time.Time{})
	r, err := startReceiver(l, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.close(context.Background())
	for consumer, payload := range map[string][]byte{"c": []byte("not json"), "other": encodePayload(0, 1, time.Now())} {
		err := receiverSink(newReceiverClient(), r.url(), consumer).Publish(context.Background(), outbox.Message{ID: "x", Payload: payload})
		if !outbox.IsPermanent(err) {
			t.Errorf("%s: %v, want a permanent error", consumer, err)
		}
	}
	if n := r.refused.Load(); n != 2 {
		t.Errorf("refused %d, want 2", n)
	}
}
