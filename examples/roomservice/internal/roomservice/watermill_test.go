package roomservice

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill-redisstream/pkg/redisstream"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	wmsink "github.com/outboxrelay/outboxrelay/sink/watermill"
)

// The brokers the tests run against (those of this project's machines
// and CI by default); the tests fail, never skip, without them.
const (
	envTestAMQPURL       = "OUTBOXRELAY_TEST_AMQP_URL"
	defaultTestAMQPURL   = "amqp://guest:guest@127.0.0.1:5672/"
	envTestRedisAddr     = "OUTBOXRELAY_TEST_REDIS_ADDR"
	defaultTestRedisAddr = "127.0.0.1:6379"
)

func testEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// testAMQPURL is the machine's RabbitMQ; it fails t when none answers.
func testAMQPURL(t *testing.T) string {
	t.Helper()
	u := testEnv(envTestAMQPURL, defaultTestAMQPURL)
	conn, err := amqp091.DialConfig(u, amqp091.Config{Dial: amqp091.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Fatalf("no RabbitMQ at %s (%v): start one, or set %s", redactURL(u), err, envTestAMQPURL)
	}
	_ = conn.Close()
	return u
}

// testRedis is a client of the machine's Redis, closed when t ends; it
// fails t when none answers.
func testRedis(t *testing.T) *redis.Client {
	t.Helper()
	addr := testEnv(envTestRedisAddr, defaultTestRedisAddr)
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("no Redis at %s (%v): start one, or set %s", addr, err, envTestRedisAddr)
	}
	return c
}

func randomName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// TestSinkWatermillConfig: the sub-block parses for each broker, fills
// its defaults, and takes its secrets from the environment (the plain
// variable over its _FILE, both over the file).
func TestSinkWatermillConfig(t *testing.T) {
	clearEnv(t)
	parse := func(t *testing.T, yaml string) WatermillConfig {
		t.Helper()
		cfg, err := ParseConfig([]byte(base + yaml))
		require.NoError(t, err)
		require.Equal(t, SinkWatermill, cfg.Sink.kind())
		return cfg.Sink.Watermill
	}
	t.Run("amqp, defaults", func(t *testing.T) {
		w := parse(t, "sink:\n  kind: watermill\n  watermill:\n    broker: amqp\n    amqp_url: \"amqp://rs:pw@rabbit:5672/\"\n")
		require.Equal(t, WatermillConfig{Broker: WatermillAMQP, Topic: DefaultWatermillTopic, MaxInFlight: wmsink.DefaultMaxInFlight,
			CloseTimeout: wmsink.DefaultCloseTimeout, StartupTimeout: DefaultWatermillStartupTimeout, AMQPURL: "amqp://rs:pw@rabbit:5672/"}, w)
	})
	t.Run("redis, overrides", func(t *testing.T) {
		w := parse(t, "sink:\n  kind: watermill\n  watermill:\n    broker: redis\n    topic: room-events\n    max_in_flight: 8\n"+
			"    close_timeout: 5s\n    startup_timeout: 10s\n    redis_addr: \"redis:6379\"\n    redis_password: pw\n")
		require.Equal(t, WatermillConfig{Broker: WatermillRedis, Topic: "room-events", MaxInFlight: 8, CloseTimeout: 5 * time.Second,
			StartupTimeout: 10 * time.Second, RedisAddr: "redis:6379", RedisPassword: "pw"}, w)
	})
	t.Run("secrets from the environment", func(t *testing.T) {
		t.Setenv(EnvWatermillAMQPURLFile, writeFile(t, "url", "amqp://rs:from-file@rabbit:5672/\n"))
		w := parse(t, "sink:\n  kind: watermill\n  watermill:\n    broker: amqp\n    amqp_url: \"amqp://rs:in-yaml@rabbit:5672/\"\n")
		require.Equal(t, "amqp://rs:from-file@rabbit:5672/", w.AMQPURL, "_FILE over the file")
		t.Setenv(EnvWatermillAMQPURL, "amqp://rs:from-env@rabbit:5672/")
		require.Equal(t, "amqp://rs:from-env@rabbit:5672/", parse(t, "sink:\n  kind: watermill\n  watermill:\n    broker: amqp\n").AMQPURL, "plain over _FILE")

		t.Setenv(EnvWatermillRedisPasswordFile, writeFile(t, "pw", "redis-from-file\n"))
		w = parse(t, "sink:\n  kind: watermill\n  watermill:\n    broker: redis\n    redis_addr: \"r:6379\"\n")
		require.Equal(t, "redis-from-file", w.RedisPassword)
		t.Setenv(EnvWatermillRedisPassword, "redis-from-env")
		require.Equal(t, "redis-from-env", parse(t, "sink:\n  kind: watermill\n  watermill:\n    broker: redis\n    redis_addr: \"r:6379\"\n").RedisPassword)
	})
	t.Run("ROOMSERVICE_SINK_KIND chooses it", func(t *testing.T) {
		t.Setenv(EnvSinkKind, SinkWatermill)
		require.Equal(t, WatermillRedis, parse(t, "sink:\n  watermill:\n    broker: redis\n    redis_addr: \"r:6379\"\n").Broker)
	})
}

