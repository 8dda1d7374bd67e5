package activityservice

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	inboxmysql "github.com/outboxrelay/outboxrelay/inbox/mysql"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// Config is activity-service's configuration: a YAML file (optional),
// then the environment (EnvSettings), then the defaults. Its conventions
// are room-service's.
type Config struct {
	// NodeID names this instance in logs and leases. Defaults to
	// <hostname>-<pid>.
	NodeID string      `yaml:"node_id"`
	HTTP   HTTPConfig  `yaml:"http"`
	MySQL  MySQLConfig `yaml:"mysql"`
	// Rooms is where room-service's events come from.
	Rooms RoomsConfig `yaml:"rooms"`
	// Inbox keeps the IDs of the processed room events.
	Inbox InboxConfig `yaml:"inbox"`
	// Levels are the thresholds of gift points sent at which a user
	// reaches level 1, 2, …: strictly increasing, positive. Defaults to
	// DefaultLevels.
	Levels []int64 `yaml:"levels"`
	// Outbox is activity-service's own outbox, which delivers its
	// UserLevelUp events.
	Outbox OutboxConfig `yaml:"outbox"`
	// ShutdownTimeout bounds a graceful stop after the drain delay.
	// Defaults to 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
}

// HTTPConfig is the http block (svckit.HTTP): Addr serves the read API
// (GET /users/{id}/activity) and the probes, and defaults to ":8081";
// AdminAddr serves /metrics, /healthz and /readyz, and defaults to
// "127.0.0.1:9091".
type HTTPConfig = svckit.HTTP

// MySQLConfig is the mysql block (svckit.MySQL): activity-service's own
// database (not room-service's). MaxOpenConns defaults to 10, and at
// least 2 (the consumer and the outbox worker); MaxIdleConns to
// MaxOpenConns.
type MySQLConfig = svckit.MySQL

// RoomsConfig is the rooms block: the JetStream stream room-service
// relays its events to, and this service's durable consumer of it.
type RoomsConfig struct {
	// NATSURL is the NATS server, or several separated by commas. It may
	// hold credentials; give it in NATS_URL or the file NATS_URL_FILE
	// names. Never printed with them. Required.
	NATSURL string `yaml:"nats_url"`
	// Stream is room-service's stream. Defaults to "ROOMS".
	Stream string `yaml:"stream"`
	// SubjectPrefix is room-service's subject prefix: the consumer reads
	// <prefix>.>. Defaults to "rooms".
	SubjectPrefix string `yaml:"subject_prefix"`
	// Durable names the durable consumer (every instance shares it).
	// Defaults to "activity".
	Durable string `yaml:"durable"`
	// AckWait is how long JetStream waits for an acknowledgement before
	// it delivers the message again: a killed instance's messages come
	// back after it. Defaults to 30s; at least 1s.
	AckWait time.Duration `yaml:"ack_wait"`
	// MaxAckPending bounds the messages delivered and not yet
	// acknowledged. Defaults to 1000.
	MaxAckPending int `yaml:"max_ack_pending"`
	// FetchBatch and FetchWait are one pull: up to FetchBatch messages,
	// waiting up to FetchWait for them. Defaults to 50 and 1s.
	FetchBatch int           `yaml:"fetch_batch"`
	FetchWait  time.Duration `yaml:"fetch_wait"`
	// RetryDelay is how long a message whose processing failed (the
	// database is down) waits before JetStream delivers it again.
	// Defaults to 1s.
	RetryDelay time.Duration `yaml:"retry_delay"`
	// StartupTimeout is how long start-up waits for NATS and the stream
	// (room-service creates it). Defaults to 1m.
	StartupTimeout time.Duration `yaml:"startup_timeout"`
}

// InboxConfig is the inbox block (svckit.Retention). Retention is how
// long a processed event ID is remembered: a redelivery within it is
// absorbed, one after it is applied again. It must be longer than an
// event can be late (room-service's retries plus the stream's
// redeliveries). Defaults to 168h; older IDs are deleted every
// retention_interval (1m), retention_batch (1000) per statement.
type InboxConfig = svckit.Retention

// OutboxConfig is the outbox block: the activity_outbox table and the
// worker that publishes its UserLevelUp events to NATS JetStream.
type OutboxConfig struct {
	// Table is the outbox table. Defaults to "activity_outbox".
	Table string `yaml:"table"`
	// Stream is the stream the events go to, created at start-up when
	// missing, with subjects SubjectPrefix.>. Defaults to "ACTIVITY".
	Stream string `yaml:"stream"`
	// SubjectPrefix: an event goes to <prefix>.UserLevelUp.<user_id>.
	// Defaults to "activity".
	SubjectPrefix string `yaml:"subject_prefix"`
	// PollInterval, BatchSize and PublishTimeout are the worker's
	// (defaults 1s, 100, 3s). Retries are exponential with jitter, up
	// to 1m apart, and never give up.
	PollInterval   time.Duration `yaml:"poll_interval"`
	BatchSize      int           `yaml:"batch_size"`
	PublishTimeout time.Duration `yaml:"publish_timeout"`
	// Retention deletes published events older than this. Defaults to
	// 168h.
	Retention time.Duration `yaml:"retention"`
}

