package roomservice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"slices"
	"time"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/kafka"
	"github.com/outboxrelay/outboxrelay/sink/tencentim"
	"github.com/outboxrelay/outboxrelay/sink/webhook"
)

// The sink kinds: the values of sink.kind.
const (
	// SinkTencentIM delivers to Tencent Cloud IM, configured by the
	// tencent_im block (the default kind).
	SinkTencentIM = "tencentim"
	// SinkNATSJS publishes into a NATS JetStream stream (sink/natsjs),
	// configured by sink.natsjs.
	SinkNATSJS = "natsjs"
	// SinkKafka produces to a Kafka topic (sink/kafka, franz-go),
	// configured by sink.kafka.
	SinkKafka = "kafka"
	// SinkWebhook POSTs each event to an HTTP endpoint, signed as
	// Standard Webhooks says (sink/webhook), configured by sink.webhook.
	SinkWebhook = "webhook"
	// SinkWatermill publishes through sink/watermill, with a Watermill
	// publisher room-service builds for sink.watermill.broker: RabbitMQ
	// (watermill-amqp) or Redis Streams (watermill-redisstream).
	// Configured by sink.watermill.
	SinkWatermill = "watermill"
)

// sinkKinds are the kinds room-service builds, in the order errors list
// them.
var sinkKinds = []string{SinkTencentIM, SinkNATSJS, SinkKafka, SinkWebhook, SinkWatermill}

// SinkConfig is the sink block: where the outbox worker (and the publish
// right after commit) delivers room_outbox's events. Exactly one kind is
// used; the sub-blocks of the other kinds are ignored. The nats block
// relays to NATS JetStream beside it, whatever the kind.
type SinkConfig struct {
	// Kind is "tencentim" (the default; the tencent_im block), "natsjs",
	// "kafka", "webhook" or "watermill". Anything else fails start-up.
	// ROOMSERVICE_SINK_KIND overrides it.
	Kind string `yaml:"kind"`
	// NATSJS is the stream of kind natsjs: every event goes to
	// <subject_prefix>.<event_type>.<room_id>, with Nats-Msg-Id its event
	// ID, so that the stream discards a redelivery within duplicates.
	// Its url is required, best given in SINK_NATS_URL or the file
	// SINK_NATS_URL_FILE names.
	NATSJS JetStreamConfig `yaml:"natsjs"`
	// Kafka is the topic of kind kafka: sink/kafka's Config, decoded
	// from its yaml keys (seeds, topic, client_id, tls, sasl,
	// compression, max_record_bytes). The room ID is the record key, so
	// a room's events stay in one partition, in order; the event ID
	// travels in the outbox-event-id header. seeds and topic are
	// required (or KAFKA_SEEDS, comma-separated, and KAFKA_TOPIC);
	// client_id defaults to "room-service"; the SASL password is best
	// given in KAFKA_SASL_PASSWORD or the file KAFKA_SASL_PASSWORD_FILE
	// names.
	Kafka kafka.Config `yaml:"kafka"`
	// Webhook is the endpoint of kind webhook.
	Webhook WebhookConfig `yaml:"webhook"`
	// Watermill is the broker of kind watermill (RabbitMQ or Redis
	// Streams) and its topic.
	Watermill WatermillConfig `yaml:"watermill"`
}

// WebhookConfig is the sink block's webhook sub-block: sink/webhook's
// Config, by key. Every event is POSTed to URL with webhook-id (the
// event ID), webhook-timestamp and webhook-signature; 2xx is delivered,
// 408, 429 and 5xx are retried (Retry-After respected), other answers
// fail for good (dead letters).
type WebhookConfig struct {
	// URL is the endpoint: http or https, with a host. Its path and query
	// may hold a token, so it is best given in WEBHOOK_URL or the file
	// WEBHOOK_URL_FILE names; only its scheme and host are ever printed.
	// Required.
	URL string `yaml:"url"`
	// Secrets sign every request: "whsec_" and a base64 key each, 1 to
	// 10 (rotation: add the new one, let receivers learn it, drop the
	// old). Best given in WEBHOOK_SECRETS (comma-separated) or the file
	// WEBHOOK_SECRETS_FILE names; never printed. Required.
	Secrets []string `yaml:"secrets"`
	// Headers are sent with every request (an Authorization header, say).
	// Their values are secrets: never printed.
	Headers map[string]string `yaml:"headers"`
	// AllowNetworks are the special networks (loopback, private,
	// link-local, …) the sink may connect to, as CIDR prefixes, e.g.
	// "10.0.0.0/8" for an endpoint inside the cluster. Defaults to none:
	// public addresses only (a guard against SSRF).
	AllowNetworks []string `yaml:"allow_networks"`
	// MaxRedirects is how many 307/308 redirects a request follows.
	// Defaults to 0.
	MaxRedirects int `yaml:"max_redirects"`
	// ConnectTimeout, ResponseHeaderTimeout and BodyTimeout bound a
	// request's steps (defaults 5s, 15s, 5s).
	ConnectTimeout        time.Duration `yaml:"connect_timeout"`
	ResponseHeaderTimeout time.Duration `yaml:"response_header_timeout"`
	BodyTimeout           time.Duration `yaml:"body_timeout"`
	// MaxPayloadBytes bounds an event's payload (default 1 MiB); a larger
	// one fails for good.
	MaxPayloadBytes int `yaml:"max_payload_bytes"`
	// MaxRetryAfter caps the wait a Retry-After asks for (default 10m).
	MaxRetryAfter time.Duration `yaml:"max_retry_after"`
	// ContentType and UserAgent are the requests' (defaults
	// "application/json" and "outboxrelay-webhook/1").
	ContentType string `yaml:"content_type"`
	UserAgent   string `yaml:"user_agent"`
}

