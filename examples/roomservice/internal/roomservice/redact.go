package roomservice

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
)

// The configuration holds three secrets: the database password in the
// DSN, the Tencent IM secret key and the credentials in the NATS URL. Every type that holds one prints, logs
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
	c.MySQL.DSN, c.TencentIM, c.NATS = svckit.RedactDSN(c.MySQL.DSN), c.TencentIM.redacted(), c.NATS.redacted()
	return c
}

// String prints the block with the secret key redacted.
func (c TencentIMConfig) String() string {
	type plain TencentIMConfig
	return fmt.Sprintf("%+v", plain(c.redacted()))
}

// String prints the block with the URL's credentials redacted.
func (c NATSConfig) String() string {
	type plain NATSConfig
	return fmt.Sprintf("%+v", plain(c.redacted()))
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