// The defaults WithDefaults fills in.
const (
	DefaultHTTPAddr          = ":8081"
	DefaultAdminAddr         = "127.0.0.1:9091"
	DefaultMaxOpenConns      = 10
	DefaultStartupTimeout    = time.Minute
	DefaultRoomsStream       = "ROOMS"
	DefaultRoomsPrefix       = "rooms"
	DefaultDurable           = "activity"
	DefaultAckWait           = 30 * time.Second
	DefaultMaxAckPending     = 1000
	DefaultFetchBatch        = 50
	DefaultFetchWait         = time.Second
	DefaultRetryDelay        = time.Second
	DefaultInboxRetention    = 7 * 24 * time.Hour
	DefaultRetentionInterval = svckit.DefaultRetentionInterval
	DefaultRetentionBatch    = svckit.DefaultRetentionBatch
	DefaultOutboxTable       = "activity_outbox"
	DefaultOutboxStream      = "ACTIVITY"
	DefaultOutboxPrefix      = "activity"
	DefaultOutboxRetention   = 7 * 24 * time.Hour
	DefaultShutdownTimeout   = 30 * time.Second
	// MinAckWait is the shortest rooms.ack_wait: a message must be
	// processed within it, or it is delivered again while in flight.
	MinAckWait = time.Second
)

// DefaultLevels are the gift points sent for levels 1 to 5.
var DefaultLevels = []int64{100, 500, 2000, 10000, 50000}

// WithDefaults returns a copy of c with the documented defaults filled in
// for every zero value.
func (c Config) WithDefaults() Config {
	c.HTTP = c.HTTP.WithDefaults(DefaultHTTPAddr, DefaultAdminAddr)
	// Every open connection may idle: the consumer and the worker keep
	// theirs busy.
	c.MySQL = c.MySQL.WithDefaults(DefaultMaxOpenConns, math.MaxInt)
	r := &c.Rooms
	svckit.OrDefault(&r.Stream, DefaultRoomsStream)
	svckit.OrDefault(&r.SubjectPrefix, DefaultRoomsPrefix)
	svckit.OrDefault(&r.Durable, DefaultDurable)
	svckit.OrDefault(&r.AckWait, DefaultAckWait)
	svckit.OrDefault(&r.MaxAckPending, DefaultMaxAckPending)
	svckit.OrDefault(&r.FetchBatch, DefaultFetchBatch)
	svckit.OrDefault(&r.FetchWait, DefaultFetchWait)
	svckit.OrDefault(&r.RetryDelay, DefaultRetryDelay)
	svckit.OrDefault(&r.StartupTimeout, DefaultStartupTimeout)
	c.Inbox = c.Inbox.WithDefaults(DefaultInboxRetention)
	if len(c.Levels) == 0 {
		c.Levels = slices.Clone(DefaultLevels)
	}
	o := &c.Outbox
	svckit.OrDefault(&o.Table, DefaultOutboxTable)
	svckit.OrDefault(&o.Stream, DefaultOutboxStream)
	svckit.OrDefault(&o.SubjectPrefix, DefaultOutboxPrefix)
	svckit.OrDefault(&o.Retention, DefaultOutboxRetention)
	svckit.OrDefault(&c.ShutdownTimeout, DefaultShutdownTimeout)
	return c
}

// LoadConfig reads a YAML file, applies the environment (EnvSettings),
// fills defaults and validates. Unknown keys are errors, so a typo fails
// start-up. With path "", the settings come from the environment alone.
func LoadConfig(path string) (Config, error) { return svckit.LoadConfig(path, ParseConfig) }

// ParseConfig is LoadConfig on bytes; empty data is an empty file.
func ParseConfig(data []byte) (Config, error) {
	return svckit.ParseConfig(data, EnvSettings, Config.WithDefaults, Config.Validate)
}

// Validate checks a configuration that has its defaults; every error
// names the key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key string, v any, why string) { errs = append(errs, fmt.Errorf("config: %s %v: %s", key, v, why)) }
	errs = append(errs, c.HTTP.Validate(), c.MySQL.Validate())
	if c.MySQL.MaxOpenConns < 2 {
		bad("mysql.max_open_conns", c.MySQL.MaxOpenConns, "must be at least 2 (the consumer and the outbox worker)")
	}
	errs = append(errs, c.Rooms.validate(), validInbox(c.Inbox), validLevels(c.Levels), c.Outbox.validate())
	if c.ShutdownTimeout < 0 {
		bad("shutdown_timeout", c.ShutdownTimeout, "must not be negative")
	}
	return errors.Join(errs...)
}

