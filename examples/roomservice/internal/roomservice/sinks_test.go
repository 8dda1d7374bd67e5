package roomservice

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxrelay/outboxrelay/examples/internal/natstest"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/kafka"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
	"github.com/outboxrelay/outboxrelay/sink/webhook"
)

// testWebhookSecret is a valid whsec_ secret (32 bytes of key).
const testWebhookSecret = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// base is a valid config but for the sink, which the cases add.
const base = "mysql:\n  dsn: \"root@tcp(db:3306)/rooms\"\n"

// TestSinkConfig: each kind parses from its sub-block, takes its secrets
// from the environment, and fails start-up on a bad value naming its key.
// The tencent_im block is needed only by kind tencentim.
func TestSinkConfig(t *testing.T) {
	clearEnv(t)
	parse := func(t *testing.T, yaml string) Config {
		t.Helper()
		cfg, err := ParseConfig([]byte(base + yaml))
		require.NoError(t, err)
		return cfg
	}
	t.Run("tencentim, the default", func(t *testing.T) {
		require.Equal(t, SinkTencentIM, parse(t, imBlock).Sink.kind())
		require.Equal(t, SinkTencentIM, parse(t, "sink:\n  kind: tencentim\n"+imBlock).Sink.kind())
		_, err := ParseConfig([]byte(base))
		require.ErrorContains(t, err, "config: tencent_im.base_url: required")
	})
	t.Run("natsjs", func(t *testing.T) {
		cfg := parse(t, "sink:\n  kind: natsjs\n  natsjs:\n    url: \"nats://n:4222\"\n    stream: S\n")
		require.Equal(t, JetStreamConfig{URL: "nats://n:4222", Stream: "S", SubjectPrefix: DefaultNATSSubjectPrefix,
			Duplicates: DefaultNATSDuplicates, StartupTimeout: DefaultNATSStartupTimeout}, cfg.Sink.NATSJS)
		t.Setenv(EnvSinkNATSURLFile, writeFile(t, "url", "nats://app:s3cret@n:4222\n"))
		cfg = parse(t, "sink:\n  kind: natsjs\n")
		require.Equal(t, "nats://app:s3cret@n:4222", cfg.Sink.NATSJS.URL)
	})
	t.Run("kafka", func(t *testing.T) {
		cfg := parse(t, "sink:\n  kind: kafka\n  kafka:\n    seeds: [\"k1:9092\", \"k2:9092\"]\n    topic: rooms\n"+
			"    compression: zstd\n    tls:\n      enabled: true\n    sasl:\n      mechanism: PLAIN\n      username: rs\n      password: p4ss\n")
		k := cfg.Sink.Kafka
		require.Equal(t, []string{"k1:9092", "k2:9092"}, k.Seeds)
		require.Equal(t, "rooms", k.Topic)
		require.Equal(t, "zstd", k.Compression)
		require.True(t, k.TLS.Enabled)
		require.Equal(t, kafka.SASL{Mechanism: kafka.SASLPlain, Username: "rs", Password: "p4ss"}, k.SASL)
		require.Equal(t, DefaultKafkaClientID, k.ClientID)

		t.Setenv(EnvKafkaSeeds, "a:1, b:2")
		t.Setenv(EnvKafkaTopic, "events")
		t.Setenv(EnvKafkaPasswordFile, writeFile(t, "pw", "from-file\n"))
		k = parse(t, "sink:\n  kind: kafka\n  kafka:\n    sasl:\n      mechanism: SCRAM-SHA-256\n      username: rs\n").Sink.Kafka
		require.Equal(t, []string{"a:1", "b:2"}, k.Seeds)
		require.Equal(t, "events", k.Topic)
		require.Equal(t, kafka.Secret("from-file"), k.SASL.Password)
	})
	t.Run("webhook", func(t *testing.T) {
		cfg := parse(t, "sink:\n  kind: webhook\n  webhook:\n    url: \"https://hooks.example.com/x\"\n    secrets: [\""+testWebhookSecret+"\"]\n"+
			"    allow_networks: [\"10.0.0.0/8\"]\n    max_redirects: 2\n    connect_timeout: 2s\n")
		w := cfg.Sink.Webhook
		require.Equal(t, WebhookConfig{URL: "https://hooks.example.com/x", Secrets: []string{testWebhookSecret}, AllowNetworks: []string{"10.0.0.0/8"},
			MaxRedirects: 2, ConnectTimeout: 2 * time.Second}, w)

		t.Setenv(EnvWebhookURL, "https://h.example.com/in?token=t0k3n")
		t.Setenv(EnvWebhookSecretsFile, writeFile(t, "secrets", testWebhookSecret+","+testWebhookSecret+"\n"))
		w = parse(t, "sink:\n  kind: webhook\n").Sink.Webhook
		require.Equal(t, "https://h.example.com/in?token=t0k3n", w.URL)
		require.Equal(t, []string{testWebhookSecret, testWebhookSecret}, w.Secrets)
	})
	t.Run("the other kinds' blocks are ignored", func(t *testing.T) {
		cfg := parse(t, "sink:\n  kind: natsjs\n  natsjs:\n    url: \"nats://n:4222\"\n  kafka:\n    compression: nonsense\n")
		require.Equal(t, SinkNATSJS, cfg.Sink.kind())
	})
}

