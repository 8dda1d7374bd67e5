package roomservice

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// shippedConfigs are the configuration files beside the command, in
// examples/roomservice: config.yaml and whatever other config*.yaml.
var shippedConfigs, _ = filepath.Glob("../../config*.yaml")

// imBlock is a valid tencent_im block, for tests about the rest.
const imBlock = "tencent_im:\n  base_url: https://console.tim.qq.com\n  sdk_app_id: 1400000000\n  admin_identifier: administrator\n  secret_key: k\n"

// TestShippedConfigFilesParse loads every config*.yaml beside the
// command, with the environment set, and checks that each parses and that
// the environment overrides it. What the files say is theirs.
func TestShippedConfigFilesParse(t *testing.T) {
	require.Contains(t, shippedConfigs, "../../config.yaml")
	env := map[string]string{
		EnvMySQLDSN: "env@tcp(db:3306)/rooms", EnvSecretKey: "from-the-environment", EnvBaseURL: "https://console.tim.qq.com",
		EnvSDKAppID: "1400000042", EnvAdminIdentifier: "env-admin", EnvNodeID: "env-node",
		// The sinks' secrets, which the examples leave to the environment.
		EnvKafkaPassword: "kafka-pass", EnvWebhookSecrets: testWebhookSecret, EnvWatermillAMQPURL: "amqp://rs:amqp-pass@rabbitmq:5672/",
	}
	for _, name := range shippedConfigs {
		t.Run(filepath.Base(name), func(t *testing.T) {
			clearEnv(t)
			for k, v := range env {
				t.Setenv(k, v)
			}
			cfg, err := LoadConfig(name)
			require.NoError(t, err)
			require.Equal(t, "env@tcp(db:3306)/rooms", cfg.MySQL.DSN, "%s overrides the file", EnvMySQLDSN)
			require.Equal(t, TencentIMConfig{BaseURL: "https://console.tim.qq.com", SDKAppID: 1400000042, AdminIdentifier: "env-admin", SecretKey: "from-the-environment"},
				cfg.TencentIM, "the environment overrides the file")
			require.Equal(t, "env-node", cfg.NodeID)
		})
	}
}

// TestShippedConfigsNameTheDashboardHosts: every config file says which
// hosts the outbox dashboard answers to, and none but loopback.
func TestShippedConfigsNameTheDashboardHosts(t *testing.T) {
	for _, name := range shippedConfigs {
		data, err := os.ReadFile(name)
		require.NoError(t, err)
		require.Regexp(t, `(?m)^  outbox_ui_hosts: \[\]`, string(data), "%s says which hosts serve the dashboard", name)
	}
}

