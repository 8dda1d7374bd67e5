package kafka_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/kafka"
	"github.com/outboxrelay/outboxrelay/sink/sinktest"
)

// suitePassword is the SASL password of the suite's cluster: the suite
// checks that it shows nowhere.
const suitePassword = "kafka-Suite-pa55word-0123456789"

// unreachable is a kfake cluster whose brokers can be made to drop
// every connection at its first request, until they are let be: the
// brokers go away and come back with what they held. (The suite's leak
// check counts every goroutine of the process, so a cluster closed and
// started again in-process, as TestBrokersGoAwayAndComeBack does, would
// count as the sink's leak.)
type unreachable struct {
	c    *kfake.Cluster
	down atomic.Bool
}

func newUnreachable(t *testing.T, opts ...kfake.Opt) *unreachable {
	u := &unreachable{c: cluster(t, opts...)}
	u.c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		if !u.down.Load() {
			return nil, nil, false // handled as usual
		}
		u.c.KeepControl()
		return nil, errors.New("the broker is away"), true // closes the connection
	})
	return u
}

// TestConformance runs the sink suite against kfake: a cluster of three
// brokers that takes SASL/PLAIN, a topic of three partitions per sink,
// and brokers that drop every connection for the Outage check.
func TestConformance(t *testing.T) {
	u := newUnreachable(t, kfake.EnableSASL(), kfake.Superuser(kafka.SASLPlain, "svc", suitePassword))
	addrs := u.c.ListenAddrs()
	auth := kafka.SASL{Mechanism: kafka.SASLPlain, Username: "svc", Password: suitePassword}
	admin := kgo.SASL(plain.Auth{User: "svc", Pass: suitePassword}.AsMechanism())
	sinkOn := func(t *testing.T, topic string) *kafka.Sink {
		s, err := kafka.New(kafka.Config{Seeds: addrs, Topic: topic, SASL: auth, MaxRecordBytes: 64 << 10})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		return s
	}
	sinktest.Run(t, sinktest.Peer{
		NewSink: func(t *testing.T) sinktest.Target {
			var b [4]byte
			_, _ = rand.Read(b[:])
			name := "suite-" + hex.EncodeToString(b[:])
			createTopic(t, addrs, name, partitions, nil, admin)
			return sinktest.Target{Sink: sinkOn(t, name), Received: func() ([]sinktest.Delivery, error) {
				recs, err := readTopic(addrs, name, admin)
				if err != nil {
					return nil, err
				}
				out := make([]sinktest.Delivery, 0, len(recs))
				for _, rec := range recs {
					out = append(out, delivery(rec))
				}
				return out, nil
			}}
		},
		Stop:  func(*testing.T) { u.down.Store(true) },
		Start: func(*testing.T) { u.down.Store(false) },
		Unacceptable: []outbox.Message{
			{ID: "too-large", Type: "T", Key: "k", Payload: make([]byte, 64<<10)},
		},
		Misconfigured: func(t *testing.T) outbox.Sink { return sinkOn(t, "no-such-topic") },
		Secrets:       []string{suitePassword},
		Ordered:       true,
		KeepsHeaders:  true,
	})
}

// delivery decodes a record back into the message it was made from.
func delivery(rec *kgo.Record) sinktest.Delivery {
	d := sinktest.Delivery{Key: string(rec.Key), Payload: rec.Value, Headers: map[string]string{}}
	for _, h := range rec.Headers {
		switch h.Key {
		case kafka.HeaderEventID:
			d.ID = string(h.Value)
		case kafka.HeaderEventType:
			d.Type = string(h.Value)
		default:
			d.Headers[h.Key] = string(h.Value)
		}
	}
	return d
}
