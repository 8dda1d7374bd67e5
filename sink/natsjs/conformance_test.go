package natsjs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
	"github.com/outboxrelay/outboxrelay/sink/natsjs/internal/natstest"
	"github.com/outboxrelay/outboxrelay/sink/sinktest"
)

// conformancePassword is the password of the server's only user: it is
// in every connection URL, and must never reach an error or a log line.
const conformancePassword = "conformance-pw-4b1d7e09a3c2f568"

// conformanceMaxMsgSize is the streams' maximum message size, so that a
// larger message is one JetStream can never accept.
const conformanceMaxMsgSize = 256 << 10

// TestConformance runs the sink suite against a real nats-server with
// JetStream and a password, which the test starts itself so that the
// suite can kill it and start it again (its file store keeps the
// streams). Each sink gets its own connection and stream.
func TestConformance(t *testing.T) {
	srv := natstest.StartNATSServer(t, `jetstream {}
authorization { users = [ {user: app, password: "`+conformancePassword+`"} ] }`)
	url := "nats://app:" + conformancePassword + "@" + srv.Addr
	sinktest.Run(t, sinktest.Peer{
		NewSink: func(t *testing.T) sinktest.Target {
			js := conformanceJS(t, url)
			prefix := "conf" + randomHex()
			cfg := natsjs.StreamConfig("CONF_"+prefix, prefix, 2*time.Minute)
			cfg.MaxMsgSize = conformanceMaxMsgSize
			stream, err := js.CreateStream(context.Background(), cfg)
			require.NoError(t, err)
			sink, err := natsjs.New(natsjs.Config{JetStream: js, Prefix: prefix, Logger: outboxtest.Logger(t)})
			require.NoError(t, err)
			return sinktest.Target{Sink: sink, Received: func() ([]sinktest.Delivery, error) { return streamDeliveries(stream) }}
		},
		Stop:  func(*testing.T) { srv.Stop() },
		Start: func(t *testing.T) { srv.Start(t) },
		Unacceptable: []outbox.Message{
			{ID: "over-max-msg-size", Type: "T", Key: "k", Payload: make([]byte, conformanceMaxMsgSize+1)},
			{ID: "header-with-a-line-break", Type: "T", Key: "k", Headers: map[string]string{"x-note": "a\r\nb"}},
			{ID: "subject-too-long", Type: strings.Repeat("t", 255), Key: strings.Repeat("é", 255)},
			{ID: "reserved-word-in-a-header", Type: "T", Key: "k", Headers: map[string]string{"x-note": "Nats-Msg-Id"}},
		},
		Misconfigured: func(t *testing.T) outbox.Sink {
			// No stream captures the prefix: an operator has not created it yet.
			sink, err := natsjs.New(natsjs.Config{JetStream: conformanceJS(t, url), Prefix: "nostream" + randomHex(), Logger: outboxtest.Logger(t)})
			require.NoError(t, err)
			return sink
		},
		Secrets:      []string{conformancePassword, url},
		Ordered:      true,
		DedupesByID:  true,
		KeepsHeaders: true,
	})
}

// conformanceJS connects to url for t, reconnecting for as long as the
// server is away.
func conformanceJS(t *testing.T, url string) jetstream.JetStream {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

func randomHex() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// streamDeliveries reads every message of the stream, in stream order,
// back into the fields the sink published.
func streamDeliveries(stream jetstream.Stream) ([]sinktest.Delivery, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []sinktest.Delivery
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		raw, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		d := sinktest.Delivery{Payload: raw.Data, Headers: map[string]string{}}
		for name, values := range raw.Header {
			switch name {
			case jetstream.MsgIDHeader:
				d.ID = values[0]
			case natsjs.HeaderEventType:
				d.Type = values[0]
			case natsjs.HeaderEventKey:
				d.Key = values[0]
			default:
				d.Headers[name] = values[0]
			}
		}
		out = append(out, d)
	}
	return out, nil
}