func TestConfigDefaults(t *testing.T) {
	clearEnv(t)
	minimal := "mysql:\n  dsn: \"root@tcp(db:3306)/rooms\"\n" + imBlock
	for name, yaml := range map[string]string{
		"block missing":   minimal,
		"zeros":           minimal + "outbox_worker:\n  poll_interval: 0s\n  batch_size: 0\n  publish_timeout: 0s\n  retry_strategy: \"\"\n",
		"negative values": minimal + "outbox_worker:\n  poll_interval: -1s\n  batch_size: -5\n  publish_timeout: -3s\n",
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(yaml))
			require.NoError(t, err)
			require.Equal(t, ":8080", cfg.HTTP.Addr)
			require.Empty(t, cfg.HTTP.OutboxUIHosts, "the dashboard answers to loopback only")
			require.Equal(t, 30*time.Second, cfg.ShutdownTimeout)
			require.Equal(t, MySQLConfig{DSN: "root@tcp(db:3306)/rooms", MaxOpenConns: 20, MaxIdleConns: 10, ConnMaxLifetime: 5 * time.Minute,
				ConnMaxIdleTime: time.Minute, StartupTimeout: time.Minute}, cfg.MySQL, "the pool is bounded by default")
			require.True(t, cfg.OutboxWorker.WorkerEnabled(), "enabled unless switched off")
			opts, err := cfg.OutboxWorker.WorkerOptions()
			require.NoError(t, err)
			w, err := outbox.NewWorker(nopStore{}, outbox.SinkFunc(nil), opts)
			require.NoError(t, err)
			got := w.Options()
			require.Equal(t, time.Second, got.PollInterval, "<= 0 falls back to 1s, never a busy loop")
			require.Equal(t, 100, got.BatchSize, "<= 0 falls back to 100, never a table scan")
			require.Equal(t, 3*time.Second, got.PublishTimeout, "<= 0 falls back to 3s, never unbounded")
			require.Equal(t, outbox.DefaultAfterCommitTimeout, got.AfterCommitTimeout, "the request waits at most the worker's default")
			require.Equal(t, outbox.FixedInterval{Interval: time.Second}, got.Retry)
			require.Equal(t, "room_outbox", got.Name)
			require.Equal(t, "room_id", got.KeyAttr)
		})
	}
	cfg, err := ParseConfig([]byte(minimal + "outbox_worker:\n  after_commit_timeout: 2s\n"))
	require.NoError(t, err)
	opts, err := cfg.OutboxWorker.WorkerOptions()
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, opts.AfterCommitTimeout, "after_commit_timeout reaches the worker")

	cfg, err = ParseConfig([]byte(minimal + "outbox_worker:\n  enabled: false\n"))
	require.NoError(t, err)
	require.False(t, cfg.OutboxWorker.WorkerEnabled(), "tests can switch the worker off")

	cfg, err = ParseConfig([]byte(minimal + "outbox_worker:\n  retry_strategy: exponential\n  retry_initial_interval: 2s\n" +
		"  retry_max_interval: 10m\n  retry_multiplier: 3\n  retry_jitter: 0.1\n  retry_max_attempts: 20\n  ordering: true\n"))
	require.NoError(t, err)
	opts, err = cfg.OutboxWorker.WorkerOptions()
	require.NoError(t, err)
	require.Equal(t, outbox.MaxAttempts{Attempts: 20, Policy: outbox.Exponential{Initial: 2 * time.Second, Max: 10 * time.Minute, Multiplier: 3, Jitter: 0.1}}, opts.Retry)
	require.True(t, opts.Ordering)
}

