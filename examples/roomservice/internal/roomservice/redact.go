package roomservice

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
)

// The configuration holds secrets: the database password in the DSN, the
// Tencent IM secret key, the credentials in the NATS URLs, and the sink
// block's (sinks.go: the Kafka SASL password, the webhook's URL, secrets
// and header values). Every type that holds one prints, logs
// (slog.LogValuer) and formats (every fmt verb) with it redacted, so a
// config that ends up in a log line or an error does not leak it.

const redactedMark = svckit.Redacted

func (c TencentIMConfig) redacted() TencentIMConfig {
	if c.SecretKey != "" {
		c.SecretKey = redactedMark
	}
	return c
}

func (c Config) redacted() Config {
	// The nats block and the sink block print redacted (their Format).
	c.MySQL.DSN, c.TencentIM = svckit.RedactDSN(c.MySQL.DSN), c.TencentIM.redacted()
	return c
}

// String prints the block with the secret key redacted.
func (c TencentIMConfig) String() string {
	type plain TencentIMConfig
	return fmt.Sprintf("%+v", plain(c.redacted()))
}

// String prints the block with the URL's credentials redacted (by
// JetStreamConfig's String).
func (c NATSConfig) String() string {
	return fmt.Sprintf("{%v Consumer:%s}", c.JetStreamConfig, c.Consumer)
}

// String prints the configuration with its secrets redacted.
func (c Config) String() string {
	type plain Config
	return fmt.Sprintf("%+v", plain(c.redacted()))
}

// Format makes every verb (%v, %+v, %#v, %s, %q, %x …) print String.
func (c TencentIMConfig) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }
func (c Config) Format(f fmt.State, _ rune)          { _, _ = io.WriteString(f, c.String()) }
func (c NATSConfig) Format(f fmt.State, _ rune)      { _, _ = io.WriteString(f, c.String()) }

// LogValue makes slog log String.
func (c TencentIMConfig) LogValue() slog.Value { return slog.StringValue(c.String()) }
func (c Config) LogValue() slog.Value          { return slog.StringValue(c.String()) }
func (c NATSConfig) LogValue() slog.Value      { return slog.StringValue(c.String()) }
