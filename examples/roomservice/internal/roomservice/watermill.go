package roomservice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill-redisstream/pkg/redisstream"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
	wmsink "github.com/outboxrelay/outboxrelay/sink/watermill"
)

// The brokers of sink.watermill.broker.
const (
	// WatermillAMQP publishes to RabbitMQ (watermill-amqp) with publisher
	// confirms, into the durable queue named by the topic.
	WatermillAMQP = "amqp"
	// WatermillRedis appends to the Redis stream named by the topic
	// (watermill-redisstream, XADD).
	WatermillRedis = "redis"
)

// watermillBrokers are the brokers room-service builds, in the order
// errors list them.
var watermillBrokers = []string{WatermillAMQP, WatermillRedis}

// WatermillConfig is the sink block's watermill sub-block: sink/watermill
// with a publisher room-service builds for Broker. Every event is a
// Watermill message whose UUID is the event ID, with the metadata
// outbox-event-id, outbox-event-type and outbox-event-key (the room ID);
// consumers deduplicate by the UUID. It prints (every fmt verb) and logs
// with AMQPURL and RedisPassword redacted.
type WatermillConfig struct {
	// Broker is "amqp" (RabbitMQ) or "redis" (Redis Streams). Required.
	// The other broker's keys are ignored.
	Broker string `yaml:"broker"`
	// Topic is the Watermill topic: the durable queue (amqp, on the
	// default exchange) or the stream's key (redis). Defaults to "rooms".
	Topic string `yaml:"topic"`
	// MaxInFlight bounds the publish calls in the publisher at once.
	// Defaults to sink/watermill's 64.
	MaxInFlight int `yaml:"max_in_flight"`
	// CloseTimeout bounds how long shutdown waits for publish calls
	// still in the publisher. Defaults to sink/watermill's 30s.
	CloseTimeout time.Duration `yaml:"close_timeout"`
	// StartupTimeout is how long start-up waits for the broker (and, for
	// amqp, the queue). Defaults to 1m.
	StartupTimeout time.Duration `yaml:"startup_timeout"`

	// AMQPURL is RabbitMQ's URL, amqp://user:password@host:5672/vhost
	// (or amqps://). Required with broker amqp. It holds the password:
	// give it in WATERMILL_AMQP_URL or the file WATERMILL_AMQP_URL_FILE
	// names. Start-up declares the durable queue Topic when it does not
	// exist; an existing queue is the operator's and is left as it is.
	AMQPURL string `yaml:"amqp_url"`

	// RedisAddr is Redis's host:port. Required with broker redis.
	RedisAddr string `yaml:"redis_addr"`
	// RedisPassword is Redis's password (AUTH), if it has one: give it
	// in WATERMILL_REDIS_PASSWORD or the file WATERMILL_REDIS_PASSWORD_FILE
	// names. Defaults to none.
	RedisPassword string `yaml:"redis_password"`
}

// The defaults of the watermill sub-block that are room-service's own
// (max_in_flight and close_timeout default to sink/watermill's).
const (
	DefaultWatermillTopic          = "rooms"
	DefaultWatermillStartupTimeout = time.Minute
)

// amqpChannelPool is how many AMQP channels the publisher keeps open: as
// many publishes as that wait for their confirms at once.
const amqpChannelPool = 8

func (c WatermillConfig) withDefaults() WatermillConfig {
	svckit.OrDefault(&c.Topic, DefaultWatermillTopic)
	svckit.OrDefault(&c.MaxInFlight, wmsink.DefaultMaxInFlight)
	svckit.OrDefault(&c.CloseTimeout, wmsink.DefaultCloseTimeout)
	svckit.OrDefault(&c.StartupTimeout, DefaultWatermillStartupTimeout)
	return c
}