func TestConfigRejectsMistakes(t *testing.T) {
	base := "mysql:\n  dsn: \"root@tcp(db:3306)/rooms\"\n"
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown retry strategy", base + imBlock + "outbox_worker:\n  retry_strategy: exponential_backof\n", `retry_strategy "exponential_backof": unknown`},
		{"typo in a key", base + imBlock + "outbox_worker:\n  pol_interval: 1s\n", "field pol_interval not found"},
		{"bad exponential parameters", base + imBlock + "outbox_worker:\n  retry_strategy: exponential\n  retry_multiplier: 0.5\n", "multiplier 0.5: must be at least 1"},
		{"negative max attempts", base + imBlock + "outbox_worker:\n  retry_max_attempts: -1\n", "retry_max_attempts -1"},
		{"busy loop", base + imBlock + "outbox_worker:\n  poll_interval: 1ms\n", "config: outbox_worker: outbox: PollInterval 1ms: must be at least 10ms"},
		{"batch too big", base + imBlock + "outbox_worker:\n  batch_size: 50000\n", "BatchSize 50000: must be at most 10000"},
		{"bad duration", base + imBlock + "outbox_worker:\n  poll_interval: soon\n", "poll_interval"},
		{"no dsn", imBlock, "mysql.dsn: required"},
		{"DSN that does not parse", strings.Replace(base, "/rooms", "", 1) + imBlock, `mysql.dsn: does not parse`},
		{"DSN without a database", strings.Replace(base, "/rooms", "/", 1) + imBlock, "mysql.dsn root@tcp(db:3306)/: names no database"},
		{"negative startup timeout", base + "  startup_timeout: -1s\n" + imBlock, "startup_timeout -1s: must not be negative"},
		{"negative pool cap", base + "  max_open_conns: -1\n" + imBlock, "mysql.max_open_conns: -1: must not be negative"},
		{"real IM without settings", base, "tencent_im.base_url: required"},
		{"dashboard host with a port", base + imBlock + "http:\n  outbox_ui_hosts: [ok.example, \"dash.example.com:9090\"]\n",
			`config: http.outbox_ui_hosts[1]: outboxui: host "dash.example.com:9090": must be a host name or an IP address, without a port`},
		{"dashboard host wildcard", base + imBlock + "http:\n  outbox_ui_hosts: [\"*.example.com\"]\n",
			`config: http.outbox_ui_hosts[0]: outboxui: host "*.example.com": wildcards are not supported`},
		{"dashboard host that is not one", base + imBlock + "http:\n  outbox_ui_hosts: [\"a b\\u0000\"]\n",
			`config: http.outbox_ui_hosts[0]: outboxui: host "a b\x00": is not a host name`},
		{"the fake", base + "tencent_im:\n  fake: true\n", "config: tencent_im.fake: true: room-service has no in-process Tencent IM fake; run the demo (go run ./examples/roomservice/demo)"},
		{"real IM without secret", base + "tencent_im:\n  base_url: https://console.tim.qq.com\n  sdk_app_id: 1400000000\n  admin_identifier: admin\n", "tencent_im.secret_key: required (set TENCENT_IM_SECRET_KEY or TENCENT_IM_SECRET_KEY_FILE)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			_, err := ParseConfig([]byte(tc.yaml))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestConfigSecretNeverInErrors(t *testing.T) {
	clearEnv(t)
	yaml := "mysql:\n  dsn: \"\"\ntencent_im:\n  base_url: \"::bad\"\n  sdk_app_id: -1\n  admin_identifier: a\n  secret_key: very-secret-key-42\n"
	_, err := ParseConfig([]byte(yaml))
	require.Error(t, err)
	require.False(t, strings.Contains(err.Error(), "very-secret-key-42"))
}

// nopStore lets NewWorker check options; it is never used.
type nopStore struct{ backend.Store }

func TestRetryPolicy(t *testing.T) {
	valid := []struct {
		name string
		in   OutboxWorkerConfig
		want outbox.RetryPolicy
	}{
		{"zero value", OutboxWorkerConfig{}, outbox.FixedInterval{}},
		{"fixed", OutboxWorkerConfig{RetryStrategy: "fixed_interval", RetryInterval: 5 * time.Second}, outbox.FixedInterval{Interval: 5 * time.Second}},
		{"fixed, capped", OutboxWorkerConfig{RetryStrategy: "fixed_interval", RetryMaxAttempts: 10}, outbox.MaxAttempts{Policy: outbox.FixedInterval{}, Attempts: 10}},
		{"exponential", OutboxWorkerConfig{RetryStrategy: "exponential", RetryInitialInterval: time.Second, RetryMaxInterval: time.Minute, RetryMultiplier: 3, RetryJitter: 0.1},
			outbox.Exponential{Initial: time.Second, Max: time.Minute, Multiplier: 3, Jitter: 0.1}},
		{"exponential, defaults, capped", OutboxWorkerConfig{RetryStrategy: "exponential", RetryMaxAttempts: 8}, outbox.MaxAttempts{Policy: outbox.Exponential{}, Attempts: 8}},
	}
	for _, tc := range valid {
		p, err := tc.in.retryPolicy()
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, p, tc.name)
	}
	invalid := []struct {
		name string
		in   OutboxWorkerConfig
		want string
	}{
		{"unknown word", OutboxWorkerConfig{RetryStrategy: "linear"}, `retry_strategy "linear": unknown`},
		{"upper case", OutboxWorkerConfig{RetryStrategy: "FIXED_INTERVAL"}, `retry_strategy "FIXED_INTERVAL": unknown`},
		{"negative interval", OutboxWorkerConfig{RetryInterval: -time.Second}, "FixedInterval{-1s}"},
		{"negative attempts", OutboxWorkerConfig{RetryMaxAttempts: -1}, "retry_max_attempts -1"},
		{"multiplier", OutboxWorkerConfig{RetryStrategy: "exponential", RetryMultiplier: 0.5}, "multiplier 0.5"},
		{"jitter", OutboxWorkerConfig{RetryStrategy: "exponential", RetryJitter: 2}, "jitter 2"},
		{"cap below start", OutboxWorkerConfig{RetryStrategy: "exponential", RetryInitialInterval: time.Hour, RetryMaxInterval: time.Minute}, "max interval 1m0s"},
	}
	for _, tc := range invalid {
		_, err := tc.in.WorkerOptions()
		require.ErrorContains(t, err, tc.want, tc.name)
	}
}
