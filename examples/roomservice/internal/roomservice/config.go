package roomservice

import (
	"errors"
	"fmt"
	"time"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxui"
)

// Config is room-service's configuration: a YAML file (optional), then
// the environment (EnvSettings), then the defaults.
type Config struct {
	// NodeID names this instance in logs and leases. Defaults to
	// <hostname>-<pid>.
	NodeID string      `yaml:"node_id"`
	HTTP   HTTPConfig  `yaml:"http"`
	MySQL  MySQLConfig `yaml:"mysql"`
	// Sink chooses where the events are delivered: Tencent IM (the
	// default; the tencent_im block), NATS JetStream, Kafka, a webhook, or
	// RabbitMQ or Redis Streams through Watermill.
	Sink SinkConfig `yaml:"sink"`
	// TencentIM is Tencent IM's settings, used when sink.kind is
	// tencentim (the default) and ignored otherwise.
	TencentIM TencentIMConfig `yaml:"tencent_im"`
	// NATS relays the events to NATS JetStream too, when its url is set.
	NATS         NATSConfig         `yaml:"nats"`
	OutboxWorker OutboxWorkerConfig `yaml:"outbox_worker"`
	Commands     CommandsConfig     `yaml:"commands"`
	// ShutdownTimeout bounds a graceful stop after the drain delay: the
	// HTTP server's drain, the worker's last publish and MySQL's close.
	// Defaults to 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// MetricsStatsInterval is how long one reading of the outbox backlog
	// serves /metrics scrapes. Defaults to 2s.
	MetricsStatsInterval time.Duration `yaml:"metrics_stats_interval"`
}

// HTTPConfig is the http block: the listeners and their limits
// (svckit.HTTP, defaults ":8080" and "127.0.0.1:9090"), and what is
// room-service's own: the API's in-flight cap and the outbox dashboard
// on the admin listener.
type HTTPConfig struct {
	svckit.HTTP `yaml:",inline"`
	// OutboxUIReadOnly switches the requeue actions of the outbox
	// dashboard (admin listener, /outbox/) off. The dashboard has no
	// login of its own: set it where others than operators reach the
	// admin listener.
	OutboxUIReadOnly bool `yaml:"outbox_ui_read_only"`
	// OutboxUIHosts are the host names and IP addresses, besides
	// loopback, that the outbox dashboard answers to: the name in the
	// address bar of the operator's browser, without a port
	// (outboxui.Options.AllowedHosts). A request for any other Host gets
	// 421, so that a web page cannot reach the dashboard by resolving a
	// name of its own to the admin address (DNS rebinding). Defaults to
	// none: loopback only (localhost, 127.0.0.0/8, ::1, any port), which
	// is what a kubectl port-forward, an ssh tunnel or a port published
	// on the host's 127.0.0.1 sends. /metrics and the probes do not
	// check the Host.
	OutboxUIHosts []string `yaml:"outbox_ui_hosts"`
	// MaxInFlight caps the API requests handled at once; beyond it the
	// answer is 503 with Retry-After. Defaults to 256.
	MaxInFlight int `yaml:"max_in_flight"`
}

// MySQLConfig is the mysql block (svckit.MySQL). MaxOpenConns defaults
// to 20: a command holds one connection for a few milliseconds, the
// worker one more, and a server's max_connections (151 by default) is
// shared by every instance, so that 5 instances stay below 110.
// MaxIdleConns defaults to 10.
type MySQLConfig = svckit.MySQL

// CommandsConfig is the commands block (svckit.Retention): the command
// log that makes command IDs idempotent. Retention is how long a command
// ID is remembered: a retry within it replays the first result, one
// after it runs the command again. Defaults to 168h (7 days); old
// commands are deleted every retention_interval (1m), retention_batch
// (1000) rows per statement.
type CommandsConfig = svckit.Retention

// TencentIMConfig is the tencent_im block.
type TencentIMConfig struct {
	// Fake is refused: room-service has no Tencent IM fake inside. Set,
	// it fails validation with an error that points at the demo command,
	// which runs one (and can serve one for base_url to point at).
	Fake bool `yaml:"fake"`
	// BaseURL is the REST API's origin, e.g. https://console.tim.qq.com
	// (http only to loopback, such as the demo command's fake). Required.
	BaseURL         string `yaml:"base_url"`
	SDKAppID        int    `yaml:"sdk_app_id"`
	AdminIdentifier string `yaml:"admin_identifier"`
	// SecretKey may be left empty and given in TENCENT_IM_SECRET_KEY or
	// the file TENCENT_IM_SECRET_KEY_FILE names; the environment wins.
	// It is never printed. BaseURL, SDKAppID and AdminIdentifier can come
	// from the environment too (EnvSettings).
	SecretKey string `yaml:"secret_key"`
}