// TestSinkConfigErrors: a bad sink block fails start-up, naming the key,
// never a secret.
func TestSinkConfigErrors(t *testing.T) {
	clearEnv(t)
	for _, c := range []struct{ yaml, want string }{
		{"sink:\n  kind: rabbit\n", `config: sink.kind "rabbit": unknown (supported: ["tencentim" "natsjs" "kafka" "webhook" "watermill"])`},
		{"sink:\n  kind: natsjs\n", "config: sink.natsjs.url: required with sink.kind natsjs (or set SINK_NATS_URL or SINK_NATS_URL_FILE)"},
		{"sink:\n  kind: natsjs\n  natsjs:\n    url: \"http://u:s3cret@n:1\"\n", "config: sink.natsjs.url: URL 1 of 1"},
		{"sink:\n  kind: natsjs\n  natsjs:\n    url: \"nats://n:1\"\n    stream: \"A.B\"\n", `config: sink.natsjs.stream "A.B"`},
		{"sink:\n  kind: natsjs\n  natsjs:\n    url: \"nats://n:1\"\n    subject_prefix: \"a.*\"\n", "config: sink.natsjs.subject_prefix"},
		{"sink:\n  kind: kafka\n", "config: sink.kafka.seeds: required with sink.kind kafka (or set KAFKA_SEEDS)"},
		{"sink:\n  kind: kafka\n  kafka:\n    seeds: [k:1]\n", "config: sink.kafka.topic: required with sink.kind kafka (or set KAFKA_TOPIC)"},
		{"sink:\n  kind: kafka\n  kafka:\n    seeds: [k:1]\n    topic: \"a b\"\n", `config: sink.kafka: kafka: Topic "a b"`},
		{"sink:\n  kind: kafka\n  kafka:\n    seeds: [k:1]\n    topic: t\n    compression: brotli\n", `config: sink.kafka: kafka: Compression "brotli"`},
		{"sink:\n  kind: kafka\n  kafka:\n    seeds: [k:1]\n    topic: t\n    sasl:\n      mechanism: PLAIN\n      password: s3cret\n", "config: sink.kafka: kafka: SASL.Username"},
		{"sink:\n  kind: kafka\n  kafka:\n    seeds: [k:1]\n    topic: t\n    sasl:\n      mechanism: PLAIN\n      username: u\n", "SASL.Password (empty): both required"},
		{"sink:\n  kind: kafka\n  kafka:\n    seeds: [k:1]\n    topic: t\n    bogus: 1\n", "field bogus not found"},
		{"sink:\n  kind: webhook\n", "config: sink.webhook.url: required with sink.kind webhook (or set WEBHOOK_URL or WEBHOOK_URL_FILE)\n" +
			"config: sink.webhook.secrets: required with sink.kind webhook (or set WEBHOOK_SECRETS or WEBHOOK_SECRETS_FILE)"},
		{"sink:\n  kind: webhook\n  webhook:\n    url: \"ftp://h/s3cret\"\n    secrets: [\"" + testWebhookSecret + "\"]\n", "config: sink.webhook: webhook: URL"},
		{"sink:\n  kind: webhook\n  webhook:\n    url: \"https://h\"\n    secrets: [\"s3cret\"]\n", "config: sink.webhook: webhook: Secrets[0]"},
		{"sink:\n  kind: webhook\n  webhook:\n    url: \"http://127.0.0.1:1\"\n    secrets: [\"" + testWebhookSecret + "\"]\n", "config: sink.webhook: webhook: URL"},
		{"sink:\n  kind: webhook\n  webhook:\n    url: \"https://h\"\n    secrets: [\"" + testWebhookSecret + "\"]\n    allow_networks: [\"10/8\"]\n",
			`config: sink.webhook.allow_networks[0] "10/8": want a CIDR prefix`},
		{"sink:\n  kind: webhook\n  webhook:\n    url: \"https://h\"\n    secrets: [\"" + testWebhookSecret + "\"]\n    max_redirects: 11\n", "config: sink.webhook: webhook: MaxRedirects 11"},
	} {
		_, err := ParseConfig([]byte(base + c.yaml))
		require.ErrorContains(t, err, c.want, c.yaml)
		require.NotContains(t, err.Error(), "s3cret")
		require.NotContains(t, err.Error(), "tencent_im", "the tencent_im block is kind tencentim's")
	}
}