// TestSinkWatermillConfigErrors: a bad sub-block fails start-up naming
// its key, never a secret.
func TestSinkWatermillConfigErrors(t *testing.T) {
	clearEnv(t)
	const head = "sink:\n  kind: watermill\n  watermill:\n"
	for _, c := range []struct{ yaml, want string }{
		{"sink:\n  kind: watermill\n", `config: sink.watermill.broker: required with sink.kind watermill (supported: ["amqp" "redis"])`},
		{head + "    broker: kafka\n", `config: sink.watermill.broker "kafka": unknown (supported: ["amqp" "redis"])`},
		{head + "    broker: amqp\n", "config: sink.watermill.amqp_url: required with broker amqp (or set WATERMILL_AMQP_URL or WATERMILL_AMQP_URL_FILE)"},
		{head + "    broker: amqp\n    amqp_url: \"http://u:s3cret@rabbit:5672/\"\n", "config: sink.watermill.amqp_url: want amqp://user:password@host:port/vhost (or amqps://): AMQP scheme"},
		{head + "    broker: amqp\n    amqp_url: \"amqp://u:s3cret@rabbit:5672/%zz\"\n", "config: sink.watermill.amqp_url: want amqp://user:password@host:port/vhost (or amqps://): does not parse as a URL"},
		{head + "    broker: redis\n", "config: sink.watermill.redis_addr: required with broker redis"},
		{head + "    broker: redis\n    redis_addr: redis\n    redis_password: s3cret\n", `config: sink.watermill.redis_addr "redis": want host:port`},
		{head + "    broker: redis\n    redis_addr: \"r:1\"\n    topic: \"a\\u0000b\"\n", `config: sink.watermill: watermill: Topic "a\x00b"`},
		{head + "    broker: redis\n    redis_addr: \"r:1\"\n    max_in_flight: 5000\n", "config: sink.watermill: watermill: MaxInFlight 5000"},
		{head + "    broker: redis\n    redis_addr: \"r:1\"\n    close_timeout: -1s\n", "config: sink.watermill: watermill: CloseTimeout -1s"},
		{head + "    broker: redis\n    redis_addr: \"r:1\"\n    startup_timeout: -1s\n", "config: sink.watermill.startup_timeout -1s: must not be negative"},
		{head + "    broker: redis\n    redis_addr: \"r:1\"\n    bogus: 1\n", "field bogus not found"},
	} {
		_, err := ParseConfig([]byte(base + c.yaml))
		require.ErrorContains(t, err, c.want, c.yaml)
		require.NotContains(t, err.Error(), "s3cret")
		require.NotContains(t, err.Error(), "tencent_im", "the tencent_im block is kind tencentim's")
	}
}

// TestSinkWatermillStartupNeverShowsSecrets: a broker that refuses the
// password, or is not there, fails start-up within startup_timeout with
// an error that names the broker without the secrets, and logs none.
func TestSinkWatermillStartupNeverShowsSecrets(t *testing.T) {
	const secret = "wm-Secret-pa55-9d1c"
	wrong, err := url.Parse(testAMQPURL(t))
	require.NoError(t, err)
	wrong.User = url.UserPassword("guest", secret)
	for _, c := range []struct {
		name string
		cfg  WatermillConfig
		want string
	}{
		{"amqp, wrong password", WatermillConfig{Broker: WatermillAMQP, AMQPURL: wrong.String()}, "sink.watermill (amqp): amqp://"},
		{"amqp, no broker", WatermillConfig{Broker: WatermillAMQP, AMQPURL: "amqp://rs:" + secret + "@127.0.0.1:1/"}, "sink.watermill (amqp): amqp://127.0.0.1:1/[redacted]"},
		{"redis, no server", WatermillConfig{Broker: WatermillRedis, RedisAddr: "127.0.0.1:1", RedisPassword: secret}, "sink.watermill (redis): 127.0.0.1:1: not available within 1s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := testutil.NewDatabase(t)
			var logged syncBuffer
			var cfg Config
			cfg.MySQL.DSN, cfg.HTTP.Addr, cfg.HTTP.AdminAddr = db.DSN, "127.0.0.1:0", "127.0.0.1:0"
			cfg.Sink = SinkConfig{Kind: SinkWatermill, Watermill: c.cfg}
			cfg.Sink.Watermill.StartupTimeout = time.Second
			cfg = cfg.WithDefaults()
			require.NoError(t, cfg.validate())
			_, err := NewApp(context.Background(), cfg, slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug})))
			require.ErrorContains(t, err, c.want)
			t.Log(err)
			require.NotContains(t, err.Error(), secret)
			require.NotContains(t, logged.String(), secret)
		})
	}
}