func (r RoomsConfig) validate() error {
	var errs []error
	bad := func(key string, v any, why string) {
		errs = append(errs, fmt.Errorf("config: rooms.%s %v: %s", key, v, why))
	}
	if r.NATSURL == "" {
		errs = append(errs, fmt.Errorf("config: rooms.nats_url: required (or set %s or %s)", EnvNATSURL, EnvNATSURLFile))
	} else if _, err := svckit.NATSURLs(r.NATSURL); err != nil {
		errs = append(errs, fmt.Errorf("config: rooms.nats_url: %w", err))
	}
	errs = append(errs, svckit.Stream{Name: r.Stream, SubjectPrefix: r.SubjectPrefix}.Validate("rooms"), svckit.ValidName("rooms.durable", r.Durable))
	if r.AckWait < MinAckWait {
		bad("ack_wait", r.AckWait, fmt.Sprintf("must be at least %v", MinAckWait))
	}
	if r.MaxAckPending < 1 || r.FetchBatch < 1 || r.FetchBatch > r.MaxAckPending {
		bad("fetch_batch, max_ack_pending", []int{r.FetchBatch, r.MaxAckPending}, "must be 1 <= fetch_batch <= max_ack_pending")
	}
	if r.FetchWait < 10*time.Millisecond || r.FetchWait >= r.AckWait {
		bad("fetch_wait", r.FetchWait, "must be at least 10ms and below ack_wait")
	}
	if r.RetryDelay < 0 || r.StartupTimeout < 0 {
		bad("retry_delay, startup_timeout", []time.Duration{r.RetryDelay, r.StartupTimeout}, "must not be negative")
	}
	return errors.Join(errs...)
}

// validInbox checks the inbox block: activity-service's bounds, the
// batch's being the inbox's Purge's.
func validInbox(c InboxConfig) error {
	var errs []error
	if c.Retention < time.Hour {
		errs = append(errs, fmt.Errorf("config: inbox.retention %v: must be at least 1h (longer than an event can be late)", c.Retention))
	}
	if c.RetentionInterval < 0 {
		errs = append(errs, fmt.Errorf("config: inbox.retention_interval %v: must not be negative", c.RetentionInterval))
	}
	if c.RetentionBatch < 1 || c.RetentionBatch > inboxmysql.MaxPurgeBatch {
		errs = append(errs, fmt.Errorf("config: inbox.retention_batch %d: must be 1 to %d", c.RetentionBatch, inboxmysql.MaxPurgeBatch))
	}
	return errors.Join(errs...)
}

func (o OutboxConfig) validate() error {
	var errs []error
	// mysql.New checks the table name; it does not touch the pool.
	if _, err := mysql.New(new(sql.DB), mysql.Options{Table: o.Table}); err != nil {
		errs = append(errs, fmt.Errorf("config: outbox.table: %w", err))
	}
	errs = append(errs, o.stream().Validate("outbox"))
	if _, err := o.workerOptions(); err != nil {
		errs = append(errs, fmt.Errorf("config: outbox: %w", err))
	}
	return errors.Join(errs...)
}

// workerOptions are the outbox worker's options from the block.
func (o OutboxConfig) workerOptions() (outbox.WorkerOptions, error) {
	opts := outbox.WorkerOptions{
		Name: o.Table, PollInterval: o.PollInterval, BatchSize: o.BatchSize, PublishTimeout: o.PublishTimeout,
		Retry: outbox.Exponential{Max: time.Minute}, KeyAttr: "user_id", Retention: o.Retention,
	}
	return opts, opts.Validate()
}

func validLevels(levels []int64) error {
	for i, l := range levels {
		if l <= 0 || i > 0 && l <= levels[i-1] {
			return fmt.Errorf("config: levels %v: must be positive and strictly increasing", levels)
		}
	}
	if len(levels) > maxLevels {
		return fmt.Errorf("config: levels: %d thresholds: at most %d", len(levels), maxLevels)
	}
	return nil
}

// maxLevels bounds the thresholds, and so the level-ups one gift can
// cause.
const maxLevels = 100

// stream is the level-up stream, created at start-up with a 10m
// duplicate window when missing.
func (o OutboxConfig) stream() svckit.Stream {
	return svckit.Stream{Name: o.Stream, SubjectPrefix: o.SubjectPrefix, Duplicates: 10 * time.Minute}
}
