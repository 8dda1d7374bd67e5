package roomservice

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// EnvSecretKey, when set, overrides tencent_im.secret_key, so that no
// secret needs to be in a config file.
const EnvSecretKey = "TENCENT_IM_SECRET_KEY"

// Config is room-service's configuration file.
type Config struct {
	// NodeID names this instance in logs and leases. Defaults to
	// <hostname>-<pid>.
	NodeID string `yaml:"node_id"`
	HTTP   struct {
		// Addr is the listen address. Defaults to ":8080".
		Addr string `yaml:"addr"`
	} `yaml:"http"`
	MySQL        MySQLConfig        `yaml:"mysql"`
	TencentIM    TencentIMConfig    `yaml:"tencent_im"`
	OutboxWorker OutboxWorkerConfig `yaml:"outbox_worker"`
	// ShutdownTimeout bounds a graceful stop. Defaults to 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// MetricsStatsInterval is how long one reading of the outbox backlog
	// serves /metrics scrapes. Defaults to 2s.
	MetricsStatsInterval time.Duration `yaml:"metrics_stats_interval"`
}

// MySQLConfig is the mysql block.
type MySQLConfig struct {
	// DSN is the go-sql-driver/mysql DSN of the service's database.
	// Required.
	DSN string `yaml:"dsn"`
	// MaxOpenConns caps the connection pool (sql.DB.SetMaxOpenConns);
	// 0, the default, means no cap.
	MaxOpenConns int `yaml:"max_open_conns"`
}

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
	// SecretKey may be left empty and given in TENCENT_IM_SECRET_KEY.
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
		Retry:          retry,
		KeyAttr:        "room_id",
		Ordering:       c.Ordering,
		Retention:      c.Retention,
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

// LoadConfig reads a YAML file, fills defaults, applies the environment
// and validates. Unknown keys are errors, so a typo fails start-up.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return ParseConfig(data)
}

// ParseConfig is LoadConfig on bytes.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("config: %w", nameFields(data, err))
	}
	if secret := os.Getenv(EnvSecretKey); secret != "" {
		c.TencentIM.SecretKey = secret
	}
	c = c.WithDefaults()
	if err := c.validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// WithDefaults returns a copy of c with the documented defaults filled in.
func (c Config) WithDefaults() Config {
	if c.HTTP.Addr == "" {
		c.HTTP.Addr = ":8080"
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.MySQL.DSN == "" {
		errs = append(errs, errors.New("config: mysql.dsn: required"))
	}
	if c.MySQL.MaxOpenConns < 0 {
		errs = append(errs, fmt.Errorf("config: mysql.max_open_conns: %d: must not be negative (0 means no cap)", c.MySQL.MaxOpenConns))
	}
	if opts, err := c.OutboxWorker.WorkerOptions(); err != nil {
		errs = append(errs, err)
	} else if err := opts.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("config: outbox_worker: %w", err))
	}
	if im := c.TencentIM; im.Fake {
		errs = append(errs, errFakeIM)
	} else {
		if im.BaseURL == "" {
			errs = append(errs, errors.New("config: tencent_im.base_url: required"))
		}
		if im.SDKAppID <= 0 {
			errs = append(errs, fmt.Errorf("config: tencent_im.sdk_app_id %d: must be positive", im.SDKAppID))
		}
		if im.AdminIdentifier == "" {
			errs = append(errs, errors.New("config: tencent_im.admin_identifier: required"))
		}
		if im.SecretKey == "" {
			errs = append(errs, fmt.Errorf("config: tencent_im.secret_key: required (set %s)", EnvSecretKey))
		}
	}
	return errors.Join(errs...)
}

// errFakeIM answers tencent_im.fake: true. The fake lives in the demo
// command, so that this binary links no test machinery.
var errFakeIM = errors.New("config: tencent_im.fake: true: room-service has no in-process Tencent IM fake; " +
	"run the demo (go run ./examples/roomservice/demo), or serve the fake for this config " +
	"(go run ./examples/roomservice/demo -fake-im -config FILE) and leave tencent_im.fake out")

var yamlLineRE = regexp.MustCompile(`^line (\d+): (.*)$`)

// nameFields rewrites yaml's "line N: cannot unmarshal …" errors to name
// the key at that line, e.g. "outbox_worker.poll_interval: cannot …".
func nameFields(data []byte, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return err
	}
	msgs := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		msgs[i] = e
		if m := yamlLineRE.FindStringSubmatch(e); m != nil {
			line, _ := strconv.Atoi(m[1])
			if path := keyAtLine(&root, line, ""); path != "" {
				msgs[i] = path + " (line " + m[1] + "): " + m[2]
			}
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

// keyAtLine returns the dotted path of the key whose value is on line.
func keyAtLine(n *yaml.Node, line int, prefix string) string {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		return keyAtLine(n.Content[0], line, prefix)
	}
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		path := key.Value
		if prefix != "" {
			path = prefix + "." + key.Value
		}
		if val.Line == line && val.Kind == yaml.ScalarNode {
			return path
		}
		if p := keyAtLine(val, line, path); p != "" {
			return p
		}
	}
	return ""
}