// syncBuffer is a strings.Builder that several goroutines may write.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// requireWatermillMessage checks that m is the event id of room r1 as
// sink/watermill sends it: UUID and outbox-event-id the event ID,
// outbox-event-key the room.
func requireWatermillMessage(t *testing.T, id string, m *message.Message) {
	t.Helper()
	require.Equal(t, id, m.UUID)
	require.Equal(t, id, m.Metadata.Get(wmsink.MetadataEventID))
	require.Equal(t, "r1", m.Metadata.Get(wmsink.MetadataEventKey))
	require.NotEmpty(t, m.Metadata.Get(wmsink.MetadataEventType))
	requireEnvelope(t, id, m.Payload)
}

// TestSinkWatermillAMQPDelivers: with sink.kind watermill and broker
// amqp, start-up declares the durable queue, and a command's events
// reach it through the real RabbitMQ, read back with watermill-amqp's
// subscriber.
func TestSinkWatermillAMQPDelivers(t *testing.T) {
	rabbit := testAMQPURL(t)
	queue := randomName("rs-sink-")
	t.Cleanup(func() { deleteQueue(t, rabbit, queue) })
	app := sinkApp(t, SinkConfig{Kind: SinkWatermill, Watermill: WatermillConfig{Broker: WatermillAMQP, Topic: queue, AMQPURL: rabbit}})
	ids := deliverCommands(t, app)

	sub, err := wmamqp.NewSubscriber(wmamqp.NewDurableQueueConfig(rabbit), watermill.NopLogger{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := sub.Subscribe(ctx, queue)
	require.NoError(t, err)
	got := map[string]*message.Message{}
	for len(got) < len(ids) {
		select {
		case m := <-ch:
			got[m.UUID] = m
			m.Ack()
		case <-ctx.Done():
			t.Fatalf("%d of %d events in queue %s", len(got), len(ids), queue)
		}
	}
	for _, id := range ids {
		require.Contains(t, got, id)
		requireWatermillMessage(t, id, got[id])
	}
	require.Empty(t, app.fakeIM.AllMessages(), "the sink replaces Tencent IM")
}

// deleteQueue deletes a queue of the test broker.
func deleteQueue(t *testing.T, rabbit, queue string) {
	conn, err := amqp091.Dial(rabbit)
	if err != nil {
		t.Logf("deleting queue %s: %v", queue, err)
		return
	}
	defer conn.Close()
	if ch, err := conn.Channel(); err == nil {
		_, _ = ch.QueueDelete(queue, false, false, false)
	}
}

// TestSinkWatermillRedisDelivers: with sink.kind watermill and broker
// redis, a command's events are appended to the stream named by the
// topic on the real Redis, read back with XRANGE and
// watermill-redisstream's unmarshaller.
func TestSinkWatermillRedisDelivers(t *testing.T) {
	c := testRedis(t)
	stream := randomName("rs-sink-")
	t.Cleanup(func() { _ = c.Del(context.Background(), stream).Err() })
	app := sinkApp(t, SinkConfig{Kind: SinkWatermill, Watermill: WatermillConfig{Broker: WatermillRedis, Topic: stream, RedisAddr: c.Options().Addr}})
	ids := deliverCommands(t, app)

	entries, err := c.XRange(context.Background(), stream, "-", "+").Result()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(entries), len(ids), "at least once: deliverCommands waited until all were published")
	got := map[string]*message.Message{}
	for _, e := range entries {
		m, err := redisstream.DefaultMarshallerUnmarshaller{}.Unmarshal(e.Values)
		require.NoError(t, err)
		got[m.UUID] = m
	}
	for _, id := range ids {
		require.Contains(t, got, id)
		requireWatermillMessage(t, id, got[id])
	}
	require.Empty(t, app.fakeIM.AllMessages(), "the sink replaces Tencent IM")
}