// OutboxWorkerConfig is the seed's outbox_worker block.
type OutboxWorkerConfig struct {
	// Enabled starts the compensation worker. Defaults to true.
	Enabled *bool `yaml:"enabled"`
	// PollInterval, BatchSize and PublishTimeout fall back to the worker's
	// defaults (1s, 100, 3s) when <= 0.
	PollInterval   time.Duration `yaml:"poll_interval"`
	BatchSize      int           `yaml:"batch_size"`
	PublishTimeout time.Duration `yaml:"publish_timeout"`
	// AfterCommitTimeout bounds the publish right after a command commits,
	// which the HTTP request waits for; an event it could not publish in
	// time is left to the worker. Defaults to the worker's (500ms) when
	// <= 0; values above publish_timeout are cut to it.
	AfterCommitTimeout time.Duration `yaml:"after_commit_timeout"`
	// RetryStrategy is "" or "fixed_interval" (the seed's: retry forever
	// at a fixed interval; only errors the sink marks permanent become
	// dead letters), or "exponential"; anything else fails start-up.
	RetryStrategy string `yaml:"retry_strategy"`
	// RetryInterval is fixed_interval's wait; 0 means poll_interval.
	RetryInterval time.Duration `yaml:"retry_interval"`
	// RetryInitialInterval, RetryMaxInterval, RetryMultiplier and
	// RetryJitter tune exponential (0: 1s, 5m, 2, 0.2; jitter -1: none).
	RetryInitialInterval time.Duration `yaml:"retry_initial_interval"`
	RetryMaxInterval     time.Duration `yaml:"retry_max_interval"`
	RetryMultiplier      float64       `yaml:"retry_multiplier"`
	RetryJitter          float64       `yaml:"retry_jitter"`
	// RetryMaxAttempts, when positive, makes a message a dead letter after
	// that many failed attempts; 0 (the seed's) retries forever.
	RetryMaxAttempts int `yaml:"retry_max_attempts"`
	// Ordering delivers each room's events in order, one at a time.
	Ordering bool `yaml:"ordering"`
	// Retention, when positive, deletes published events older than this
	// in the background; 0 (the default) keeps them.
	Retention time.Duration `yaml:"retention"`
}

// WorkerEnabled reports whether the worker runs (the default).
func (c OutboxWorkerConfig) WorkerEnabled() bool { return c.Enabled == nil || *c.Enabled }

// WorkerOptions turns the block into outbox.WorkerOptions; an unknown
// retry strategy is an error that names it.
func (c OutboxWorkerConfig) WorkerOptions() (outbox.WorkerOptions, error) {
	retry, err := c.retryPolicy()
	if err != nil {
		return outbox.WorkerOptions{}, fmt.Errorf("config: outbox_worker: %w", err)
	}
	opts := outbox.WorkerOptions{
		Name:           "room_outbox",
		PollInterval:   c.PollInterval,
		BatchSize:      c.BatchSize,
		PublishTimeout: c.PublishTimeout,
		// The request waits for this one.
		AfterCommitTimeout: c.AfterCommitTimeout,
		Retry:              retry,
		KeyAttr:            "room_id",
		Ordering:           c.Ordering,
		Retention:          c.Retention,
	}
	if err := opts.Validate(); err != nil {
		return outbox.WorkerOptions{}, fmt.Errorf("config: outbox_worker: %w", err)
	}
	return opts, nil
}

// Retry strategy words of outbox_worker.retry_strategy.
const (
	retryFixedInterval = "fixed_interval"
	retryExponential   = "exponential"
)

// retryPolicy builds the block's retry policy: "" or fixed_interval
// (outbox.FixedInterval, retry_interval), or exponential
// (outbox.Exponential, retry_initial_interval, retry_max_interval,
// retry_multiplier, retry_jitter), wrapped in outbox.MaxAttempts when
// retry_max_attempts is positive. Any other word is an error naming it,
// so that a typo fails start-up instead of changing delivery silently.
// The worker's options check the policy's values (WorkerOptions.Validate).
func (c OutboxWorkerConfig) retryPolicy() (outbox.RetryPolicy, error) {
	var p outbox.RetryPolicy
	switch c.RetryStrategy {
	case "", retryFixedInterval:
		p = outbox.FixedInterval{Interval: c.RetryInterval}
	case retryExponential:
		p = outbox.Exponential{Initial: c.RetryInitialInterval, Max: c.RetryMaxInterval, Multiplier: c.RetryMultiplier, Jitter: c.RetryJitter}
	default:
		return nil, fmt.Errorf("retry_strategy %q: unknown (supported: %q, %q)", c.RetryStrategy, retryFixedInterval, retryExponential)
	}
	switch {
	case c.RetryMaxAttempts < 0:
		return nil, fmt.Errorf("retry_max_attempts %d: must not be negative", c.RetryMaxAttempts)
	case c.RetryMaxAttempts > 0:
		p = outbox.MaxAttempts{Policy: p, Attempts: c.RetryMaxAttempts}
	}
	return p, nil
}

