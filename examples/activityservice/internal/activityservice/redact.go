package activityservice

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
)

// The configuration holds two secrets: the database password in the DSN
// and the credentials in the NATS URL. Config prints, logs and formats
// (every fmt verb) with them redacted.

func (c Config) redacted() Config {
	c.MySQL.DSN = svckit.RedactDSN(c.MySQL.DSN)
	c.Rooms.NATSURL = svckit.RedactNATSURL(c.Rooms.NATSURL)
	return c
}

// String prints the configuration with its secrets redacted.
func (c Config) String() string {
	type plain Config
	return fmt.Sprintf("%+v", plain(c.redacted()))
}

// Format makes every verb (%v, %+v, %#v, %s, %q, %x …) print String.
func (c Config) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// LogValue makes slog log String.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// String prints the block with the URL's credentials redacted.
func (c RoomsConfig) String() string {
	type plain RoomsConfig
	c.NATSURL = svckit.RedactNATSURL(c.NATSURL)
	return fmt.Sprintf("%+v", plain(c))
}

func (c RoomsConfig) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }
func (c RoomsConfig) LogValue() slog.Value       { return slog.StringValue(c.String()) }
