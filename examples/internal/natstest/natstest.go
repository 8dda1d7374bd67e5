// Package natstest gives the examples' tests the NATS server with
// JetStream they run against: OUTBOXRELAY_TEST_NATS_URL, or this
// project's machines' nats://127.0.0.1:4222. Tests fail, never skip,
// when it is missing. For tests only.
package natstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// EnvNATSURL names the variable that points tests at a NATS server with
// JetStream; DefaultNATSURL is used without it.
const (
	EnvNATSURL     = "OUTBOXRELAY_TEST_NATS_URL"
	DefaultNATSURL = "nats://127.0.0.1:4222"
)

// URL is the test NATS server's URL.
func URL() string {
	if u := os.Getenv(EnvNATSURL); u != "" {
		return u
	}
	return DefaultNATSURL
}

// JetStream connects to the test server, closed when t ends, and
// returns its JetStream context. It fails t when there is no server.
func JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(URL(), nats.Timeout(5*time.Second), nats.NoReconnect())
	if err != nil {
		t.Fatalf("no NATS server at %s (%v): start one with JetStream (nats-server -js), or set %s", URL(), err, EnvNATSURL)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// RunID is a random name part, so that concurrent runs' streams and
// subjects do not collide.
func RunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// DeleteStreamsAtCleanup deletes the named streams when t ends, failing
// t if one cannot be deleted (a stream that does not exist is fine).
func DeleteStreamsAtCleanup(t testing.TB, js jetstream.JetStream, names ...string) {
	t.Helper()
	t.Cleanup(func() {
		for _, name := range names {
			if err := js.DeleteStream(context.Background(), name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Errorf("delete stream %s: %v", name, err)
			}
		}
	})
}