// LoadConfig reads a YAML file, applies the environment (EnvSettings),
// fills defaults and validates. Unknown keys are errors, so a typo fails
// start-up. With path "", the settings come from the environment alone.
func LoadConfig(path string) (Config, error) { return svckit.LoadConfig(path, ParseConfig) }

// ParseConfig is LoadConfig on bytes; empty data is an empty file.
func ParseConfig(data []byte) (Config, error) {
	return svckit.ParseConfig(data, EnvSettings, Config.WithDefaults, Config.validate)
}

// The defaults WithDefaults fills in (and svckit's, for the http and
// mysql blocks).
const (
	DefaultHTTPAddr          = ":8080"
	DefaultAdminAddr         = "127.0.0.1:9090"
	DefaultMaxInFlight       = 256
	DefaultMaxOpenConns      = 20
	DefaultMaxIdleConns      = 10
	DefaultCommandRetention  = 7 * 24 * time.Hour
	DefaultRetentionInterval = svckit.DefaultRetentionInterval
	DefaultRetentionBatch    = svckit.DefaultRetentionBatch
	DefaultShutdownTimeout   = 30 * time.Second
)

// WithDefaults returns a copy of c with the documented defaults filled in
// for every zero value.
func (c Config) WithDefaults() Config {
	c.HTTP.HTTP = c.HTTP.WithDefaults(DefaultHTTPAddr, DefaultAdminAddr)
	svckit.OrDefault(&c.HTTP.MaxInFlight, DefaultMaxInFlight)
	c.MySQL = c.MySQL.WithDefaults(DefaultMaxOpenConns, DefaultMaxIdleConns)
	c.Commands = c.Commands.WithDefaults(DefaultCommandRetention)
	svckit.OrDefault(&c.ShutdownTimeout, DefaultShutdownTimeout)
	c.NATS = c.NATS.withDefaults()
	c.Sink = c.Sink.withDefaults()
	return c
}

func (c Config) validate() error {
	var errs []error
	errs = append(errs, c.HTTP.validate(), c.MySQL.Validate(), validCommands(c.Commands), c.NATS.validate(), c.Sink.validate())
	if c.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("config: shutdown_timeout: %v: must not be negative", c.ShutdownTimeout))
	}
	if opts, err := c.OutboxWorker.WorkerOptions(); err != nil {
		errs = append(errs, err)
	} else if err := opts.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("config: outbox_worker: %w", err))
	}
	if c.Sink.kind() == SinkTencentIM {
		errs = append(errs, c.TencentIM.validate())
	}
	return errors.Join(errs...)
}

func (im TencentIMConfig) validate() error {
	if im.Fake {
		return errFakeIM
	}
	var errs []error
	if im.BaseURL == "" {
		errs = append(errs, fmt.Errorf("config: tencent_im.base_url: required (or set %s)", EnvBaseURL))
	}
	if im.SDKAppID <= 0 {
		errs = append(errs, fmt.Errorf("config: tencent_im.sdk_app_id %d: must be positive (or set %s)", im.SDKAppID, EnvSDKAppID))
	}
	if im.AdminIdentifier == "" {
		errs = append(errs, fmt.Errorf("config: tencent_im.admin_identifier: required (or set %s)", EnvAdminIdentifier))
	}
	if im.SecretKey == "" {
		errs = append(errs, fmt.Errorf("config: tencent_im.secret_key: required (set %s or %s)", EnvSecretKey, EnvSecretKeyFile))
	}
	return errors.Join(errs...)
}

func (h HTTPConfig) validate() error {
	errs := []error{h.HTTP.Validate()}
	if h.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("config: http.max_in_flight: %d: must not be negative", h.MaxInFlight))
	}
	for i, host := range h.OutboxUIHosts {
		if err := outboxui.CheckHost(host); err != nil {
			errs = append(errs, fmt.Errorf("config: http.outbox_ui_hosts[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// validCommands checks the commands block: room-service's bounds.
func validCommands(c CommandsConfig) error {
	var errs []error
	if c.Retention < time.Minute {
		errs = append(errs, fmt.Errorf("config: commands.retention: %v: must be at least 1m (a client's retries must fall inside it)", c.Retention))
	}
	if c.RetentionInterval < 0 {
		errs = append(errs, fmt.Errorf("config: commands.retention_interval: %v: must not be negative", c.RetentionInterval))
	}
	if c.RetentionBatch < 0 || c.RetentionBatch > 100000 {
		errs = append(errs, fmt.Errorf("config: commands.retention_batch: %d: must be 1 to 100000", c.RetentionBatch))
	}
	return errors.Join(errs...)
}

// errFakeIM answers tencent_im.fake: true. The fake lives in the demo
// command, so that this binary links no test machinery.
var errFakeIM = errors.New("config: tencent_im.fake: true: room-service has no in-process Tencent IM fake; " +
	"run the demo (go run ./examples/roomservice/demo), or serve the fake for this config " +
	"(go run ./examples/roomservice/demo -fake-im -config FILE) and leave tencent_im.fake out")