// TestSinkConfigNeverPrintsSecrets: the sink block's secrets stay out of
// every fmt verb and slog, on the block and on the whole config.
func TestSinkConfigNeverPrintsSecrets(t *testing.T) {
	s := SinkConfig{
		NATSJS:    JetStreamConfig{URL: "nats://app:natspw@n:4222"},
		Kafka:     kafka.Config{Seeds: []string{"k:1"}, SASL: kafka.SASL{Mechanism: kafka.SASLPlain, Username: "u", Password: "kafkapw"}},
		Webhook:   WebhookConfig{URL: "https://h.example.com/in/urltoken?q=querytoken", Secrets: []string{testWebhookSecret}, Headers: map[string]string{"Authorization": "Bearer hdrtoken"}},
		Watermill: WatermillConfig{Broker: WatermillAMQP, AMQPURL: "amqp://rs:amqppw@rabbit:5672/vh", RedisAddr: "redis:6379", RedisPassword: "redispw"},
	}
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	log.Info("sink", slog.Any("sink", s), slog.Any("webhook", s.Webhook), slog.Any("watermill", s.Watermill), slog.Any("config", Config{Sink: s}))
	outs := []string{logged.String()}
	for _, v := range []any{s, s.Webhook, s.NATSJS, s.Kafka, s.Watermill, Config{Sink: s}} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
			outs = append(outs, fmt.Sprintf(verb, v))
		}
	}
	for _, out := range outs {
		for _, secret := range []string{"natspw", "kafkapw", "urltoken", "querytoken", "hdrtoken", strings.TrimPrefix(testWebhookSecret, "whsec_"), "amqppw", "redispw"} {
			require.NotContains(t, out, secret)
		}
	}
	require.Contains(t, fmt.Sprint(s), "https://h.example.com/[redacted]")
	require.Contains(t, fmt.Sprint(s), "Authorization:[redacted]")
	require.Contains(t, fmt.Sprint(s), "AMQPURL:amqp://rabbit:5672/[redacted]")
	require.Contains(t, fmt.Sprint(s), "RedisAddr:redis:6379 RedisPassword:[redacted]")
}

// deliverCommands runs a create and a join on app and returns the IDs of
// their events: RoomCreated, RoomUserJoined and RoomHeatChanged, which
// every sink but Tencent IM delivers.
func deliverCommands(t *testing.T, app *testApp) []string {
	t.Helper()
	created := app.command("/v1/rooms", map[string]any{"room_id": "r1", "owner_id": "alice", "command_id": "c1"})
	joined := app.command("/v1/rooms/r1/join", map[string]any{"user_id": "bob", "command_id": "c2"})
	ids := append(created.EventIDs, joined.EventIDs...)
	require.Len(t, ids, 3)
	outboxtest.Eventually(t, "every event is published", func() bool {
		return app.unpublished() == 0
	})
	return ids
}

// requireEnvelope checks that payload is the event id of room r1.
func requireEnvelope(t *testing.T, id string, payload []byte) {
	t.Helper()
	var env Envelope
	require.NoError(t, json.Unmarshal(payload, &env))
	require.Equal(t, id, env.EventID)
	require.Equal(t, "r1", env.RoomID)
}

// sinkApp starts room-service with sink and the worker on.
func sinkApp(t *testing.T, sink SinkConfig) *testApp {
	on := true
	return startApp(t, nil, func(c *Config) {
		c.Sink = sink
		c.OutboxWorker.Enabled = &on
	})
}