// DefaultKafkaClientID is sink.kafka.client_id's default.
const DefaultKafkaClientID = "room-service"

// kind is Kind, "" meaning SinkTencentIM.
func (c SinkConfig) kind() string {
	if c.Kind == "" {
		return SinkTencentIM
	}
	return c.Kind
}

func (c SinkConfig) withDefaults() SinkConfig {
	c.NATSJS = c.NATSJS.withDefaults()
	svckit.OrDefault(&c.Kafka.ClientID, DefaultKafkaClientID)
	c.Watermill = c.Watermill.withDefaults()
	return c
}

// validate checks the chosen kind's sub-block (the tencent_im block is
// Config's); every error names its key, never a secret's value.
func (c SinkConfig) validate() error {
	switch k := c.kind(); k {
	case SinkTencentIM:
		return nil
	case SinkNATSJS:
		if c.NATSJS.URL == "" {
			return fmt.Errorf("config: sink.natsjs.url: required with sink.kind %s (or set %s or %s)", k, EnvSinkNATSURL, EnvSinkNATSURLFile)
		}
		return c.NATSJS.validate("sink.natsjs")
	case SinkKafka:
		return c.validateKafka()
	case SinkWebhook:
		return c.validateWebhook()
	case SinkWatermill:
		return c.Watermill.validate()
	default:
		return fmt.Errorf("config: sink.kind %q: unknown (supported: %q)", k, sinkKinds)
	}
}

