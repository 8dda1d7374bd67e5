package roomservice

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/examples/internal/natstest"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
)

// TestNATSConfig: the nats block's defaults, the environment, and the
// checks, each naming its key.
func TestNATSConfig(t *testing.T) {
	clearEnv(t)
	base := "mysql:\n  dsn: \"root@tcp(db:3306)/rooms\"\n" + imBlock
	cfg, err := ParseConfig([]byte(base))
	require.NoError(t, err)
	require.False(t, cfg.NATS.Enabled(), "no url: no broker")

	t.Setenv(EnvNATSURLFile, writeFile(t, "url", "nats://app:s3cret@nats:4222\n"))
	cfg, err = ParseConfig([]byte(base))
	require.NoError(t, err)
	require.Equal(t, NATSConfig{JetStreamConfig: JetStreamConfig{URL: "nats://app:s3cret@nats:4222", Stream: "ROOMS", SubjectPrefix: "rooms",
		Duplicates: DefaultNATSDuplicates, StartupTimeout: DefaultNATSStartupTimeout}, Consumer: "broker"}, cfg.NATS)
	require.NotContains(t, fmt.Sprint(cfg), "s3cret")
	require.NotContains(t, fmt.Sprintf("%#v", cfg.NATS), "s3cret")
	require.Contains(t, fmt.Sprint(cfg.NATS), "nats:4222")

	for _, c := range []struct{ block, want string }{
		{"nats:\n  url: \"http://nats:4222\"\n", "config: nats.url: URL 1 of 1: want nats://"},
		{"nats:\n  url: \"nats://a:4222, nats://:secret@\"\n", "config: nats.url: URL 2 of 2"},
		{"nats:\n  url: \"nats://n:4222\"\n  stream: \"A.B\"\n", `config: nats.stream "A.B"`},
		{"nats:\n  url: \"nats://n:4222\"\n  subject_prefix: \"rooms.*\"\n", "config: nats.subject_prefix"},
		{"nats:\n  url: \"nats://n:4222\"\n  consumer: \"-x\"\n", "config: nats.consumer"},
		{"nats:\n  url: \"nats://n:4222\"\n  duplicates: \"-1s\"\n", "config: nats.duplicates -1s"},
	} {
		t.Setenv(EnvNATSURLFile, "")
		_, err := ParseConfig([]byte(base + c.block))
		require.ErrorContains(t, err, c.want, c.block)
		require.NotContains(t, err.Error(), "secret")
	}
}

// TestBrokerRelaysEvents: with nats.url set, every event goes to the
// stream as well (subject <prefix>.<type>.<room>, Nats-Msg-Id the event
// ID), by the broker consumer's own worker, and Tencent IM still gets
// its messages.
func TestBrokerRelaysEvents(t *testing.T) {
	run := natstest.RunID()
	stream, prefix := "RS_TEST_"+run, "rstest."+run
	js := natstest.JetStream(t)
	natstest.DeleteStreamsAtCleanup(t, js, stream)

	on := true
	app := startApp(t, nil, func(c *Config) {
		c.OutboxWorker.Enabled = &on
		c.NATS = NATSConfig{JetStreamConfig: JetStreamConfig{URL: natstest.URL(), Stream: stream, SubjectPrefix: prefix, StartupTimeout: 10 * time.Second}}
	})
	created := app.command("/v1/rooms", map[string]any{"room_id": "r1", "owner_id": "alice", "command_id": "c1"})
	joined := app.command("/v1/rooms/r1/join", map[string]any{"user_id": "bob", "command_id": "c2"})
	want := append(created.EventIDs, joined.EventIDs...)

	s, err := js.Stream(context.Background(), stream)
	require.NoError(t, err, "start-up created the stream")
	outboxtest.Eventually(t, "every event in the stream", func() bool {
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == uint64(len(want))
	})
	got := map[string]string{}
	for seq := uint64(1); seq <= uint64(len(want)); seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		require.NoError(t, err)
		var env Envelope
		require.NoError(t, json.Unmarshal(m.Data, &env))
		require.Equal(t, env.EventID, m.Header.Get(jetstream.MsgIDHeader))
		require.Equal(t, prefix+"."+env.EventType+".r1", m.Subject)
		got[env.EventID] = m.Header.Get(natsjs.HeaderEventType)
	}
	for _, id := range want {
		require.Contains(t, got, id)
	}
	require.Equal(t, RoomUserJoined, got[joined.EventIDs[0]])
	outboxtest.Eventually(t, "Tencent IM still gets the join", func() bool { return app.imDeliveries()[joined.EventIDs[0]] == 1 })
	// The stream has a message as soon as the broker's worker publishes
	// it; the worker records the outcome after that.
	broker, err := app.store.Consumer("broker")
	require.NoError(t, err)
	outboxtest.Eventually(t, "the broker's state is a named consumer's: every event published", func() bool {
		for _, id := range want {
			r, err := broker.Get(context.Background(), id)
			if err != nil || r.Status != outbox.StatusPublished {
				return false
			}
		}
		return true
	})
}

// TestBrokerErrorsHideCredentials: a NATS that does not answer fails
// start-up, naming the server without its password.
func TestBrokerErrorsHideCredentials(t *testing.T) {
	cfg := Config{NATS: NATSConfig{JetStreamConfig: JetStreamConfig{URL: "nats://app:pa55word@127.0.0.1:1", StartupTimeout: 1500 * time.Millisecond}}}.WithDefaults()
	a := &App{cfg: cfg, log: slog.New(slog.DiscardHandler)}
	b, err := a.newBroker(context.Background(), nil, OutboxWorkerConfig{}.mustOptions(t))
	require.Nil(t, b)
	require.ErrorContains(t, err, "nats nats://[redacted]@127.0.0.1:1")
	require.NotContains(t, err.Error(), "pa55word")
	require.False(t, strings.Contains(fmt.Sprintf("%+v", err), "pa55word"))
}

func (c OutboxWorkerConfig) mustOptions(t *testing.T) outbox.WorkerOptions {
	t.Helper()
	o, err := c.WorkerOptions()
	require.NoError(t, err)
	return o
}