// validate checks the sub-block of kind watermill; errors name the key,
// never a secret's value.
func (c WatermillConfig) validate() error {
	var errs []error
	switch c.Broker {
	case WatermillAMQP:
		if c.AMQPURL == "" {
			errs = append(errs, fmt.Errorf("config: sink.watermill.amqp_url: required with broker amqp (or set %s or %s)", EnvWatermillAMQPURL, EnvWatermillAMQPURLFile))
		} else if _, err := amqp091.ParseURI(c.AMQPURL); err != nil {
			errs = append(errs, fmt.Errorf("config: sink.watermill.amqp_url: want amqp://user:password@host:port/vhost (or amqps://): %w", uriErr(err)))
		}
	case WatermillRedis:
		if c.RedisAddr == "" {
			errs = append(errs, errors.New("config: sink.watermill.redis_addr: required with broker redis"))
		} else if _, _, err := net.SplitHostPort(c.RedisAddr); err != nil {
			errs = append(errs, fmt.Errorf("config: sink.watermill.redis_addr %q: want host:port", c.RedisAddr))
		}
	case "":
		errs = append(errs, fmt.Errorf("config: sink.watermill.broker: required with sink.kind watermill (supported: %q)", watermillBrokers))
	default:
		errs = append(errs, fmt.Errorf("config: sink.watermill.broker %q: unknown (supported: %q)", c.Broker, watermillBrokers))
	}
	if c.StartupTimeout < 0 {
		errs = append(errs, fmt.Errorf("config: sink.watermill.startup_timeout %v: must not be negative", c.StartupTimeout))
	}
	// wmsink.New checks topic, max_in_flight and close_timeout, with a
	// publisher that is never called.
	if _, err := wmsink.New(c.sinkConfig(noPublisher{}, slog.New(slog.DiscardHandler))); err != nil {
		errs = append(errs, fmt.Errorf("config: sink.watermill: %w", err))
	}
	return errors.Join(errs...)
}

// uriErr is amqp091.ParseURI's error, unless it is url.Parse's, which
// quotes the whole URL, password included.
func uriErr(err error) error {
	if _, ok := errors.AsType[*url.Error](err); ok {
		return errors.New("does not parse as a URL")
	}
	return err
}

// noPublisher stands in for a publisher when only the sink's
// configuration is checked; it is never called.
type noPublisher struct{ message.Publisher }

// sinkConfig is sink/watermill's Config for the sub-block and pub.
func (c WatermillConfig) sinkConfig(pub message.Publisher, log *slog.Logger) wmsink.Config {
	cfg := wmsink.Config{Publisher: pub, Topic: c.Topic, MaxInFlight: c.MaxInFlight, CloseTimeout: c.CloseTimeout,
		Redact: c.secrets(), Logger: log}
	switch c.Broker {
	case WatermillAMQP:
		cfg.Check = wmsink.CheckAMQP
	case WatermillRedis:
		cfg.Classify = classifyRedis
	}
	return cfg
}

// secrets are the texts of the chosen broker that must never show: the
// AMQP URL and its password, or the Redis password.
func (c WatermillConfig) secrets() []string {
	var s []string
	switch c.Broker {
	case WatermillAMQP:
		if c.AMQPURL != "" {
			s = append(s, c.AMQPURL)
		}
		if u, err := url.Parse(c.AMQPURL); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok && p != "" {
				s = append(s, p, url.QueryEscape(p))
			}
		}
	case WatermillRedis:
		if c.RedisPassword != "" {
			s = append(s, c.RedisPassword)
		}
	}
	return s
}

// scrub returns err, or a stand-in without its text when that holds a
// piece of a secret of c (secretfmt.Hide) other than the broker's scheme
// and host, which the errors name.
func (c WatermillConfig) scrub(err error) error {
	shown := []string{redactURL(c.AMQPURL), c.RedisAddr}
	for _, s := range c.secrets() {
		err = secretfmt.Hide(err, s, shown)
	}
	return err
}

// classifyRedis classes Redis's replies for the sink: a key of another
// type where the stream should be (WRONGTYPE) or a user without rights to
// it (NOPERM) is the set-up's to fix (Unavailable: retried, alerted);
// anything else is retried.
func classifyRedis(err error) wmsink.Class {
	var re redis.Error
	if errors.As(err, &re) {
		if msg := re.Error(); strings.HasPrefix(msg, "WRONGTYPE") || strings.HasPrefix(msg, "NOPERM") {
			return wmsink.Unavailable
		}
	}
	return wmsink.Retryable
}

// watermillSink connects to the broker (waiting up to startup_timeout),
// and returns the sink and what closes it and its publisher, in that
// order, once the workers have stopped.
func (a *App) watermillSink(ctx context.Context, c WatermillConfig) (*wmsink.Sink, func(), error) {
	var (
		pub message.Publisher
		err error
	)
	switch c.Broker {
	case WatermillAMQP:
		pub, err = a.amqpPublisher(ctx, c)
	default: // validated: WatermillRedis
		pub, err = a.redisPublisher(ctx, c)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("sink.watermill (%s): %w", c.Broker, c.scrub(err))
	}
	sink, err := wmsink.New(c.sinkConfig(pub, a.log))
	if err != nil {
		_ = pub.Close()
		return nil, nil, fmt.Errorf("sink.watermill: %w", err)
	}
	closeAll := func() {
		if err := sink.Close(); err != nil {
			a.log.Warn("sink.watermill: close", slog.Any("err", err))
		}
		if err := pub.Close(); err != nil {
			a.log.Warn("sink.watermill: close the publisher", slog.Any("err", c.scrub(err)))
		}
	}
	return sink, closeAll, nil
}

