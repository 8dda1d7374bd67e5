package roomservice

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	"github.com/outboxrelay/outboxrelay/sink/kafka"
)

// The environment variables that override the file, so that no secret
// needs to be in a config file or an image, and so that an image can be
// configured from the environment alone. A *_FILE variable names a file
// holding the value (a mounted Kubernetes or Docker secret), trimmed of
// its trailing newline; the plain variable wins when both are set.
const (
	EnvMySQLDSN        = svckit.EnvMySQLDSN
	EnvMySQLDSNFile    = svckit.EnvMySQLDSNFile
	EnvSecretKey       = "TENCENT_IM_SECRET_KEY"
	EnvSecretKeyFile   = "TENCENT_IM_SECRET_KEY_FILE"
	EnvBaseURL         = "TENCENT_IM_BASE_URL"
	EnvSDKAppID        = "TENCENT_IM_SDK_APP_ID"
	EnvAdminIdentifier = "TENCENT_IM_ADMIN_IDENTIFIER"
	EnvNodeID          = "ROOMSERVICE_NODE_ID"
	EnvNATSURL         = svckit.EnvNATSURL
	EnvNATSURLFile     = svckit.EnvNATSURLFile
	// The sink block's (sinks.go).
	EnvSinkKind           = "ROOMSERVICE_SINK_KIND"
	EnvSinkNATSURL        = "SINK_NATS_URL"
	EnvSinkNATSURLFile    = "SINK_NATS_URL_FILE"
	EnvKafkaSeeds         = "KAFKA_SEEDS"
	EnvKafkaTopic         = "KAFKA_TOPIC"
	EnvKafkaPassword      = "KAFKA_SASL_PASSWORD"
	EnvKafkaPasswordFile  = "KAFKA_SASL_PASSWORD_FILE"
	EnvWebhookURL         = "WEBHOOK_URL"
	EnvWebhookURLFile     = "WEBHOOK_URL_FILE"
	EnvWebhookSecrets     = "WEBHOOK_SECRETS"
	EnvWebhookSecretsFile = "WEBHOOK_SECRETS_FILE"
	// The watermill sub-block's (watermill.go).
	EnvWatermillAMQPURL           = "WATERMILL_AMQP_URL"
	EnvWatermillAMQPURLFile       = "WATERMILL_AMQP_URL_FILE"
	EnvWatermillRedisPassword     = "WATERMILL_REDIS_PASSWORD"
	EnvWatermillRedisPasswordFile = "WATERMILL_REDIS_PASSWORD_FILE"
)

// EnvSettings lists what the environment can set, in the order of the
// usage text.
var EnvSettings = []svckit.EnvSetting[Config]{
	svckit.MySQLEnv(func(c *Config) *MySQLConfig { return &c.MySQL }),
	svckit.Env(svckit.EnvVar{Var: EnvSecretKey, FileVar: EnvSecretKeyFile, Key: "tencent_im.secret_key"}, func(c *Config, v string) { c.TencentIM.SecretKey = v }),
	svckit.Env(svckit.EnvVar{Var: EnvBaseURL, Key: "tencent_im.base_url"}, func(c *Config, v string) { c.TencentIM.BaseURL = v }),
	{EnvVar: svckit.EnvVar{Var: EnvSDKAppID, Key: "tencent_im.sdk_app_id"}, Set: func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n <= 0 {
			return fmt.Errorf("%q: must be a positive integer", v)
		}
		c.TencentIM.SDKAppID = n
		return nil
	}},
	svckit.Env(svckit.EnvVar{Var: EnvAdminIdentifier, Key: "tencent_im.admin_identifier"}, func(c *Config, v string) { c.TencentIM.AdminIdentifier = v }),
	svckit.Env(svckit.EnvVar{Var: EnvNodeID, Key: "node_id"}, func(c *Config, v string) { c.NodeID = v }),
	svckit.Env(svckit.EnvVar{Var: EnvNATSURL, FileVar: EnvNATSURLFile, Key: "nats.url"}, func(c *Config, v string) { c.NATS.URL = v }),
	svckit.Env(svckit.EnvVar{Var: EnvSinkKind, Key: "sink.kind"}, func(c *Config, v string) { c.Sink.Kind = v }),
	svckit.Env(svckit.EnvVar{Var: EnvSinkNATSURL, FileVar: EnvSinkNATSURLFile, Key: "sink.natsjs.url"}, func(c *Config, v string) { c.Sink.NATSJS.URL = v }),
	svckit.Env(svckit.EnvVar{Var: EnvKafkaSeeds, Key: "sink.kafka.seeds (comma-separated)"}, func(c *Config, v string) { c.Sink.Kafka.Seeds = splitList(v) }),
	svckit.Env(svckit.EnvVar{Var: EnvKafkaTopic, Key: "sink.kafka.topic"}, func(c *Config, v string) { c.Sink.Kafka.Topic = v }),
	svckit.Env(svckit.EnvVar{Var: EnvKafkaPassword, FileVar: EnvKafkaPasswordFile, Key: "sink.kafka.sasl.password"}, func(c *Config, v string) {
		c.Sink.Kafka.SASL.Password = kafka.Secret(v)
	}),
	svckit.Env(svckit.EnvVar{Var: EnvWebhookURL, FileVar: EnvWebhookURLFile, Key: "sink.webhook.url"}, func(c *Config, v string) { c.Sink.Webhook.URL = v }),
	svckit.Env(svckit.EnvVar{Var: EnvWebhookSecrets, FileVar: EnvWebhookSecretsFile, Key: "sink.webhook.secrets (comma-separated)"}, func(c *Config, v string) {
		c.Sink.Webhook.Secrets = splitList(v)
	}),
	svckit.Env(svckit.EnvVar{Var: EnvWatermillAMQPURL, FileVar: EnvWatermillAMQPURLFile, Key: "sink.watermill.amqp_url"}, func(c *Config, v string) {
		c.Sink.Watermill.AMQPURL = v
	}),
	svckit.Env(svckit.EnvVar{Var: EnvWatermillRedisPassword, FileVar: EnvWatermillRedisPasswordFile, Key: "sink.watermill.redis_password"}, func(c *Config, v string) {
		c.Sink.Watermill.RedisPassword = v
	}),
}

// splitList splits a comma-separated list, trimming spaces (and the
// newlines a file holds) and dropping empty items.
func splitList(v string) []string {
	var items []string
	for _, s := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if s = strings.TrimSpace(s); s != "" {
			items = append(items, s)
		}
	}
	return items
}

// maxSecretFile bounds what a *_FILE variable's file may hold.
const maxSecretFile = svckit.MaxSecretFile