// TestSinkNATSJSDelivers: with sink.kind natsjs, a command's events reach
// a real JetStream stream, subject <prefix>.<type>.r1, Nats-Msg-Id the
// event ID, and Tencent IM gets nothing.
func TestSinkNATSJSDelivers(t *testing.T) {
	run := natstest.RunID()
	stream, prefix := "RS_SINK_"+run, "rssink."+run
	js := natstest.JetStream(t)
	natstest.DeleteStreamsAtCleanup(t, js, stream)
	app := sinkApp(t, SinkConfig{Kind: SinkNATSJS, NATSJS: JetStreamConfig{URL: natstest.URL(), Stream: stream, SubjectPrefix: prefix, StartupTimeout: 10 * time.Second}})
	ids := deliverCommands(t, app)

	s, err := js.Stream(context.Background(), stream)
	require.NoError(t, err, "start-up created the stream")
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(len(ids)), info.State.Msgs)
	for i, id := range ids {
		m, err := s.GetMsg(context.Background(), uint64(i+1))
		require.NoError(t, err)
		require.Equal(t, id, m.Header.Get("Nats-Msg-Id"))
		require.Equal(t, prefix+"."+m.Header.Get(natsjs.HeaderEventType)+".r1", m.Subject)
		requireEnvelope(t, id, m.Data)
	}
	require.Empty(t, app.fakeIM.AllMessages(), "the sink replaces Tencent IM")
}

// TestSinkKafkaDelivers: with sink.kind kafka, a command's events reach
// the topic of an in-process Kafka cluster (franz-go's kfake), keyed by
// the room, the event ID in the outbox-event-id header.
func TestSinkKafkaDelivers(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "rooms"))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	app := sinkApp(t, SinkConfig{Kind: SinkKafka, Kafka: kafka.Config{Seeds: cluster.ListenAddrs(), Topic: "rooms"}})
	ids := deliverCommands(t, app)

	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("rooms"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	got := map[string]*kgo.Record{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(got) < len(ids) && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == kafka.HeaderEventID {
					got[string(h.Value)] = r
				}
			}
		})
	}
	require.Len(t, got, len(ids))
	var partition int32 = -1
	for _, id := range ids {
		r := got[id]
		require.NotNil(t, r, id)
		require.Equal(t, "r1", string(r.Key))
		requireEnvelope(t, id, r.Value)
		if partition >= 0 {
			require.Equal(t, partition, r.Partition, "one room, one partition")
		}
		partition = r.Partition
	}
	require.Empty(t, app.fakeIM.AllMessages(), "the sink replaces Tencent IM")
}

// TestSinkWebhookDelivers: with sink.kind webhook, a command's events are
// POSTed to an endpoint on loopback (allowed by allow_networks), signed
// with the configured secret, webhook-id the event ID.
func TestSinkWebhookDelivers(t *testing.T) {
	var (
		mu   sync.Mutex
		got  = map[string][]byte{}
		errs []error
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = webhook.Verify([]string{testWebhookSecret}, r.Header, body, 0)
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		got[r.Header.Get(webhook.HeaderID)] = body
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)

	app := sinkApp(t, SinkConfig{Kind: SinkWebhook, Webhook: WebhookConfig{URL: srv.URL + "/rooms", Secrets: []string{testWebhookSecret},
		AllowNetworks: []string{"127.0.0.0/8", "::1/128"}}})
	ids := deliverCommands(t, app)
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, errs, "every request verifies")
	require.Len(t, got, len(ids))
	for _, id := range ids {
		requireEnvelope(t, id, got[id])
	}
	require.Empty(t, app.fakeIM.AllMessages(), "the sink replaces Tencent IM")
}

// TestSinkWebhookRefusesLoopbackByDefault: without allow_networks, the
// SSRF guard keeps a loopback endpoint out at start-up.
func TestSinkWebhookRefusesLoopbackByDefault(t *testing.T) {
	clearEnv(t)
	_, err := ParseConfig([]byte(base + "sink:\n  kind: webhook\n  webhook:\n    url: \"http://127.0.0.1:8080/x\"\n    secrets: [\"" + testWebhookSecret + "\"]\n"))
	require.ErrorContains(t, err, "config: sink.webhook: webhook: URL")
}