// amqpPublisher connects a watermill-amqp publisher (durable queue
// config: the default exchange, routing key = topic, persistent
// messages; confirms on) and declares the durable queue when it is
// missing: RabbitMQ drops, and confirms, a message no queue is bound to.
func (a *App) amqpPublisher(ctx context.Context, c WatermillConfig) (*wmamqp.Publisher, error) {
	cfg := wmamqp.NewDurableQueueConfig(c.AMQPURL)
	cfg.Publish.ConfirmDelivery = true
	cfg.Publish.ChannelPoolSize = amqpChannelPool
	if uri, err := amqp091.ParseURI(c.AMQPURL); err == nil && uri.ConnectionTimeout == 0 {
		// A dial that hangs (a black-holed address) gives up within
		// startup_timeout, not amqp091's 30s after it.
		cfg.Connection.AmqpConfig = &amqp091.Config{Locale: "en_US", Dial: amqp091.DefaultDial(min(c.StartupTimeout, 30*time.Second))}
	}
	var pub *wmamqp.Publisher
	err := svckit.WaitFor(ctx, c.StartupTimeout, func(context.Context) error {
		var err error
		pub, err = wmamqp.NewPublisher(cfg, watermill.NewSlogLogger(a.log))
		if err != nil {
			return err
		}
		if err = declareQueue(pub.Connection(), c.Topic, cfg.Queue.Durable); err != nil {
			_ = pub.Close()
			pub = nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: queue %q not available within %v: %w", redactURL(c.AMQPURL), c.Topic, c.StartupTimeout, err)
	}
	a.log.InfoContext(ctx, "sink.watermill: RabbitMQ ready", slog.String("broker", redactURL(c.AMQPURL)), slog.String("queue", c.Topic))
	return pub, nil
}

// declareQueue makes sure the queue exists: a passive declaration, and
// when RabbitMQ answers 404 (which closes the channel), a durable one.
func declareQueue(conn *amqp091.Connection, queue string, durable bool) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	_, err = ch.QueueDeclarePassive(queue, durable, false, false, false, nil)
	var ae *amqp091.Error
	if !errors.As(err, &ae) || ae.Code != amqp091.NotFound {
		_ = ch.Close()
		return err
	}
	if ch, err = conn.Channel(); err != nil {
		return err
	}
	defer ch.Close()
	_, err = ch.QueueDeclare(queue, durable, false, false, false, nil)
	return err
}

// redisPublisher is a watermill-redisstream publisher on a client of its
// own (which the publisher's Close closes), once Redis answers PING.
func (a *App) redisPublisher(ctx context.Context, c WatermillConfig) (*redisstream.Publisher, error) {
	client := redis.NewClient(&redis.Options{Addr: c.RedisAddr, Password: c.RedisPassword})
	err := svckit.WaitFor(ctx, c.StartupTimeout, func(ctx context.Context) error { return client.Ping(ctx).Err() })
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("%s: not available within %v: %w", c.RedisAddr, c.StartupTimeout, err)
	}
	pub, err := redisstream.NewPublisher(redisstream.PublisherConfig{Client: client}, watermill.NewSlogLogger(a.log))
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	a.log.InfoContext(ctx, "sink.watermill: Redis ready", slog.String("addr", c.RedisAddr), slog.String("stream", c.Topic))
	return pub, nil
}

// String prints the sub-block with the AMQP URL and the Redis password
// redacted.
func (c WatermillConfig) String() string {
	type plain WatermillConfig
	c.AMQPURL = redactURL(c.AMQPURL)
	if c.RedisPassword != "" {
		c.RedisPassword = svckit.Redacted
	}
	return fmt.Sprintf("%+v", plain(c))
}

// Format makes every verb print String; LogValue makes slog log it.
func (c WatermillConfig) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }
func (c WatermillConfig) LogValue() slog.Value       { return slog.StringValue(c.String()) }