func (c SinkConfig) validateKafka() error {
	var errs []error
	if len(c.Kafka.Seeds) == 0 {
		errs = append(errs, fmt.Errorf("config: sink.kafka.seeds: required with sink.kind kafka (or set %s)", EnvKafkaSeeds))
	}
	if c.Kafka.Topic == "" {
		errs = append(errs, fmt.Errorf("config: sink.kafka.topic: required with sink.kind kafka (or set %s)", EnvKafkaTopic))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// kafka.New checks the rest (and reads the TLS files); its client
	// connects on first use only, and is closed at once.
	k := c.Kafka
	k.Logger = slog.New(slog.DiscardHandler)
	s, err := kafka.New(k)
	if err != nil {
		return fmt.Errorf("config: sink.kafka: %w", err)
	}
	s.Close()
	return nil
}

func (c SinkConfig) validateWebhook() error {
	w := c.Webhook
	var errs []error
	if w.URL == "" {
		errs = append(errs, fmt.Errorf("config: sink.webhook.url: required with sink.kind webhook (or set %s or %s)", EnvWebhookURL, EnvWebhookURLFile))
	}
	if len(w.Secrets) == 0 {
		errs = append(errs, fmt.Errorf("config: sink.webhook.secrets: required with sink.kind webhook (or set %s or %s)", EnvWebhookSecrets, EnvWebhookSecretsFile))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	cfg, err := w.config(slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	// webhook.New checks the rest; it does not connect.
	s, err := webhook.New(cfg)
	if err != nil {
		return fmt.Errorf("config: sink.webhook: %w", err)
	}
	return s.Close()
}

// config is sink/webhook's Config for the sub-block.
func (w WebhookConfig) config(log *slog.Logger) (webhook.Config, error) {
	cfg := webhook.Config{
		URL: w.URL, Secrets: w.Secrets, Headers: w.Headers, MaxRedirects: w.MaxRedirects,
		ConnectTimeout: w.ConnectTimeout, ResponseHeaderTimeout: w.ResponseHeaderTimeout, BodyTimeout: w.BodyTimeout,
		MaxPayloadBytes: w.MaxPayloadBytes, MaxRetryAfter: w.MaxRetryAfter, ContentType: w.ContentType, UserAgent: w.UserAgent,
		Logger: log,
	}
	for i, n := range w.AllowNetworks {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			return webhook.Config{}, fmt.Errorf("config: sink.webhook.allow_networks[%d] %q: want a CIDR prefix such as 10.0.0.0/8", i, n)
		}
		cfg.AllowNetworks = append(cfg.AllowNetworks, p)
	}
	return cfg, nil
}

// newSink builds the sink of sink.kind. There is no Tencent IM fake in
// here: the demo command and the tests start one and put its address in
// tencent_im.base_url. A sink that holds connections is closed by
// closeResources, after the workers have stopped.
func (a *App) newSink(ctx context.Context) (outbox.Sink, error) {
	c := a.cfg.Sink
	switch c.kind() {
	case SinkNATSJS:
		sink, nc, err := a.jetStreamSink(ctx, c.NATSJS)
		if err != nil {
			return nil, err
		}
		a.closers = append(a.closers, nc.Close)
		return sink, nil
	case SinkKafka:
		k := c.Kafka
		k.Logger = a.log
		sink, err := kafka.New(k)
		if err != nil {
			return nil, fmt.Errorf("sink.kafka: %w", err)
		}
		a.closers = append(a.closers, sink.Close)
		return sink, nil
	case SinkWebhook:
		cfg, err := c.Webhook.config(a.log)
		if err != nil {
			return nil, err
		}
		sink, err := webhook.New(cfg)
		if err != nil {
			return nil, fmt.Errorf("sink.webhook: %w", err)
		}
		a.closers = append(a.closers, func() { _ = sink.Close() })
		return sink, nil
	case SinkWatermill:
		sink, closeSink, err := a.watermillSink(ctx, c.Watermill)
		if err != nil {
			return nil, err
		}
		a.closers = append(a.closers, closeSink)
		return sink, nil
	default: // validated: SinkTencentIM
		im := a.cfg.TencentIM
		return tencentim.New(tencentim.Config{
			BaseURL: im.BaseURL, SDKAppID: im.SDKAppID, SecretKey: im.SecretKey, AdminIdentifier: im.AdminIdentifier,
			SkipTypes: noIMTypes, Logger: a.log,
		})
	}
}

// The sink block's secrets are the NATS URL's credentials (which
// JetStreamConfig's Format redacts), the Kafka password (a kafka.Secret,
// which never prints), the webhook's URL (its path and query may hold a
// token), secrets and header values, which redacted replaces, and the
// Watermill sub-block's AMQP URL and Redis password (which
// WatermillConfig's Format redacts).
func (w WebhookConfig) redacted() WebhookConfig {
	w.URL = redactURL(w.URL)
	w.Secrets = slices.Repeat([]string{svckit.Redacted}, len(w.Secrets))
	if w.Headers != nil {
		h := make(map[string]string, len(w.Headers))
		for name := range w.Headers {
			h[name] = svckit.Redacted
		}
		w.Headers = h
	}
	return w
}

// redactURL keeps a URL's scheme and host: its user information, path
// and query may hold a token.
func redactURL(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "(a URL that does not parse)"
	}
	if u.User == nil && (u.Path == "" || u.Path == "/") && u.RawQuery == "" && u.Fragment == "" {
		return u.Scheme + "://" + u.Host + u.Path
	}
	return u.Scheme + "://" + u.Host + "/" + svckit.Redacted
}

// String prints the block with its secrets redacted.
func (c SinkConfig) String() string {
	type plain SinkConfig
	return fmt.Sprintf("%+v", plain(c)) // each sub-block's Format redacts
}

// String prints the sub-block with its secrets redacted.
func (w WebhookConfig) String() string {
	type plain WebhookConfig
	return fmt.Sprintf("%+v", plain(w.redacted()))
}

// Format makes every verb print String; LogValue makes slog log it.
func (c SinkConfig) Format(f fmt.State, _ rune)    { _, _ = io.WriteString(f, c.String()) }
func (c SinkConfig) LogValue() slog.Value          { return slog.StringValue(c.String()) }
func (w WebhookConfig) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, w.String()) }
func (w WebhookConfig) LogValue() slog.Value       { return slog.StringValue(w.String()) }
